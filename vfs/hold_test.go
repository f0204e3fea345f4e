package vfs

import (
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

// TestHeldAttrsApply: held attributes replace the record's, a held ctime
// never moves a later one (a write after the SETATTR) back, and nothing
// held changes nothing.
func TestHeldAttrsApply(t *testing.T) {
	t0 := time.Unix(1000, 0)
	t1 := time.Unix(2000, 0)
	t2 := time.Unix(3000, 0)
	base := shedfs.Inode{Mode: 0o100600, Atime: t0, Mtime: t0, Ctime: t1}
	for _, tc := range []struct {
		name string
		h    heldAttrs
		want shedfs.Inode
	}{
		{"nothing", heldAttrs{mode: 0o100644, setMode: true}, base},
		{"mode", heldAttrs{anything: true, mode: 0o100644, setMode: true}, shedfs.Inode{Mode: 0o100644, Atime: t0, Mtime: t0, Ctime: t1}},
		{"atime", heldAttrs{anything: true, atime: t2, setAtime: true}, shedfs.Inode{Mode: 0o100600, Atime: t2, Mtime: t0, Ctime: t1}},
		{"later ctime", heldAttrs{anything: true, ctime: t2, setCtime: true}, shedfs.Inode{Mode: 0o100600, Atime: t0, Mtime: t0, Ctime: t2}},
		{"earlier ctime", heldAttrs{anything: true, ctime: t0, setCtime: true}, base},
	} {
		n := base
		tc.h.apply(&n)
		if n != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, n, tc.want)
		}
	}
}

// The persist clock tells a reader whether its inode was persisted since
// it read, and only that inode: the reads of other inodes, while files are
// released one after another, keep their record.
func TestPersistClock(t *testing.T) {
	var c persistClock
	since := c.now()
	if c.persistedSince(7, since) {
		t.Error("nothing persisted, yet inode 7 counts as persisted")
	}
	c.tick(8)
	c.tick(9)
	if c.persistedSince(7, since) {
		t.Error("inodes 8 and 9 persisted: inode 7 counts as persisted")
	}
	if !c.persistedSince(9, since) {
		t.Error("inode 9 persisted: not seen")
	}
	if c.persistedSince(9, c.now()) {
		t.Error("inode 9 persisted before the reading: counts as after")
	}
	since = c.now()
	for i := range persistRing + 1 {
		c.tick(uint64(100 + i))
	}
	if !c.persistedSince(7, since) {
		t.Error("more persists than the clock remembers: a reader must read again")
	}
}
