package acl

import (
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/zones"
)

// visible denies an entry the actor's view cannot reach.
func visible(a Actor, e Entry) Decision {
	if e.GroupsDir || zones.Visible(a.User, a.Groups, e.Zone) {
		return Decision{}
	}
	if e.Zone.Kind == shedfs.ZoneGroup {
		return deny(syscall.EACCES, ReasonNotMember)
	}
	return deny(syscall.ENOENT, ReasonNotVisible)
}

// CheckName decides a name alone: ENAMETOOLONG over 255 bytes, EINVAL for
// "", ".", ".." or one containing '/' or NUL. The FUSE layer asks it on
// lookup, which the kernel sends before create, rename or link.
func CheckName(name string) Decision { return checkName(name) }

func checkName(name string) Decision {
	switch shedfs.CheckName(name) {
	case 0:
		return Decision{}
	case syscall.ENAMETOOLONG:
		return deny(syscall.ENAMETOOLONG, ReasonNameTooLong)
	default:
		return deny(syscall.EINVAL, ReasonBadName)
	}
}

// adds reports whether op puts a new name into a directory.
func adds(op Op) bool { return op == OpCreate || op == OpSymlink || op == OpLink }

// removes reports whether op takes a name out of a directory (and not
// elsewhere: Rename is both).
func removes(op Op) bool { return op == OpUnlink || op == OpRmdir }

// dirStructure is the structural part of the rule for a directory whose
// entries change: visibility, groups/, reserved names of the view root.
func dirStructure(a Actor, op Op, dir Entry, name string) Decision {
	if d := visible(a, dir); !d.Allowed() {
		return d
	}
	if op == OpRead {
		return Decision{}
	}
	if dir.GroupsDir {
		return deny(syscall.EACCES, ReasonGroupsReadonly)
	}
	if dir.ViewRoot() && zones.IsReservedIn(dir.Zone.Kind, name) {
		if adds(op) {
			return deny(syscall.EEXIST, ReasonReservedName)
		}
		return deny(syscall.EPERM, ReasonReservedName)
	}
	return Decision{}
}

// dirPolicy is the policy part of the rule for a directory whose entries
// change: the zone's policy, then the directory's ownership mode.
func dirPolicy(a Actor, op Op, dir Entry) Decision {
	if op == OpRead {
		return Decision{}
	}
	if zones.SessionReadonly(a.Session, dir.Zone) {
		return deny(syscall.EACCES, ReasonSessionReadonly)
	}
	pol := zones.PolicyOf(dir.Zone.Kind)
	if removes(op) && !pol.Removable || !removes(op) && !pol.Writable {
		return deny(syscall.EACCES, ReasonUploadsReadonly)
	}
	switch zones.EffectiveMode(dir.Zone.Kind, dir.Mode) {
	case shedfs.OwnModeOwner:
		if !isOwner(a, dir) {
			return deny(syscall.EACCES, ReasonDirMode)
		}
	case shedfs.OwnModeOwnerRO:
		return deny(syscall.EACCES, ReasonDirMode)
	}
	return Decision{}
}

// CheckDir decides op on the directory dir whose entries change: Create,
// Symlink or Link add name; Unlink or Rmdir remove it; Rename is asked for
// each side; Read lists dir. It covers visibility, groups/, reserved root
// names, the zone's policy and dir's ownership mode — not name validity,
// the entry itself, symlink targets or quotas, which the per-callback
// functions (Create, Unlink, Rename, ...) add.
func CheckDir(a Actor, op Op, dir Entry, name string) Decision {
	if d := dirStructure(a, op, dir, name); !d.Allowed() {
		return d
	}
	return dirPolicy(a, op, dir)
}

// Check decides op on the existing entry e itself: Read, Write, Truncate,
// Setattr, SetMode, SetOwner, SetZoneXattr, and Unlink, Rmdir, Rename or
// Link of e as the object moved or removed (the directory side is
// CheckDir). For Create and Symlink, which have no entry yet, e is the
// directory receiving it and Check is CheckDir with an ordinary name.
func Check(a Actor, op Op, e Entry) Decision {
	if op == OpCreate || op == OpSymlink {
		return CheckDir(a, op, e, "")
	}
	if d := visible(a, e); !d.Allowed() {
		return d
	}
	if op == OpRead || op == OpLock {
		return Decision{}
	}
	if e.GroupsDir {
		return deny(syscall.EACCES, ReasonGroupsReadonly)
	}
	if op == OpSetZoneXattr {
		return deny(syscall.EPERM, ReasonXattrReadonly)
	}
	if e.Root {
		// Zone roots cannot be removed, moved or linked; the roots of share/
		// and of the groups, which every member relies on and nobody owns,
		// cannot be re-moded, chowned or given away either.
		switch op {
		case OpUnlink, OpRmdir, OpRename, OpLink:
			return deny(syscall.EPERM, ReasonReservedName)
		case OpSetattr, OpSetMode, OpSetOwner:
			if e.sharedRoot() {
				return deny(syscall.EPERM, ReasonReservedName)
			}
		}
	}
	if zones.SessionReadonly(a.Session, e.Zone) {
		return deny(syscall.EACCES, ReasonSessionReadonly)
	}
	pol := zones.PolicyOf(e.Zone.Kind)
	switch op {
	case OpSetMode, OpSetOwner:
		if !pol.OwnModes {
			return deny(syscall.EPERM, ReasonXattrReadonly)
		}
	case OpUnlink, OpRmdir:
		if !pol.Removable {
			return deny(syscall.EACCES, ReasonUploadsReadonly)
		}
	default:
		if !pol.Writable {
			return deny(syscall.EACCES, ReasonUploadsReadonly)
		}
	}
	mode := zones.EffectiveMode(e.Zone.Kind, e.Mode)
	if op == OpSetMode || op == OpSetOwner {
		// Only the owner sets the ownership xattrs, whatever the mode; on
		// owner_ro the owner may only set the mode (back).
		if !isOwner(a, e) {
			return deny(syscall.EPERM, ReasonOwnerOnly)
		}
		if mode == shedfs.OwnModeOwnerRO && op == OpSetOwner {
			return deny(syscall.EPERM, ReasonOwnerRO)
		}
		return Decision{}
	}
	switch mode {
	case shedfs.OwnModeOwner:
		if isOwner(a, e) {
			return Decision{}
		}
		if op == OpWrite || op == OpTruncate {
			return deny(syscall.EACCES, ReasonOwnerOnly)
		}
		return deny(syscall.EPERM, ReasonOwnerOnly)
	case shedfs.OwnModeOwnerRO:
		return deny(syscall.EPERM, ReasonOwnerRO)
	}
	return Decision{}
}
