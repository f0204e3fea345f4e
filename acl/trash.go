package acl

import "syscall"

// A view's trash/ shows the files kept after they left the zones the view
// sees (docs/design.md, "Trash and point-in-time restore"). Reading a kept file follows reading in
// its zone; restoring or purging it follows deleting there: in an owner
// zone only the owner, in owner_ro nobody (the admin acts outside views).
// Nothing else may change in trash/, so no rule of "Rules" can be
// sidestepped through it.

// TrashRead decides reading kept file e (its data, attributes, a listing).
func TrashRead(a Actor, e Entry) Decision { return Read(a, e) }

// TrashChange decides any change in trash/ other than restoring or
// purging: creating, linking or moving a name into it, writing,
// truncating or changing a kept file. Always EACCES (trash_readonly).
func TrashChange() Decision { return deny(syscall.EACCES, ReasonTrashReadonly) }

// TrashPurge decides deleting kept file e for good: as deleting it in its
// zone would be decided.
func TrashPurge(a Actor, e Entry) Decision { return Check(a, OpUnlink, e) }

// TrashRestore decides putting kept file e back as name in dir, replacing
// dst (nil when name is free): e must be in dir's zone (EXDEV, so that mv
// copies), the actor may delete e in its zone, add name to dir, and
// replace dst as a rename would.
func TrashRestore(a Actor, e Entry, dir Entry, name string, dst *Entry) Decision {
	if d := checkName(name); !d.Allowed() {
		return d
	}
	if d := visible(a, e); !d.Allowed() {
		return d
	}
	if d := dirStructure(a, OpCreate, dir, name); !d.Allowed() {
		return d
	}
	if e.Zone != dir.Zone || dst != nil && dst.Zone != dir.Zone {
		return deny(syscall.EXDEV, ReasonCrossZone)
	}
	if d := Check(a, OpUnlink, e); !d.Allowed() {
		return d
	}
	if d := dirPolicy(a, OpCreate, dir); !d.Allowed() {
		return d
	}
	if dst != nil {
		return Check(a, OpRename, *dst)
	}
	return Decision{}
}
