package vfs

import (
	"time"

	"github.com/shedfs/shedfs"
)

// The kernel sends a file's RELEASE after the close(2) of its last
// descriptor has returned (FUSE sends it in the background), so right
// after `write f; rm f` the kept f may still be open here for a moment,
// and an open kept file is not evicted. A growth its holder's quota
// refuses then waits a little for such releases before it is refused
// (Admit, InTxn): the trash never causes EDQUOT, even for a file removed
// just before. A file counts as closing when every handle of it was
// flushed (its descriptor closed) and not written since: a process that
// still holds a descriptor is not waited for.

// releaseWait bounds how long one refused growth waits for releases.
const releaseWait = 2 * time.Second

// flushed notes that h's descriptor was closed: its release is likely on
// its way.
func (c *Core) flushed(h *Handle) {
	if h.flushed.Load() {
		return
	}
	c.ft.mu.Lock()
	if !h.flushed.Load() && !h.released {
		h.flushed.Store(true)
		h.of.closing++
	}
	c.ft.mu.Unlock()
}

// used notes that h acted again after a flush (a descriptor of its open
// file description is still held): it is not closing.
func (c *Core) used(h *Handle) {
	if !h.flushed.Load() {
		return
	}
	c.ft.mu.Lock()
	c.unflushLocked(h)
	c.ft.mu.Unlock()
}

// unflushLocked takes h out of its file's closing handles. c.ft.mu must
// be held.
func (c *Core) unflushLocked(h *Handle) {
	if h.flushed.Load() {
		h.flushed.Store(false)
		h.of.closing--
	}
}

// releaseLog tells who waits for a release (awaitRelease) of the open
// files that left the table: their sequence number, the last one of each
// account, and a channel closed at the next. Guarded by openTable.mu.
type releaseLog struct {
	seq  uint64
	last map[shedfs.Holder]uint64
	wake chan struct{}
}

// releasedLocked notes that oi just left the open-file table, and wakes
// whoever waits for a release. c.ft.mu must be held.
func (c *Core) releasedLocked(oi *openFile) {
	r := &c.ft.releases
	r.seq++
	if r.last == nil {
		r.last = make(map[shedfs.Holder]uint64)
	}
	r.last[accountOf(oi.holder)] = r.seq
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

// releaseSeq is the release log's reading, taken before a decision that
// awaitRelease may have to take again.
func (c *Core) releaseSeq() uint64 {
	c.ft.mu.Lock()
	defer c.ft.mu.Unlock()
	return c.ft.releases.seq
}

// awaitRelease reports whether a file of h's account (h, the holder h
// nests in, or one nested in it) left the open-file table since the
// release log read since, waiting for one, until the deadline at most,
// while such a file that has no link left is closing (every handle
// flushed): its trash may then be evicted, and the refused growth is
// decided again. Call it without any holder's lock, as a release
// persists under its holder's.
func (c *Core) awaitRelease(h shedfs.Holder, since uint64, deadline time.Time) bool {
	account := accountOf(h)
	for {
		c.ft.mu.Lock()
		if c.ft.releases.last[account] > since {
			c.ft.mu.Unlock()
			return true
		}
		var closing []uint64
		for _, oi := range c.ft.open {
			if oi.closing == oi.refs && accountOf(oi.holder) == account {
				closing = append(closing, oi.ino)
			}
		}
		c.ft.mu.Unlock()
		// The store is read outside c.ft.mu (reclaimIfIdle).
		if !c.anyUnlinked(closing) {
			return false
		}
		c.ft.mu.Lock()
		if c.ft.releases.last[account] > since {
			c.ft.mu.Unlock()
			return true
		}
		if c.ft.releases.wake == nil {
			c.ft.releases.wake = make(chan struct{})
		}
		wake := c.ft.releases.wake
		c.ft.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wake:
			t.Stop()
		case <-t.C:
			return false
		}
	}
}

// anyUnlinked reports whether one of inos has no link left (kept in the
// trash, or an orphan): only such a file's release frees a charge.
func (c *Core) anyUnlinked(inos []uint64) bool {
	for _, ino := range inos {
		if rec, err := c.store.GetInode(ino); err == nil && rec.Nlink == 0 {
			return true
		}
	}
	return false
}

// accountOf is the holder whose limit a charge to h counts against at
// the top: a session's user, or h itself. Eviction for h frees the kept
// files of its whole account (makeRoom).
func accountOf(h shedfs.Holder) shedfs.Holder {
	if outer, ok := shedfs.OuterHolder(h); ok {
		return outer
	}
	return h
}
