package vfs

import (
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// The trash as a view's trash/ acts on it: rm of a kept file purges it,
// mv out of trash/ restores it. Which kept files a view shows, and under
// which names, is the door's listing (TrashHolders, ViewPath).

// KeptEntry is what acl decides a kept file by: its zone and ownership
// as they were when it went to the trash.
func KeptEntry(e metadata.TrashEntry) acl.Entry {
	return acl.Entry{Zone: e.Zone, Owner: e.Owner, Mode: e.OwnMode}
}

// PurgeKept deletes kept file e for good (rm in trash/), decided as
// deleting it in its zone; p is its path in the view's trash/. A file
// still open stays until its last handle goes.
func (v *View) PurgeKept(e metadata.TrashEntry, p string) syscall.Errno {
	c := v.c
	if d := acl.TrashPurge(v.Actor(), KeptEntry(e)); !d.Allowed() {
		return v.Deny(acl.OpUnlink, p, e.Zone, d)
	}
	rec, err := c.store.GetInode(e.Ino)
	if err != nil {
		return c.Errno("purge", err)
	}
	c.AddGhost(rec)
	_, freed, err := c.store.PurgeTrash(e.Ino, c.Unused)
	if err != nil {
		c.DropGhost(rec.Ino)
		return c.Errno("purge", err)
	}
	if !freed {
		// Held open: it goes with its last handle, or now if that
		// handle went since the store looked (issue 24, item 12).
		c.DropGhost(rec.Ino)
		c.ReclaimIfUnused(rec)
	}
	for _, f := range c.attached() {
		f.TrashFreed([]*shedfs.Inode{rec}, FreedPurge, true)
	}
	v.Changed("trash_purge", p, e.Zone, 0)
	return 0
}

// RestoreKept moves kept file e, at path p in the view's trash/, to
// newName in dir (mv out of trash/), decided as deleting it in its zone
// and creating the target name; what the name stood for goes to the
// trash in its place. RENAME_NOREPLACE fails on an existing name.
func (v *View) RestoreKept(e metadata.TrashEntry, p string, dir At, newName string, flags uint32) ([]Version, syscall.Errno) {
	c := v.c
	dstDir, errno := v.Load(dir)
	if errno != 0 {
		return nil, errno
	}
	var dst *acl.Entry
	switch rec, e := v.Child(dir, newName); {
	case e == 0:
		if flags&metadata.RenameNoReplace != 0 {
			return nil, syscall.EEXIST
		}
		de := acl.EntryOf(rec)
		dst = &de
	case e != syscall.ENOENT:
		return nil, e
	}
	if d := acl.TrashRestore(v.Actor(), KeptEntry(e), acl.EntryOf(dstDir), newName, dst); !d.Allowed() {
		return nil, v.Deny(acl.OpRename, p, e.Zone, d)
	}
	_, replaced, kept, err := c.store.RestoreTrash(e.Ino, dir.Ino, newName, v.TrashNote(dir, metadata.TrashRenameOver, newName))
	if err != nil {
		return nil, c.Errno("restore", err)
	}
	c.TrashChanged()
	v.Changed("trash_restore", p+" -> "+dir.pathOf(newName), dir.Zone, 0)
	vs := c.contentChanged(dir.Zone, dir.Ino, nil)
	was := NoneBefore
	if replaced != nil {
		was = replaced.Ino
	}
	items := []Change{NameWas(dir.Ino, newName, was), DirOf(dir.Ino), AttrOf(e.Ino)}
	if replaced != nil {
		items = append(items, AttrOf(replaced.Ino))
	}
	c.fanOut(v, dir.Zone, items...)
	if !kept {
		c.ReclaimIfUnused(replaced)
	}
	return vs, 0
}
