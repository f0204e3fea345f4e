package vfs

import (
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// Adopt gives rec, a regular file this view has just created (empty, not
// open, no content yet), the content file at src (a snapshot's link of
// inode srcIno) by a hard link instead of a copy, in srcIno's fork group
// (cow_fork.go) since a live file may still have that content: a restore puts back any size in time
// proportional to its files. The content is shared copy-on-write like a
// snapshot's (cow.go) and charged to the file's holder as written bytes
// would be, admitted like growth (EDQUOT); it is then digested and
// scanned as a write's would be. It returns the size adopted.
func (v *View) Adopt(at At, rec *shedfs.Inode, src string, srcIno uint64) (int64, syscall.Errno) {
	c := v.c
	if !rec.IsRegular() || rec.Size != 0 || c.lookupOpen(rec.Ino) != nil {
		return 0, syscall.EINVAL
	}
	size, err := c.blobs.LinkFrom(src, rec.Ino)
	if err != nil {
		return 0, c.Errno("adopt content", err)
	}
	if size == 0 {
		return 0, 0
	}
	if err := c.store.JoinFork(srcIno, rec.Ino); err != nil {
		c.blobs.Remove(rec.Ino)
		return 0, c.Errno("adopt content", err)
	}
	unlink := func() {
		if err := c.blobs.Remove(rec.Ino); err != nil {
			c.log.Error("undo an adopted content", "ino", rec.Ino, "err", err)
		}
	}
	h := shedfs.HolderOf(rec.Zone)
	bytes := shedfs.Charge(uint64(size))
	adm, d, err := c.Admit(Growth{Holder: h, Bytes: bytes, Hold: true, Decide: func(q acl.Quota) acl.Decision {
		return acl.Write(v.Actor(), acl.EntryOf(rec), q, 0, uint64(size))
	}})
	if err != nil {
		unlink()
		return 0, c.Errno("quota", err)
	}
	if !d.Allowed() {
		unlink()
		return 0, v.deny(acl.OpWrite, at, "", d)
	}
	if e := v.contentChanging(at); e != 0 {
		adm.Done()
		unlink()
		return 0, e
	}
	_, err = c.store.Update(rec.Ino, func(n *shedfs.Inode) error { n.Size = uint64(size); return nil }, nil)
	adm.Done()
	if err != nil {
		unlink()
		return 0, c.Errno("adopt content", err)
	}
	c.versions.bump(rec.Ino)
	c.fanOut(v, rec.Zone, AttrOf(rec.Ino))
	if c.content != nil {
		c.content.Changed(rec.Ino, nil)
	}
	return size, 0
}
