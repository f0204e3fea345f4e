package vfs

import (
	"time"

	"github.com/shedfs/shedfs"
)

// evictTrash frees h's oldest kept files until bytes and inodes more fit
// its stored usage under its limit, and reports whether it freed any. It
// is the accountant's evictor (quota.Accountant.MakeRoom), which the
// core's makeRoom alone asks: the one eviction for quota of the process.
func (c *Core) evictTrash(h shedfs.Holder, bytes, inodes int64) bool {
	gone, err := c.store.EvictTrash(h, bytes, inodes, c.Unused)
	if err != nil {
		c.log.Error("evict trash", "holder", h, "err", err)
	}
	c.Freed(gone, FreedEvict, false)
	return len(gone) > 0
}

// spaceEvictBytes is the least that one eviction for the store's disk
// frees, so that a stream of writes on a full disk does not evict file
// by file.
const spaceEvictBytes = 16 << 20

// evictForSpace frees the oldest kept files of any holder when the store's
// disk is too short for a growth of bytes, removing their blobs at once
// (the disk needs the room now), and reports whether it freed any. Files
// still open are skipped.
func (c *Core) evictForSpace(bytes int64) bool {
	gone, err := c.store.EvictOldest(max(bytes, spaceEvictBytes), c.Unused)
	if err != nil {
		c.log.Error("evict trash for space", "err", err)
	}
	if len(gone) == 0 {
		return false
	}
	for _, n := range gone {
		if n.IsRegular() {
			c.removeBlob(n.Ino)
		}
	}
	c.Freed(gone, FreedEvict, true)
	if r, ok := c.opts.Space.(remeasurer); ok {
		r.Remeasure()
	}
	return true
}

// ExpireTrash purges kept files older than retention (0: the trash is
// off, everything kept goes) and, for holders without a byte limit, the
// oldest beyond capBytes in all; the daemon calls it periodically.
func (c *Core) ExpireTrash(retention time.Duration, capBytes int64) {
	capped := func(h shedfs.Holder) bool {
		l, err := c.store.GetLimit(h)
		return err == nil && l.Bytes <= 0
	}
	gone, err := c.store.ExpireTrash(time.Now().Add(-max(retention, 0)), capped, capBytes, c.Unused)
	if err != nil {
		c.log.Error("expire trash", "err", err)
	}
	c.Freed(gone, FreedExpire, false)
}
