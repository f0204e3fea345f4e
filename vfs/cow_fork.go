package vfs

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs"
)

// A fork (admin_fork.go) shares blobs between live files, not only with
// snapshots: after a copy-up the old content may still be another live
// file's, which nobody is charged for twice, or the snapshots' alone. The
// file's fork group (metadata/fork.go) names the inodes that may share
// it, so the copy-up looks at those and at the snapshots' links rather
// than assume the snapshots hold what it leaves.

// forkGroup returns the inodes that may share ino's blob by a fork; nil
// when none (or unknown: the copy-up then charges as without forks).
func (c *Core) forkGroup(ino uint64) []uint64 {
	g, err := c.store.ForkGroup(ino)
	if err != nil {
		c.log.Warn("fork group", "ino", ino, "err", err)
		return nil
	}
	return g
}

// chargeLeft charges the content that ino no longer has in old (size
// bytes: a copy-up's, or a removed blob's) to the holder whose snapshots
// alone still link it, if one does: none when a live file of its fork
// group still has it, or when the snapshots of several holders share it
// (as the recount from the links, daemon's recountSnapshots, counts it).
// The charge is made without that holder's admission lock, so a recount
// of the holder running at the same moment may count it twice until the
// next recount.
func (c *Core) chargeLeft(ino uint64, old *os.File, group []uint64, size uint64) {
	var st unix.Stat_t
	if err := unix.Fstat(int(old.Fd()), &st); err != nil || st.Nlink == 0 {
		return
	}
	same := func(p string) bool {
		var o unix.Stat_t
		return unix.Stat(p, &o) == nil && o.Dev == st.Dev && o.Ino == st.Ino
	}
	for _, g := range group {
		if same(c.blobs.Path(g)) {
			return // still a live file's
		}
	}
	all, err := c.store.ListSnapshots("")
	if err != nil {
		c.log.Warn("charge snapshot bytes after a fork's copy-up", "ino", ino, "err", err)
		return
	}
	links := map[shedfs.Holder]uint64{}
	for _, sn := range all {
		for _, g := range append(group, ino) {
			if same(c.blobs.SnapPath(sn.ID, g)) {
				links[sn.Holder]++
			}
		}
	}
	if len(links) != 1 {
		return
	}
	for h, n := range links {
		if n < uint64(st.Nlink) {
			return // a link this count does not know: left to the recount
		}
		if err := c.store.AddSnapshotHeld(h, shedfs.Charge(size), false); err != nil {
			c.log.Error("charge snapshot bytes", "holder", h, "err", err)
		}
	}
}

// removeBlob removes the blob of ino, a file gone for good; content that
// snapshots still link is then theirs alone and charged (chargeLeft), at
// once rather than at the next recount.
func (c *Core) removeBlob(ino uint64) {
	var old *os.File
	var st unix.Stat_t
	if err := unix.Stat(c.blobs.Path(ino), &st); err == nil && st.Nlink > 1 {
		old, _ = os.Open(c.blobs.Path(ino))
	}
	if err := c.blobs.Remove(ino); err != nil {
		c.log.Error("remove blob", "ino", ino, "err", err)
	}
	if old != nil {
		c.chargeLeft(ino, old, c.forkGroup(ino), uint64(st.Size))
		old.Close()
	}
}
