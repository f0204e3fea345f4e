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

// releasedLocked wakes whoever waits for a release (awaitRelease): oi
// just left the open-file table. c.ft.mu must be held.
func (c *Core) releasedLocked() {
	if c.ft.released != nil {
		close(c.ft.released)
		c.ft.released = nil
	}
}

// awaitRelease waits, until the deadline at most, for a file of h's
// account (h, the holder h nests in, or one nested in it) that has no
// link left and whose every handle is closing to leave the open-file
// table, and reports whether one did: its trash may now be evicted.
// Call it without any holder's lock, as a release persists under its
// holder's.
func (c *Core) awaitRelease(h shedfs.Holder, deadline time.Time) bool {
	account := accountOf(h)
	var waited []*openFile
	for {
		c.ft.mu.Lock()
		if c.departedLocked(waited) {
			c.ft.mu.Unlock()
			return true
		}
		var closing []*openFile
		for _, oi := range c.ft.open {
			if oi.closing == oi.refs && accountOf(oi.holder) == account {
				closing = append(closing, oi)
			}
		}
		c.ft.mu.Unlock()
		// The store is read outside c.ft.mu (reclaimIfIdle).
		if waited = c.unlinked(closing); len(waited) == 0 {
			return false
		}
		c.ft.mu.Lock()
		if c.departedLocked(waited) {
			c.ft.mu.Unlock()
			return true
		}
		if c.ft.released == nil {
			c.ft.released = make(chan struct{})
		}
		wake := c.ft.released
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

// departedLocked reports whether one of files left the open-file table.
// c.ft.mu must be held.
func (c *Core) departedLocked(files []*openFile) bool {
	for _, oi := range files {
		if c.ft.open[oi.ino] != oi {
			return true
		}
	}
	return false
}

// unlinked keeps the open files whose inode has no link left (kept in
// the trash, or an orphan): only their release frees a charge.
func (c *Core) unlinked(files []*openFile) []*openFile {
	out := files[:0]
	for _, oi := range files {
		if rec, err := c.store.GetInode(oi.ino); err == nil && rec.Nlink == 0 {
			out = append(out, oi)
		}
	}
	return out
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
