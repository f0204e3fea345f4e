package vfs

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/shedfs/shedfs"
)

// A small file costs a commit at its CREATE and one when its size is
// stored. close(2) waits for FLUSH but not for RELEASE, which the kernel
// sends after it; so a FLUSH whose file needs nothing more from the store
// (its digest was computed by its writes, no scan applies) keeps the size,
// times and digest in the open inode, which every view already sees
// through FS.overlay, and the last release persists them in one commit
// (docs/design.md, "The callback path"; docs/performance.md, "One commit per file"). A SETATTR of times
// or mode on such a file waits in the same state. Pending bytes stay
// admitted in the accountant until that commit, so quotas stay exact; a
// crash before it leaves a blob longer than its record, which recovery
// treats as it treats a file open at a crash.

// heldAttrs are the attributes a SETATTR set on an open, dirty file, laid
// over its record until the file is persisted.
type heldAttrs struct {
	mode               uint32
	atime, ctime       time.Time
	setMode, setAtime  bool
	setCtime, anything bool
}

// apply lays h over n.
func (h heldAttrs) apply(n *shedfs.Inode) {
	if !h.anything {
		return
	}
	if h.setMode {
		n.Mode = h.mode
	}
	if h.setAtime {
		n.Atime = h.atime
	}
	if h.setCtime && h.ctime.After(n.Ctime) {
		// A write after the SETATTR moved it already.
		n.Ctime = h.ctime
	}
}

// flushHeldLocked answers a FLUSH without a commit when it can: the file
// is dirty, no other daemon reads the store, and the content service
// needs nothing the writes did not compute. The write-close is audited
// now, with its digest. false: the FLUSH persists as before. oi.mu must
// be held.
func (h *Handle) flushHeldLocked(oi *openFile) bool {
	c := h.v.c
	if !oi.dirty || c.store.Shared() {
		return false
	}
	if !oi.changed {
		return true // held by an earlier flush, nothing written since
	}
	known, ok := c.knownLocked(oi)
	if !ok {
		return false
	}
	oi.changed = false
	h.v.contentChanged(h.at, true, int64(oi.size), &known)
	return true
}

// UpdateHeld is updateHeld without an admission: a change of times and
// mode (a chmod that clears set-ID bits) held on a dirty open file.
func (c *Core) UpdateHeld(ino uint64, fn func(n *shedfs.Inode) error) (*shedfs.Inode, error) {
	return c.updateHeld(ino, fn, nil)
}

// updateHeld is Store.Update for a SETATTR of times and mode: on a file
// open and dirty here, fn's changes are held in the open inode and
// persisted with its size; else it is Store.Update.
func (c *Core) updateHeld(ino uint64, fn func(n *shedfs.Inode) error, admit func(u shedfs.Usage, l shedfs.Limit, delta int64) error) (*shedfs.Inode, error) {
	oi := c.lookupOpen(ino)
	if oi == nil || c.store.Shared() {
		return c.store.Update(ino, fn, admit)
	}
	base, err := c.store.GetInode(ino)
	if err != nil {
		return c.store.Update(ino, fn, admit)
	}
	c.overlay(base)
	rec := *base
	if err := fn(&rec); err != nil {
		return nil, err
	}
	if rec.Uid != base.Uid || rec.Gid != base.Gid || rec.Size != base.Size {
		return c.store.Update(ino, fn, admit)
	}
	oi.mu.Lock()
	if !oi.dirty {
		oi.mu.Unlock()
		return c.store.Update(ino, fn, admit)
	}
	h := &oi.held
	h.anything = true
	if rec.Mode != base.Mode {
		h.mode, h.setMode = rec.Mode, true
	}
	if !rec.Atime.Equal(base.Atime) {
		h.atime, h.setAtime = rec.Atime, true
	}
	if !rec.Mtime.Equal(base.Mtime) {
		oi.mtime = rec.Mtime
	}
	h.ctime, h.setCtime = rec.Ctime, true
	oi.mu.Unlock()
	return &rec, nil
}

// Settle persists the held state of ino, if it is open here and dirty,
// before something reads or moves its stored record (an unlink or a
// rename over it keeps the record in the trash; a digest is read from
// it).
func (c *Core) Settle(ino uint64) {
	oi := c.lookupOpen(ino)
	if oi == nil {
		return
	}
	oi.mu.Lock()
	c.persistLocked(oi)
	oi.mu.Unlock()
}

// persistClock counts the persists of open files. A record read from the
// store just before a release's commit, and laid over after the release
// has closed the file, would show neither the held state nor the stored
// one: a reader notes the clock before it reads, and reads again when the
// record's inode was persisted since (overlaid). The clock remembers which
// inode each of its last persistRing ticks persisted, so that the reads
// of other inodes, while an untar releases a file after another, do not
// all read again.
type persistClock struct {
	n    atomic.Uint64 // written under mu
	mu   sync.Mutex
	inos [persistRing]uint64
}

// persistRing is how many persists the clock remembers the inodes of;
// a reader whose read spans more reads again.
const persistRing = 64

// now is the clock's reading.
func (c *persistClock) now() uint64 { return c.n.Load() }

// tick records a persist of ino, after its commit.
func (c *persistClock) tick(ino uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.n.Load() + 1
	c.inos[t%persistRing] = ino
	c.n.Store(t)
}

// persistedSince reports whether ino may have been persisted after the
// clock read since.
func (c *persistClock) persistedSince(ino, since uint64) bool {
	if c.now() == since {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.n.Load()
	if now-since > persistRing {
		return true
	}
	for t := since + 1; t <= now; t++ {
		if c.inos[t%persistRing] == ino {
			return true
		}
	}
	return false
}

// overlaid lays the open-file state over rec, which was read from the
// store after the clock read since; when a persist landed since then, a
// regular file's record is read again (a few times at most: only a
// persist landing in each window forces another). A ghost (no record any
// more) is returned as it is.
func (c *Core) overlaid(rec *shedfs.Inode, since uint64) *shedfs.Inode {
	c.overlay(rec)
	for range 8 {
		if !rec.IsRegular() || !c.ft.persists.persistedSince(rec.Ino, since) {
			return rec
		}
		since = c.ft.persists.now()
		fresh, err := c.store.GetInode(rec.Ino)
		if err != nil {
			return rec
		}
		c.overlay(fresh)
		rec = fresh
	}
	return rec
}
