package vfs

import "testing"

// TestContentVersions: an unchanged inode keeps its version; a change
// gives one no view saw before, also after the table was emptied.
func TestContentVersions(t *testing.T) {
	c := newContentVersions()
	v0 := c.current(1)
	if v0 == 0 {
		t.Fatal("version 0 is what a node starts from")
	}
	if c.current(1) != v0 {
		t.Fatal("unchanged inode changed version")
	}
	before, after := c.bump(1)
	if before != v0 || after <= v0 || c.current(1) != after {
		t.Fatalf("bump: before %d after %d current %d (was %d)", before, after, c.current(1), v0)
	}
	seen := map[uint64]uint64{}
	for ino := uint64(2); ino < maxVersions+10; ino++ {
		seen[ino] = c.current(ino)
		c.bump(ino)
	}
	for ino, v := range seen {
		if c.current(ino) == v {
			t.Fatalf("inode %d changed and kept version %d across the reset", ino, v)
		}
	}
}
