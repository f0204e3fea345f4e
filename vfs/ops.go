package vfs

import (
	"errors"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/zones"
)

// The namespace operations of a view, by inode number, for every door:
// each gathers what acl needs, asks it, records a refusal once (with the
// door), applies the change to the store, records it, and tells the other
// views' kernels through the frontends (fanOut). What the calling door
// needs to update its own kernel is the answer: the record, and the
// content versions its own cache may keep (Version).

// EntryBytes is what a new entry is taken to grow the store by on disk:
// its metadata and, for a file, its blob's inode and shard.
const EntryBytes = shedfs.ChargeUnit

// Clock is the open-file table's persist clock, for a door that reads
// records in a batch (Overlaid).
func (v *View) Clock() uint64 { return v.c.Clock() }

// Overlaid lays the open-file state over rec, read after the clock read
// since.
func (v *View) Overlaid(rec *shedfs.Inode, since uint64) *shedfs.Inode {
	return v.c.overlaid(rec, since)
}

// Load reads at's record with the not yet persisted state of an open file
// laid over it; a reclaimed inode still in its grace is its last record.
func (v *View) Load(at At) (*shedfs.Inode, syscall.Errno) {
	c := v.c
	since := c.Clock()
	rec, err := c.store.GetInode(at.Ino)
	if errors.Is(err, syscall.ENOENT) {
		if g := c.Ghost(at.Ino); g != nil {
			return g, 0
		}
	}
	if err != nil {
		return nil, c.Errno("getattr", err)
	}
	return c.overlaid(rec, since), 0
}

// Visible checks that the view may still reach at: a user removed from a
// group loses the group's inodes even where a kernel still holds them.
func (v *View) Visible(at At, op acl.Op) syscall.Errno {
	if at.Zone.Kind != shedfs.ZoneGroup {
		return 0
	}
	if d := acl.Read(v.Actor(), acl.Entry{Zone: at.Zone, Dir: true}); !d.Allowed() {
		return v.deny(op, at, "", d)
	}
	return 0
}

// Getattr is at's record, if the view may still reach it.
func (v *View) Getattr(at At) (*shedfs.Inode, syscall.Errno) {
	if e := v.Visible(at, acl.OpRead); e != 0 {
		return nil, e
	}
	return v.Load(at)
}

// CheckLookup decides a lookup of name in dir before the store is asked:
// the view must still reach dir, and name must be one a store can hold.
func (v *View) CheckLookup(dir At, name string) syscall.Errno {
	if e := v.Visible(dir, acl.OpRead); e != 0 {
		return e
	}
	if d := acl.CheckName(name); !d.Allowed() {
		return v.deny(acl.OpLookup, dir, name, d)
	}
	return 0
}

// Resolve is name in dir as the view shows it, after CheckLookup: known,
// when not nil, is name's record as a batch just read it (a listing's);
// otherwise the store is asked. since is the persist clock before either
// was read. stored says the store holds the name (a door that tracks
// names its kernel holds as absent settles them by it), even where the
// view shows nothing (a session's placeholder in a session view: ENOENT).
func (v *View) Resolve(dir At, name string, known *shedfs.Inode, since uint64) (rec *shedfs.Inode, stored bool, _ syscall.Errno) {
	c := v.c
	rec, err := known, error(nil)
	if rec == nil {
		rec, err = c.store.Lookup(dir.Ino, name)
	}
	if err != nil {
		return nil, false, c.Errno("lookup", err)
	}
	rec, errno := v.sessionOverlay(rec)
	if errno != 0 {
		return nil, true, errno
	}
	return c.overlaid(rec, since), true, 0
}

// ReservedRoot is the record of a zone root standing under a reserved
// name of the view root (Reserve).
func (v *View) ReservedRoot(ino uint64, name string) (*shedfs.Inode, bool) {
	rec, err := v.c.store.GetInode(ino)
	if err != nil {
		v.c.log.Error("zone root missing", "user", v.user, "name", name, "err", err)
		return nil, false
	}
	return rec, true
}

// sessionOverlay is what this view shows for rec, a directory entry found
// in the store: a session's placeholder is that session's scratch root
// in the user's main view and does not exist in a session view (each
// session sees no other's scratch).
func (v *View) sessionOverlay(rec *shedfs.Inode) (*shedfs.Inode, syscall.Errno) {
	ss, ok := v.c.Placeholder(rec.Ino)
	if !ok || ss.User != v.user {
		return rec, 0
	}
	if v.session != "" {
		return nil, syscall.ENOENT
	}
	root, err := v.c.store.GetInode(ss.Root)
	if err != nil {
		return nil, v.c.Errno("session root", err)
	}
	return root, 0
}

// sessionTarget is what a removal or rename in any view decides about
// rec: a directory an open session relies on (its placeholder, sessions/,
// its uploads/ID) is taken as a zone root, which no view may remove,
// replace or move (reserved_name) while the session is open.
func (v *View) sessionTarget(rec *shedfs.Inode) *shedfs.Inode {
	if _, ok := v.c.pin(rec.Ino); !ok {
		return rec
	}
	pinned := *rec
	pinned.Parent = 0
	return &pinned
}

// Child returns the record of name in dir as a removal or rename decides
// about it: the reserved zone roots of the view root as what they are,
// the directories an open session relies on as zone roots.
func (v *View) Child(dir At, name string) (*shedfs.Inode, syscall.Errno) {
	c := v.c
	if ino, r := v.Reserve(dir.Ino, name); r == ReservedRoot {
		rec, err := c.store.GetInode(ino)
		if err != nil {
			return nil, c.Errno("lookup", err)
		}
		return rec, 0
	}
	rec, err := c.store.Lookup(dir.Ino, name)
	if err != nil {
		return nil, c.Errno("lookup", err)
	}
	return v.sessionTarget(rec), 0
}

// Dirent is one entry of a listing.
type Dirent struct {
	Name string
	Ino  uint64
	Mode uint32
}

// List returns the entries of directory at as this view shows them,
// including "." and ".." and the reserved names in the view root, where
// trash/ is listed with the number trashIno the door gave it.
func (v *View) List(at At, trashIno uint64) ([]Dirent, syscall.Errno) {
	c := v.c
	if e := v.Visible(at, acl.OpRead); e != 0 {
		return nil, e
	}
	rec, e := v.Load(at)
	if e != 0 {
		return nil, e
	}
	parentIno := rec.Parent
	if parentIno == 0 {
		parentIno = rec.Ino
	}
	out := []Dirent{
		{Name: ".", Ino: rec.Ino, Mode: syscall.S_IFDIR},
		{Name: "..", Ino: parentIno, Mode: syscall.S_IFDIR},
	}
	if at.Ino == v.root {
		if v.session != "" {
			out = append(out, Dirent{Name: zones.NameHome, Ino: v.roots.Private, Mode: syscall.S_IFDIR})
		}
		out = append(out,
			Dirent{Name: zones.NameOutput, Ino: v.roots.Output, Mode: syscall.S_IFDIR},
			Dirent{Name: zones.NameUploads, Ino: v.uploads, Mode: syscall.S_IFDIR},
			Dirent{Name: zones.NameShare, Ino: c.store.ShareRoot(), Mode: syscall.S_IFDIR},
			Dirent{Name: zones.NameGroups, Ino: GroupsIno, Mode: syscall.S_IFDIR},
			Dirent{Name: zones.NameTrash, Ino: trashIno, Mode: syscall.S_IFDIR},
			Dirent{Name: zones.NameSnapshots, Ino: SnapshotsIno, Mode: syscall.S_IFDIR},
		)
	}
	entries, err := c.store.ReadDir(at.Ino)
	if err != nil {
		return nil, c.Errno("readdir", err)
	}
	for _, de := range entries {
		if ss, ok := c.Placeholder(de.Ino); ok && ss.User == v.user {
			if v.session != "" {
				continue
			}
			de.Ino = ss.Root
		}
		out = append(out, Dirent{Name: de.Name, Ino: de.Ino, Mode: de.Mode})
	}
	return out, 0
}

// Groups lists groups/: the user's groups now, each with its root.
func (v *View) Groups() []Dirent {
	var list []Dirent
	for _, name := range v.Actor().Groups {
		grp, err := v.c.store.GetGroup(name)
		if err != nil {
			continue
		}
		list = append(list, Dirent{Name: name, Ino: grp.Root, Mode: syscall.S_IFDIR})
	}
	return list
}

// Group is the root of group name in groups/, if the user is in it now.
func (v *View) Group(name string) (*shedfs.Inode, syscall.Errno) {
	if !v.InGroup(name) {
		return nil, syscall.ENOENT
	}
	grp, err := v.c.store.GetGroup(name)
	if err != nil {
		return nil, v.c.Errno("lookup group", err)
	}
	rec, err := v.c.store.GetInode(grp.Root)
	if err != nil {
		return nil, v.c.Errno("lookup group", err)
	}
	return rec, 0
}

// RefuseGroups refuses op on name in groups/ (or on groups/ itself with
// op OpSetattr), which acl keeps read-only; its refusals are recorded in
// the zone of the view root.
func (v *View) RefuseGroups(op acl.Op, name string) syscall.Errno {
	if op == acl.OpSetattr {
		return v.Deny(op, "/"+zones.NameGroups, v.rootZone, acl.Setattr(v.Actor(), acl.GroupsDir(), false))
	}
	return v.Deny(op, path.Join("/", zones.NameGroups, name), v.rootZone, acl.CheckDir(v.Actor(), op, acl.GroupsDir(), name))
}

// Depth counts the directories between dir and its zone root, for the
// symlink policy.
func (v *View) Depth(dir *shedfs.Inode) int {
	d := 0
	for p := dir.Parent; p != 0 && d < 4096; d++ {
		rec, err := v.c.store.GetInode(p)
		if err != nil {
			break
		}
		p = rec.Parent
	}
	return d
}

// Readlink is the target of symlink at, found in directory parent. The
// target is checked again against the symlink policy at the link's
// current depth: a directory moved closer to the zone root must not let
// an old link climb out.
func (v *View) Readlink(at At, parent uint64) (string, syscall.Errno) {
	rec, e := v.Getattr(at)
	if e != 0 {
		return "", e
	}
	if rec.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return "", syscall.EINVAL
	}
	if up, ok := zones.SymlinkClimb(rec.Target); !ok || up > 0 {
		p, err := v.c.store.GetInode(parent)
		depth := 0
		if err == nil {
			depth = v.Depth(p)
		}
		if d := acl.SymlinkTarget(v.c.symlinks(), rec.Zone.Kind, rec.Target, depth); !d.Allowed() {
			return "", v.deny(acl.OpRead, at, "", d)
		}
	}
	return rec.Target, 0
}

// InTrash reports whether rec is a kept file: one without links that the
// trash holds (an O_TMPFILE file or an orphan kept for open handles also
// has none, and is not).
func (c *Core) InTrash(rec *shedfs.Inode) bool {
	return rec.Nlink == 0 && metadata.Keepable(rec) && c.store.InTrash(rec.Ino)
}

// RefuseKept denies a change to a kept file (opening it for writing,
// truncating or chmod by name, linking it back): trash/ is read-only but
// for mv and rm. A handle opened before the file went on working on it,
// as on any unlinked open file.
func (v *View) RefuseKept(at At, op acl.Op, rec *shedfs.Inode) syscall.Errno {
	if !v.c.InTrash(rec) {
		return 0
	}
	return v.deny(op, at, "", acl.TrashChange())
}

// RefuseTrash refuses op on name in dir towards trash/, which is
// read-only but for mv out of it and rm.
func (v *View) RefuseTrash(op acl.Op, dir At, name string) syscall.Errno {
	return v.deny(op, dir, name, acl.TrashChange())
}

// Make is a new entry for Mknod.
type Make struct {
	// Op is OpCreate, or OpSymlink for a symlink.
	Op acl.Op
	// Name is "" for an O_TMPFILE file, which no directory names yet.
	Name string
	Mode uint32
	// Target is a symlink's.
	Target string
	// Open says the caller opens it at once (a create, O_TMPFILE),
	// which marks it open in a shared store from its create on; the
	// caller announces it (Created) once its blob is made, or takes it
	// back (Uncreate).
	Open bool
}

// Mknod creates an entry of any type in dir with the zone, owner and
// default ownership mode a new entry gets, after acl and the admission
// of its inode allowed it. Unless m.Open, the entry is recorded and
// announced to the other views; the answer is its record and the content
// versions the caller's own cache may keep.
func (v *View) Mknod(c Caller, dir At, m Make) (*shedfs.Inode, []Version, syscall.Errno) {
	rec, e := v.make(c, dir, m)
	if e != 0 || m.Open {
		return rec, nil, e
	}
	return rec, v.Created(dir, m.Op, m.Name), 0
}

// Mkdir makes directory name in dir.
func (v *View) Mkdir(c Caller, dir At, name string, mode uint32) (*shedfs.Inode, []Version, syscall.Errno) {
	return v.Mknod(c, dir, Make{Op: acl.OpCreate, Name: name, Mode: syscall.S_IFDIR | mode&07777})
}

// Symlink makes symlink name to target in dir.
func (v *View) Symlink(c Caller, dir At, name, target string) (*shedfs.Inode, []Version, syscall.Errno) {
	return v.Mknod(c, dir, Make{Op: acl.OpSymlink, Name: name, Mode: syscall.S_IFLNK | 0o777, Target: target})
}

// Create makes regular file name in dir (an O_TMPFILE one when name is
// ""), which the caller opens at once and announces (Created).
func (v *View) Create(c Caller, dir At, name string, mode uint32) (*shedfs.Inode, syscall.Errno) {
	return v.make(c, dir, Make{Op: acl.OpCreate, Name: name, Mode: syscall.S_IFREG | mode&07777, Open: true})
}

func (v *View) make(c Caller, dir At, m Make) (*shedfs.Inode, syscall.Errno) {
	core := v.c
	parent, e := v.Load(dir)
	if e != 0 {
		return nil, e
	}
	a := v.Actor()
	name, mode := m.Name, m.Mode
	decide := func(q acl.Quota) acl.Decision {
		switch {
		case m.Op == acl.OpSymlink:
			return acl.Symlink(a, acl.EntryOf(parent), name, m.Target, v.Depth(parent), core.symlinks(), q)
		case name == "":
			return acl.Tmpfile(a, acl.EntryOf(parent), q)
		default:
			return acl.Mknod(a, acl.EntryOf(parent), name, mode, q)
		}
	}
	h := shedfs.HolderOf(parent.Zone)
	adm, d, err := core.Admit(Growth{Holder: h, Inodes: 1, Disk: EntryBytes + int64(len(m.Target)), DiskInodes: 1, Decide: decide})
	if err != nil {
		return nil, core.Errno("quota", err)
	}
	if !d.Allowed() {
		return nil, v.deny(m.Op, dir, name, d)
	}
	// The store's transaction admits the inode again, exactly.
	adm.Done()
	uid, gid := c.Uid, c.Gid
	if parent.Mode&syscall.S_ISGID != 0 {
		// BSD group semantics, as ext4 does for setgid directories.
		gid = parent.Gid
		if mode&syscall.S_IFMT == syscall.S_IFDIR {
			mode |= syscall.S_ISGID
		}
	}
	tmpl := &shedfs.Inode{
		Mode:    mode,
		Uid:     uid,
		Gid:     gid,
		Target:  m.Target,
		Zone:    parent.Zone,
		Owner:   v.user,
		OwnMode: core.zones().Policy(parent.Zone.Kind).DefaultMode,
	}
	// Admitted again inside the transaction, so concurrent creates never
	// pass the limit; a refusal there is acl's decision like any other.
	var rec *shedfs.Inode
	refused, err := core.InTxn(h, 0, 1, func() (d acl.Decision, err error) {
		if m.Open {
			// Opened at once: marked open by its create.
			rec, err = core.store.CreateOpen(dir.Ino, name, tmpl, AdmitInodes(&d, 1))
		} else {
			rec, err = core.store.Create(dir.Ino, name, tmpl, AdmitInodes(&d, 1))
		}
		return d, err
	})
	if !refused.Allowed() {
		return nil, v.deny(m.Op, dir, name, refused)
	}
	if err != nil {
		return nil, core.Errno("create", err)
	}
	if name == "" {
		// Nothing names it: it goes with its last handle unless
		// linkat gives it a name first.
		core.Orphan(rec.Ino)
	}
	return rec, 0
}

// Created records and announces a new entry name in dir, once it is
// whole (a created file's blob is made).
func (v *View) Created(dir At, op acl.Op, name string) []Version {
	v.changed(op.String(), dir, name, 0)
	vs := v.c.contentChanged(dir.Zone, dir.Ino, nil)
	v.c.fanOut(v, dir.Zone, NameWas(dir.Ino, name, NoneBefore), DirOf(dir.Ino))
	return vs
}

// Uncreate takes back a file Create made whose blob could not be created
// (a full disk): a failed create leaves no entry behind.
func (v *View) Uncreate(dir At, name string, rec *shedfs.Inode) {
	c := v.c
	if name == "" {
		c.reclaimIfIdle(rec.Ino)
		return
	}
	if _, _, err := c.store.UnlinkFree(dir.Ino, name, false, c.Unused); err != nil {
		c.log.Error("undo a failed create", "ino", rec.Ino, "err", err)
	}
}

// Link gives src a new name in dir. src nil is groups/, which has no
// record and cannot be linked.
func (v *View) Link(dir At, src *At, name string) (*shedfs.Inode, []Version, syscall.Errno) {
	c := v.c
	d0, e := v.Load(dir)
	if e != 0 {
		return nil, nil, e
	}
	if src == nil {
		return nil, nil, v.deny(acl.OpLink, dir, name, acl.Link(v.Actor(), acl.GroupsDir(), acl.EntryOf(d0), name))
	}
	s, e := v.Load(*src)
	if e != 0 {
		return nil, nil, e
	}
	if e := v.RefuseKept(*src, acl.OpLink, s); e != 0 {
		return nil, nil, e
	}
	// A link charges no quota (the inode is charged once), but its
	// entry takes room on the store's disk.
	a := v.Actor()
	decide := func(acl.Quota) acl.Decision { return acl.Link(a, acl.EntryOf(s), acl.EntryOf(d0), name) }
	adm, d, err := c.Admit(Growth{Disk: EntryBytes, Decide: decide})
	if err != nil {
		return nil, nil, c.Errno("link", err)
	}
	if !d.Allowed() {
		return nil, nil, v.deny(acl.OpLink, dir, name, d)
	}
	adm.Done()
	since := c.Clock()
	rec, err := c.store.LinkTrash(src.Ino, dir.Ino, name, v.linkNote(dir, name))
	if err != nil {
		return nil, nil, c.Errno("link", err)
	}
	c.linked(rec.Ino)
	rec = c.overlaid(rec, since)
	v.changed("link", dir, name, 0)
	vs := c.contentChanged(dir.Zone, dir.Ino, nil)
	c.fanOut(v, dir.Zone, NameWas(dir.Ino, name, NoneBefore), DirOf(dir.Ino), AttrOf(src.Ino))
	return rec, vs, 0
}

// Remove unlinks name in dir (op OpUnlink) or removes the directory
// (OpRmdir); what loses its last link goes to the trash when it is on.
func (v *View) Remove(dir At, op acl.Op, name string) ([]Version, syscall.Errno) {
	c := v.c
	d0, e := v.Load(dir)
	if e != 0 {
		return nil, e
	}
	var d acl.Decision
	rec, e := v.Child(dir, name)
	switch {
	case e == syscall.ENOENT && v.synthetic(dir.Ino, name):
		d = acl.CheckDir(v.Actor(), op, acl.EntryOf(d0), name)
	case e != 0:
		return nil, e
	case op == acl.OpRmdir:
		d = acl.Rmdir(v.Actor(), acl.EntryOf(d0), name, acl.EntryOf(rec))
	default:
		d = acl.Unlink(v.Actor(), acl.EntryOf(d0), name, acl.EntryOf(rec))
		if d.Allowed() {
			d = v.editLocked(rec.Ino, true)
		}
	}
	if !d.Allowed() {
		return nil, v.deny(op, dir, name, d)
	}
	// The ghost is in place before the record can go, so a request of a
	// kernel that resolved the name just before finds it either way.
	c.Settle(rec.Ino)
	c.AddGhost(rec)
	p := dir.pathOf(name) // for the trash and the audit trail
	var out *shedfs.Inode
	var freed, kept bool
	err := c.unholding(rec, func(unhold uint64) (err error) {
		out, freed, kept, err = c.store.UnlinkTrashUnhold(dir.Ino, name, op == acl.OpRmdir, c.Unused, v.trashNoteAt(metadata.TrashUnlink, p), unhold)
		return err
	})
	if !freed {
		c.DropGhost(rec.Ino)
	}
	if err != nil {
		return nil, c.Errno(op.String(), err)
	}
	if kept {
		c.TrashChanged()
	}
	v.Changed(op.String(), p, dir.Zone, 0)
	vs := c.contentChanged(dir.Zone, dir.Ino, nil)
	c.fanOut(v, dir.Zone, NameWas(dir.Ino, name, rec.Ino), DirOf(dir.Ino), AttrOf(out.Ino))
	if !freed && !kept {
		c.ReclaimIfUnused(out)
	}
	return vs, 0
}

// Rename moves name in dir to newName in to (rename, RENAME_NOREPLACE,
// RENAME_EXCHANGE in flags). to.Ino GroupsIno is groups/, where nothing
// can go.
func (v *View) Rename(dir At, name string, to At, newName string, flags uint32) ([]Version, syscall.Errno) {
	c := v.c
	a := v.Actor()
	if to.Ino == GroupsIno {
		return nil, v.deny(acl.OpRename, dir, name, acl.CheckDir(a, acl.OpRename, acl.GroupsDir(), newName))
	}
	srcDir, e := v.Load(dir)
	if e != 0 {
		return nil, e
	}
	dstDir, e := v.Load(to)
	if e != 0 {
		return nil, e
	}
	src, e := v.Child(dir, name)
	if e != 0 {
		if e == syscall.ENOENT && v.synthetic(dir.Ino, name) {
			return nil, v.deny(acl.OpRename, dir, name, acl.CheckDir(a, acl.OpRename, acl.EntryOf(srcDir), name))
		}
		return nil, e
	}
	var dst *acl.Entry
	dstRec, e := v.Child(to, newName)
	switch {
	case e == 0:
		de := acl.EntryOf(dstRec)
		dst = &de
	case e == syscall.ENOENT && v.synthetic(to.Ino, newName):
		return nil, v.deny(acl.OpRename, dir, newName, acl.CheckDir(a, acl.OpRename, acl.EntryOf(dstDir), newName))
	case e != syscall.ENOENT:
		return nil, e
	}
	se := acl.EntryOf(src)
	d := acl.Rename(a, acl.EntryOf(srcDir), name, se, acl.EntryOf(dstDir), newName, dst)
	if d.Allowed() && flags&metadata.RenameExchange != 0 && dst != nil {
		d = acl.Rename(a, acl.EntryOf(dstDir), newName, *dst, acl.EntryOf(srcDir), name, &se)
	}
	if d.Allowed() && !src.IsDir() {
		d = v.editLocked(src.Ino, true)
	}
	if d.Allowed() && dst != nil && !dstRec.IsDir() {
		d = v.editLocked(dstRec.Ino, true)
	}
	if !d.Allowed() {
		return nil, v.deny(acl.OpRename, dir, name, d)
	}
	if dst != nil {
		c.Settle(dstRec.Ino)
	}
	var replaced *shedfs.Inode
	var kept bool
	rename := func(unhold uint64) (err error) {
		replaced, kept, err = c.store.RenameTrashUnhold(dir.Ino, name, to.Ino, newName, flags, v.trashNote(to, metadata.TrashRenameOver, newName), v.renameNote(dir, name, to, newName), unhold)
		return err
	}
	var err error
	if dst != nil && flags&metadata.RenameExchange == 0 {
		// The replaced file's lingering open mark goes with its last
		// link, as an rm's does (Core.unholding).
		err = c.unholding(dstRec, rename)
	} else {
		err = rename(0)
	}
	if err != nil {
		return nil, c.Errno("rename", err)
	}
	if kept {
		c.TrashChanged()
	}
	v.Changed("rename", dir.pathOf(name)+" -> "+to.pathOf(newName), dir.Zone, 0)
	vs := c.contentChanged(dir.Zone, dir.Ino, nil)
	vs = c.contentChanged(to.Zone, to.Ino, vs)
	dstWas := NoneBefore
	if dst != nil {
		dstWas = dstRec.Ino
	}
	items := []Change{NameWas(dir.Ino, name, src.Ino), NameWas(to.Ino, newName, dstWas), DirOf(dir.Ino), DirOf(to.Ino), AttrOf(src.Ino)}
	if replaced != nil {
		items = append(items, AttrOf(replaced.Ino))
	}
	c.fanOut(v, dir.Zone, items...)
	if !kept {
		c.ReclaimIfUnused(replaced)
	}
	return vs, 0
}

// SetAttr is what a setattr changes beside the size.
type SetAttr struct {
	Mode, Uid, Gid                              uint32
	Atime, Mtime                                time.Time
	SetMode, SetUID, SetGID, SetAtime, SetMtime bool
}

// any reports whether s sets anything.
func (s SetAttr) any() bool {
	return s.SetMode || s.SetUID || s.SetGID || s.SetAtime || s.SetMtime
}

// unchanged reports whether s, of mode, owner and group only (no times),
// would store what rec already holds. tar, cp -a and npm chown and chmod
// every file they make to what it was created with; such a request is
// admitted as any other, then answered without a commit (its ctime is
// left as it was).
func (s SetAttr) unchanged(rec *shedfs.Inode) bool {
	return !s.SetAtime && !s.SetMtime &&
		(!s.SetMode || rec.Mode&07777 == s.Mode&07777) &&
		(!s.SetUID || rec.Uid == s.Uid) &&
		(!s.SetGID || rec.Gid == s.Gid)
}

// Setattr changes at's mode, owner, group and times (chmod, chown,
// utimens); rec is its record as the caller loaded it. Times alone are
// not recorded in the trail; permission and ownership changes are.
func (v *View) Setattr(at At, rec *shedfs.Inode, s SetAttr) syscall.Errno {
	if !s.any() {
		return 0
	}
	c := v.c
	timesOnly := !s.SetMode && !s.SetUID && !s.SetGID
	if d := acl.Setattr(v.Actor(), acl.EntryOf(rec), timesOnly); !d.Allowed() {
		return v.deny(acl.OpSetattr, at, "", d)
	}
	if s.unchanged(rec) {
		return 0
	}
	now := time.Now()
	fn := func(rec *shedfs.Inode) error {
		if s.SetMode {
			rec.Mode = rec.Mode&syscall.S_IFMT | s.Mode&07777
		}
		if s.SetUID {
			rec.Uid = s.Uid
		}
		if s.SetGID {
			rec.Gid = s.Gid
		}
		if s.SetAtime {
			rec.Atime = s.Atime
		}
		if s.SetMtime {
			rec.Mtime = s.Mtime
			// A file being written keeps the time set here, not
			// the time of its last write.
			if oi := c.lookupOpen(rec.Ino); oi != nil {
				oi.mu.Lock()
				oi.mtime = s.Mtime
				oi.mu.Unlock()
			}
		}
		rec.Ctime = now
		return nil
	}
	var err error
	if s.SetUID || s.SetGID {
		_, err = c.store.Update(at.Ino, fn, nil)
	} else {
		// Times and mode of a dirty open file are held.
		_, err = c.UpdateHeld(at.Ino, fn)
	}
	if err != nil {
		return c.Errno("setattr", err)
	}
	switch {
	case s.SetUID || s.SetGID:
		v.changed("chown", at, "", 0)
	case s.SetMode:
		v.changed("chmod", at, "", 0)
	}
	c.fanOut(v, at.Zone, AttrOf(at.Ino))
	return 0
}

// Statfs reports the figures df shows in zone z: the quota of the zone's
// holder where it has a limit, the backing disk otherwise (and for what
// the limit leaves unset).
func (v *View) Statfs(z shedfs.Zone) (*syscall.Statfs_t, syscall.Errno) {
	c := v.c
	st := &syscall.Statfs_t{}
	if err := syscall.Statfs(c.blobs.Root(), st); err != nil {
		return nil, c.Errno("statfs", err)
	}
	st.Namelen = shedfs.MaxNameLen
	st.Frsize = st.Bsize
	if z.Kind == shedfs.ZoneNone {
		return st, 0
	}
	q, err := c.Quota(shedfs.HolderOf(z))
	if err != nil {
		return nil, c.Errno("statfs", err)
	}
	q.Usage = c.withoutTrash(z, q.Usage)
	free, avail := st.Bfree, st.Bavail
	if st.Bsize == 0 {
		st.Bsize, st.Frsize = 4096, 4096
	}
	bsize := uint64(st.Bsize)
	if l := q.Limit.Bytes; l > 0 {
		used := uint64(max(q.Usage.Bytes, 0))
		st.Blocks = uint64(l) / bsize
		left := uint64(0)
		if uint64(l) > used {
			left = (uint64(l) - used) / bsize
		}
		st.Bfree = min(left, free)
		st.Bavail = min(left, avail)
	}
	if l := q.Limit.Inodes; l > 0 {
		used := uint64(max(q.Usage.Inodes, 0))
		st.Files = uint64(l)
		st.Ffree = 0
		if uint64(l) > used {
			st.Ffree = uint64(l) - used
		}
	}
	return st, 0
}

// withoutTrash is u less what the trash of zone z's holder holds: what df
// shows, since kept files are evicted before anything is refused.
func (c *Core) withoutTrash(z shedfs.Zone, u shedfs.Usage) shedfs.Usage {
	t, err := c.store.TrashUsage(shedfs.HolderOf(z))
	if err != nil {
		return u
	}
	u.Bytes -= t.Bytes
	u.Inodes -= t.Inodes
	return u
}

// trashNote is what the store records with a file of dir's that goes to
// the trash, or nil when the trash is off. name is the entry in dir (""
// for dir itself).
func (v *View) trashNote(dir At, why, name string) *metadata.TrashNote {
	if !v.c.trashOn() {
		return nil
	}
	return v.trashNoteAt(why, dir.pathOf(name))
}

// TrashNote is what the store records with name in dir (or dir itself)
// that goes to the trash for why, or nil when the trash is off.
func (v *View) TrashNote(dir At, why, name string) *metadata.TrashNote {
	return v.trashNote(dir, why, name)
}

// trashNoteAt is trashNote of the entry at path p in the view, for a
// caller that needs the path for its audit record too.
func (v *View) trashNoteAt(why, p string) *metadata.TrashNote {
	if !v.c.trashOn() {
		return nil
	}
	p = strings.TrimPrefix(p, "/")
	_, rel, ok := v.ZonePath(p)
	if !ok || rel == "" {
		rel = path.Base(p)
	}
	return &metadata.TrashNote{By: v.user, Why: why, Path: rel}
}

// zonePath is the path of name in dir within dir's zone, as this view
// named it ("" for the zone root).
func (v *View) zonePath(dir At, name string) string {
	_, rel, _ := v.ZonePath(strings.TrimPrefix(dir.pathOf(name), "/"))
	return rel
}

// renameNote is what the rename journal keeps of moving name in dir to
// newName in to, for restores to a point in time; nil when the trash is
// off (nothing can be restored then).
func (v *View) renameNote(dir At, name string, to At, newName string) *metadata.RenameNote {
	if !v.c.trashOn() {
		return nil
	}
	return &metadata.RenameNote{From: v.zonePath(dir, name), To: v.zonePath(to, newName)}
}

// linkNote is what the journal keeps of a new link name in dir, for
// restores to a point in time; nil when the trash is off.
func (v *View) linkNote(dir At, name string) *metadata.RenameNote {
	if !v.c.trashOn() {
		return nil
	}
	return &metadata.RenameNote{Kind: metadata.JournalAdd, To: v.zonePath(dir, name)}
}

// MayWrite reports whether acl lets the view write at's content.
func (v *View) MayWrite(at At) bool {
	rec, e := v.Load(at)
	return e == 0 && acl.Write(v.Actor(), acl.EntryOf(rec), acl.Quota{}, rec.Size, rec.Size).Allowed()
}

// KillSetID clears at's set-ID bits where acl.SetIDKilled says so (a
// write or a chown by a caller without CAP_FSETID), as a mode change of
// its own: committed, recorded as a chmod and told to the other views. It
// reports whether the mode changed.
func (v *View) KillSetID(at At) (bool, syscall.Errno) {
	c := v.c
	rec, e := v.Load(at)
	if e != 0 {
		return false, e
	}
	if acl.SetIDKilled(rec.Mode) == rec.Mode {
		return false, 0
	}
	now := time.Now()
	// Held: a mode an open file holds (a chmod since its last persist)
	// is the one to clear, not the stored one.
	_, err := c.UpdateHeld(at.Ino, func(rec *shedfs.Inode) error {
		rec.Mode = acl.SetIDKilled(rec.Mode)
		rec.Ctime = now
		return nil
	})
	if err != nil {
		return false, c.Errno("setattr", err)
	}
	v.changed("chmod", at, "", 0)
	c.fanOut(v, at.Zone, AttrOf(at.Ino))
	return true, 0
}
