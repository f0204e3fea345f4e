package vfs

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// openTable is the state of what the views hold open, shared by every
// door (docs/design.md, "The callback path"): one openFile per regular
// file open anywhere, with the size and times its writes moved ahead of
// the store; the inodes without links that a handle still holds
// (orphans); directories held by an open handle; reclaimed inodes kept a
// while for requests under way (ghosts); the persist clock; and, on a
// store other daemons share, the open marks. mu guards the maps; each
// openFile has its own lock.
type openTable struct {
	mu   sync.Mutex
	open map[uint64]*openFile
	// orphans are inodes without links that an open handle still holds.
	orphans map[uint64]bool
	// dirsOpen counts open directory handles per inode.
	dirsOpen map[uint64]int
	// ghosts are reclaimed inodes kept for requests under way.
	ghosts map[uint64]*ghost
	// holdMu orders the open marks of a shared store, per inode: a
	// stripe of holdStripes (marks.go).
	holdMu [holdStripes]sync.Mutex
	// marks are the open marks kept after the last release (marks.go).
	marks markTable
	// persists orders reads of records with persists of open files
	// (hold.go).
	persists persistClock
	// closes counts the open states taken out of open, so that a first
	// open can tell its record and blob may be older (acquireHere).
	closes persistClock
	// releases tells of open files leaving open, for whoever waits for
	// a release (closing.go).
	releases releaseLog
	// stop ends the sweepers (ServeFiles, CloseFiles).
	stop    chan struct{}
	serving bool
}

func newOpenTable() openTable {
	return openTable{
		open:     make(map[uint64]*openFile),
		orphans:  make(map[uint64]bool),
		dirsOpen: make(map[uint64]int),
		ghosts:   make(map[uint64]*ghost),
		stop:     make(chan struct{}),
	}
}

// ServeFiles starts what the open-file table does in the background: the
// ghost sweeper and, on a shared store, the release of lingering open
// marks. A daemon that serves views calls it once; CloseFiles ends it.
func (c *Core) ServeFiles() {
	c.ft.mu.Lock()
	defer c.ft.mu.Unlock()
	if c.ft.serving {
		return
	}
	c.ft.serving = true
	go c.sweeper(c.ft.stop)
	if c.store.Shared() {
		go c.markReleaser(c.ft.stop)
	}
}

// OpenFiles is the number of inodes with at least one open handle.
func (c *Core) OpenFiles() int {
	c.ft.mu.Lock()
	defer c.ft.mu.Unlock()
	return len(c.ft.open)
}

// CloseFiles persists and closes whatever is still open once no door
// serves anything any more, and reclaims inodes unlinked while open.
func (c *Core) CloseFiles() {
	c.ft.mu.Lock()
	left := make([]*openFile, 0, len(c.ft.open))
	for _, oi := range c.ft.open {
		left = append(left, oi)
	}
	c.ft.open = make(map[uint64]*openFile)
	serving := c.ft.serving
	c.ft.serving = false
	c.ft.mu.Unlock()
	for _, oi := range left {
		c.closeOpen(oi)
	}
	// No view is left to hold anything: every orphan and ghost goes.
	if serving {
		close(c.ft.stop)
	}
	c.releaseMarks(true)
	c.ft.mu.Lock()
	c.ft.dirsOpen = make(map[uint64]int)
	c.ft.mu.Unlock()
	orphans, err := c.store.Orphans()
	if err != nil {
		c.log.Error("list orphans at shutdown", "err", err)
	}
	for _, ino := range orphans {
		c.Orphan(ino)
		c.reclaimIfIdle(ino)
	}
	c.sweepGhosts(true)
}

// Orphan notes that ino has no link (an O_TMPFILE file, a kept file
// purged while open): it goes with its last handle.
func (c *Core) Orphan(ino uint64) {
	c.ft.mu.Lock()
	c.ft.orphans[ino] = true
	c.ft.mu.Unlock()
}

// linked notes that ino got a link: it is no orphan any more.
func (c *Core) linked(ino uint64) {
	c.ft.mu.Lock()
	delete(c.ft.orphans, ino)
	c.ft.mu.Unlock()
}

// Clock is the persist clock's reading, taken before a record is read
// (Overlaid).
func (c *Core) Clock() uint64 { return c.ft.persists.now() }

// PersistedSince reports whether ino may have been persisted after the
// clock read since: a record read before then must be read again.
func (c *Core) PersistedSince(ino, since uint64) bool {
	return c.ft.persists.persistedSince(ino, since)
}

// DirOpened and DirClosed count open directory handles, which hold a
// removed directory like open files hold a file.
func (c *Core) DirOpened(ino uint64) {
	c.ft.mu.Lock()
	c.ft.dirsOpen[ino]++
	c.ft.mu.Unlock()
}

// DirClosed is DirOpened's end.
func (c *Core) DirClosed(ino uint64) {
	c.ft.mu.Lock()
	if c.ft.dirsOpen[ino]--; c.ft.dirsOpen[ino] <= 0 {
		delete(c.ft.dirsOpen, ino)
	}
	c.ft.mu.Unlock()
	c.reclaimIfIdle(ino)
}

// Reentry gives the open state of ino the record's new ownership and
// mode (what acl decides its next write by), after a change made outside
// the handles.
func (c *Core) Reentry(ino uint64, rec *shedfs.Inode) {
	if oi := c.lookupOpen(ino); oi != nil {
		oi.mu.Lock()
		oi.entry = acl.EntryOf(rec)
		oi.mu.Unlock()
	}
}

// ghostFreed keeps kept files the store deleted reachable as ghosts for
// requests already under way; their blobs go when the grace is over.
func (c *Core) ghostFreed(gone []*shedfs.Inode) {
	now := time.Now()
	c.ft.mu.Lock()
	for _, n := range gone {
		g := *n
		c.ft.ghosts[n.Ino] = &ghost{rec: &g, until: now.Add(ghostGrace)}
	}
	c.ft.mu.Unlock()
}

// An inode whose last link goes away lives on while a handle holds it
// open, in any view: reads, writes and fstat keep working, and its quota
// charge stays. At the last release (or at once, if nothing is open) the
// record is reclaimed and the charge freed. A kernel may still be about to
// use the inode without a handle: it looked the name up just before the
// unlink or rename and its OPEN or GETATTR is on the way. For those, a
// ghost copy of the record and the blob stay for ghostGrace, long enough
// for any request already under way; a read-only open in that time still
// finds the file (and keeps the ghost while it is open).

// ghostGrace is how long a reclaimed inode stays reachable by the requests
// of kernels that resolved it before it went.
const ghostGrace = 2 * time.Second

// ghost is a reclaimed inode kept for requests under way.
type ghost struct {
	rec   *shedfs.Inode
	until time.Time
}

// ReclaimIfUnused notes that n lost its last link and reclaims it unless
// a handle still holds it.
func (c *Core) ReclaimIfUnused(n *shedfs.Inode) {
	if n == nil || n.Nlink > 0 {
		return
	}
	c.ft.mu.Lock()
	c.ft.orphans[n.Ino] = true
	c.ft.mu.Unlock()
	c.reclaimIfIdle(n.Ino)
}

// reclaimIfIdle reclaims ino if it is an orphan that no handle holds. The
// check happens under c.ft.mu and puts a ghost in place before the lock is
// dropped, so an open that slips in before the reclaim commits can only
// read (Open refuses to write a ghost) and keeps the content until it
// closes. The store is never written under c.ft.mu: its write transactions
// run one at a time and may take c.ft.mu themselves (Unused).
func (c *Core) reclaimIfIdle(ino uint64) {
	c.ft.mu.Lock()
	if !c.ft.orphans[ino] || c.ft.open[ino] != nil || c.ft.dirsOpen[ino] > 0 {
		c.ft.mu.Unlock()
		return
	}
	delete(c.ft.orphans, ino)
	rec, err := c.store.GetInode(ino)
	if err == nil {
		g := *rec
		g.Nlink = 0
		c.ft.ghosts[ino] = &ghost{rec: &g, until: time.Now().Add(ghostGrace)}
	}
	c.ft.mu.Unlock()
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) {
			c.log.Error("reclaim inode", "ino", ino, "err", err)
		}
		return
	}
	n, err := c.store.ReclaimIdle(ino)
	if err != nil {
		if !heldElsewhere(err) {
			c.log.Error("reclaim inode", "ino", ino, "err", err)
			// Not reclaimed (linked again): its content stays.
			c.DropGhost(ino)
		} else if errors.Is(err, metadata.ErrHeld) {
			c.DropGhost(ino)
		}
		return
	}
	c.ft.mu.Lock()
	c.ft.ghosts[ino] = &ghost{rec: n, until: time.Now().Add(ghostGrace)}
	c.ft.mu.Unlock()
	if c.content != nil {
		c.content.Forget()
	}
}

// unused reports whether no handle holds ino open; the store asks it
// inside the unlink transaction (UnlinkFree).
func (c *Core) unusedHere(ino uint64) bool {
	c.ft.mu.Lock()
	defer c.ft.mu.Unlock()
	return c.ft.open[ino] == nil && c.ft.dirsOpen[ino] == 0
}

// addGhost keeps rec reachable for ghostGrace in case its record goes;
// dropGhost takes it back when it did not.
func (c *Core) AddGhost(rec *shedfs.Inode) {
	g := *rec
	g.Nlink = 0
	c.ft.mu.Lock()
	c.ft.ghosts[rec.Ino] = &ghost{rec: &g, until: time.Now().Add(ghostGrace)}
	c.ft.mu.Unlock()
}

func (c *Core) DropGhost(ino uint64) {
	c.ft.mu.Lock()
	delete(c.ft.ghosts, ino)
	c.ft.mu.Unlock()
}

// ghostOf returns the last record of a reclaimed inode still in its grace
// period, or nil.
func (c *Core) Ghost(ino uint64) *shedfs.Inode {
	c.ft.mu.Lock()
	defer c.ft.mu.Unlock()
	if g := c.ft.ghosts[ino]; g != nil {
		c := *g.rec
		return &c
	}
	return nil
}

// sweepGhosts removes the blobs of ghosts whose grace is over and that no
// handle holds; all of them when final.
func (c *Core) sweepGhosts(final bool) {
	now := time.Now()
	var gone []uint64
	c.ft.mu.Lock()
	for ino, g := range c.ft.ghosts {
		if final || now.After(g.until) && c.ft.open[ino] == nil {
			delete(c.ft.ghosts, ino)
			if g.rec.IsRegular() {
				gone = append(gone, ino)
			}
		}
	}
	c.ft.mu.Unlock()
	for _, ino := range gone {
		c.removeBlob(ino)
	}
}

// sweeper runs sweepGhosts until stop closes.
func (c *Core) sweeper(stop <-chan struct{}) {
	t := time.NewTicker(ghostGrace / 2)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.sweepGhosts(false)
		case <-stop:
			return
		}
	}
}

// PersistFiles writes to the store what the open files hold ahead of it
// (sizes, times), leaving them open: a daemon that hands its views to
// another (a takeover) leaves nothing the new one needs in its memory,
// and reclaims nothing the views' processes still hold.
func (c *Core) PersistFiles() {
	c.ft.mu.Lock()
	open := make([]*openFile, 0, len(c.ft.open))
	for _, oi := range c.ft.open {
		open = append(open, oi)
	}
	c.ft.mu.Unlock()
	for _, oi := range open {
		oi.mu.Lock()
		c.persistLocked(oi)
		oi.mu.Unlock()
	}
}
