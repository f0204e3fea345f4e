package vfs

import (
	"errors"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// On a store other daemons share, the open mark of an inode (remote.go)
// costs two etcd writes, each a raft round with a WAL fsync on a quorum:
// put at the first open, taken back at the last release. A mark is only
// for the other daemons: it says "do not free this inode, I may still read
// its blob". Keeping it a while after the last release costs them nothing
// they can tell from a slow close, so this daemon keeps it (it lingers)
// for markIdle, at most markMax of them: a file opened again meanwhile
// (read after its create, a build reading its sources twice, a truncate
// after a chmod) puts nothing, and the marks that went idle are taken back
// together, markBatch-wise in one request (metadata.Store.Unholds), which
// also reads their records and reclaims the ones another daemon unlinked.
//
// What a lingering mark must not do is keep an unlinked file alive longer
// than a close would have: when this daemon learns that an inode with a
// lingering mark has lost its last link (from its own cache at the
// release, or from the change feed after another daemon's unlink), the
// mark is taken back at once. This daemon's own unlink or reclaim of an
// inode no handle here holds does not count its own mark and deletes it
// with the inode (metadata's held); its own rm of a file whose mark
// lingers takes the mark back in the unlink's transaction (unholding),
// so that a kept file purged on another daemon that holds it open goes
// at that daemon's close, and no request is spent on it
// (TestEtcdRoundTrips).

const (
	// markIdle is how long a mark stays after the last release.
	markIdle = 30 * time.Second
	// markMax bounds the lingering marks of a daemon (one small key
	// each in etcd, under its lease); past it the oldest go.
	markMax = 4096
	// markTick is how often lingering marks are looked at.
	markTick = 250 * time.Millisecond
)

// markTable is the lingering open marks of this daemon.
type markTable struct {
	mu sync.Mutex
	// linger is when each lingering mark's inode was last released.
	linger map[uint64]time.Time
	// urgent are lingering marks to take back at the next tick: their
	// inode lost its last link.
	urgent map[uint64]bool
	// releasing are marks being taken back; a hold of one of them waits
	// for the channel to close, then puts its mark again.
	releasing map[uint64]chan struct{}
	// wake asks the releaser for a tick now.
	wake chan struct{}
}

// keep notes that ino's mark lingers instead of being taken back.
func (m *markTable) keep(ino uint64, orphan bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.initLocked()
	m.linger[ino] = time.Now()
	if orphan {
		m.urgent[ino] = true
	}
	if orphan || len(m.linger) > markMax {
		m.poke()
	}
}

// initLocked makes the maps and the wake channel. m.mu is held.
func (m *markTable) initLocked() {
	if m.linger == nil {
		m.linger = make(map[uint64]time.Time)
		m.urgent = make(map[uint64]bool)
		m.releasing = make(map[uint64]chan struct{})
	}
	if m.wake == nil {
		m.wake = make(chan struct{}, 1)
	}
}

// poke wakes the releaser. m.mu is held.
func (m *markTable) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// reuse takes ino's lingering mark for a new open: true if it still
// stands in the store (nothing to put). A mark being taken back is waited
// for, and then is no more.
func (m *markTable) reuse(ino uint64) bool {
	m.mu.Lock()
	for {
		if ch := m.releasing[ino]; ch != nil {
			m.mu.Unlock()
			<-ch
			m.mu.Lock()
			continue
		}
		_, ok := m.linger[ino]
		if ok {
			delete(m.linger, ino)
			delete(m.urgent, ino)
		}
		m.mu.Unlock()
		return ok
	}
}

// lingering reports whether ino's mark lingers.
func (m *markTable) lingering(ino uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.linger[ino]
	return ok
}

// urge asks for ino's lingering mark to go at once (it lost its last link).
func (m *markTable) urge(ino uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.linger[ino]; ok {
		m.urgent[ino] = true
		m.poke()
	}
}

// forget drops every lingering mark without a request: the store lost
// them (the lease was lost and granted again).
func (m *markTable) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.linger)
	clear(m.urgent)
}

// due takes the marks to take back now (all when all) out of the table
// into releasing, and returns them with the channel to close after.
func (m *markTable) due(all bool) ([]uint64, chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	var inos []uint64
	for ino, at := range m.linger {
		if all || m.urgent[ino] || now.Sub(at) >= markIdle {
			inos = append(inos, ino)
		}
	}
	if over := len(m.linger) - len(inos) - markMax; over > 0 {
		// The oldest of the rest, past the bound.
		var rest []uint64
		for ino := range m.linger {
			if !all && !m.urgent[ino] && now.Sub(m.linger[ino]) < markIdle {
				rest = append(rest, ino)
			}
		}
		slices.SortFunc(rest, func(a, b uint64) int { return m.linger[a].Compare(m.linger[b]) })
		inos = append(inos, rest[:over]...)
	}
	if len(inos) == 0 {
		return nil, nil
	}
	ch := make(chan struct{})
	for _, ino := range inos {
		delete(m.linger, ino)
		delete(m.urgent, ino)
		m.releasing[ino] = ch
	}
	return inos, ch
}

// done ends the release of inos.
func (m *markTable) done(inos []uint64, ch chan struct{}) {
	m.mu.Lock()
	for _, ino := range inos {
		delete(m.releasing, ino)
	}
	m.mu.Unlock()
	close(ch)
}

// markReleaser takes back the marks that went idle (or lost their inode's
// last link), every markTick or when asked, until stop closes.
func (c *Core) markReleaser(stop <-chan struct{}) {
	t := time.NewTicker(markTick)
	defer t.Stop()
	c.ft.marks.mu.Lock()
	c.ft.marks.initLocked()
	wake := c.ft.marks.wake
	c.ft.marks.mu.Unlock()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-wake:
		}
		c.releaseMarks(false)
	}
}

// releaseMarks takes back the lingering marks that are due (all of them
// when all) in as few requests as the store allows, and reclaims the
// inodes among them that lost their last link meanwhile. A mark that
// fails to go stays in the store until this daemon's lease ends, which
// frees its inode then; it is logged.
func (c *Core) releaseMarks(all bool) {
	inos, ch := c.ft.marks.due(all)
	if len(inos) == 0 {
		return
	}
	orphans, err := c.store.Unholds(inos)
	c.ft.marks.done(inos, ch)
	if err != nil {
		c.log.Error("unmark inodes open in the store", "inodes", len(inos), "err", err)
	}
	for _, ino := range orphans {
		c.ft.mu.Lock()
		c.ft.orphans[ino] = true
		c.ft.mu.Unlock()
		c.reclaimIfIdle(ino)
	}
}

// holdStripes is how many locks order the open marks: those of one inode
// must not pass each other (an unhold's delete after a new hold's put),
// those of different inodes may, so that the mark of one file's last
// release (a round trip) does not hold up the next file's open.
const holdStripes = 64

// hold marks ino open by this daemon in a store other daemons share.
func (c *Core) hold(ino uint64) {
	if !c.store.Shared() {
		return
	}
	mu := &c.ft.holdMu[ino%holdStripes]
	mu.Lock()
	defer mu.Unlock()
	if c.ft.marks.reuse(ino) {
		return // its mark lingers from the last release (marks.go)
	}
	if err := c.store.Hold(ino); err != nil {
		c.log.Error("mark inode open in the store", "ino", ino, "err", err)
	}
}

// unhold takes the mark back once nothing here holds ino, and notes ino
// as an orphan to reclaim if it lost its last link meanwhile (perhaps
// through another daemon).
func (c *Core) unhold(ino uint64) {
	if !c.store.Shared() {
		return
	}
	mu := &c.ft.holdMu[ino%holdStripes]
	mu.Lock()
	defer mu.Unlock()
	c.ft.mu.Lock()
	again := c.ft.open[ino] != nil
	c.ft.mu.Unlock()
	if again {
		return // opened again meanwhile: the mark stays
	}
	// The mark lingers a while (marks.go), unless the inode has lost its
	// last link as far as the cache knows: then it goes now, as the
	// other daemons wait for it to reclaim the inode.
	if rec, err := c.store.GetInode(ino); err == nil && rec.Nlink > 0 {
		c.ft.marks.keep(ino, false)
		return
	}
	orphan, err := c.store.Unhold(ino)
	if err != nil {
		c.log.Error("unmark inode open in the store", "ino", ino, "err", err)
		return
	}
	if orphan {
		c.ft.mu.Lock()
		c.ft.orphans[ino] = true
		c.ft.mu.Unlock()
	}
}

// unholding runs unlink, a store change that may take rec's last link,
// and gives it rec's number when this daemon's open mark of rec lingers,
// for its transaction to take the mark back (metadata's
// UnlinkTrashUnhold): at no request of its own, and a kept file that
// another daemon still reads goes at that daemon's last close rather
// than once the mark here went idle. It runs under rec's stripe of
// holdMu, so that an open meanwhile puts a mark of its own after the
// transaction; if unlink fails, nothing was committed and the mark
// lingers on.
func (c *Core) unholding(rec *shedfs.Inode, unlink func(unhold uint64) error) error {
	if !c.store.Shared() || rec.IsDir() || rec.Nlink > 1 {
		return unlink(0)
	}
	mu := &c.ft.holdMu[rec.Ino%holdStripes]
	mu.Lock()
	defer mu.Unlock()
	if !c.ft.marks.reuse(rec.Ino) {
		return unlink(0) // open here, or no mark left
	}
	err := unlink(rec.Ino)
	if err != nil {
		c.ft.marks.keep(rec.Ino, false)
	}
	return err
}

// heldElsewhere reports a reclaim refused because another daemon holds
// the inode open: it reclaims it when it lets go.
func heldElsewhere(err error) bool {
	return errors.Is(err, metadata.ErrHeld) || errors.Is(err, syscall.ENOENT)
}

// LeaseRenewed puts back the open marks of every inode open here, after
// this daemon's lease on a shared store was lost and granted again
// (metadata.Store.FollowLease), so that no other daemon reclaims them
// from now on; the lingering marks went with the lease. Every file lock
// is published again, so that it blocks the other daemons again (a lock
// another daemon took meanwhile wins, and I/O through the descriptions
// that held it fails: filelocks_lost.go).
func (c *Core) LeaseRenewed() {
	if !c.store.Shared() {
		return
	}
	c.ft.mu.Lock()
	inos := make([]uint64, 0, len(c.ft.open))
	for ino := range c.ft.open {
		inos = append(inos, ino)
	}
	c.ft.mu.Unlock()
	c.ft.marks.forget()
	for _, ino := range inos {
		c.holdAgain(ino)
	}
	c.locksLost(c.locks.renewed())
}

// holdAgain puts back the open mark of ino if it is still open here,
// ordered with its opens and releases by its stripe of holdMu (a release
// meanwhile took its mark back, and must not find it put again).
func (c *Core) holdAgain(ino uint64) {
	mu := &c.ft.holdMu[ino%holdStripes]
	mu.Lock()
	defer mu.Unlock()
	c.ft.mu.Lock()
	open := c.ft.open[ino] != nil
	c.ft.mu.Unlock()
	if !open {
		return
	}
	if err := c.store.Hold(ino); err != nil {
		c.log.Error("mark inode open again after the lease was renewed", "ino", ino, "err", err)
	}
}

// ChangedElsewhere is told that another daemon changed ino, whose record
// is now rec (nil: gone): a lingering open mark of an inode that lost its
// last link goes at once, open handles decide their next write on the
// new record, and read up to the size the other daemon wrote.
func (c *Core) ChangedElsewhere(ino uint64, rec *shedfs.Inode) {
	if (rec == nil || rec.Nlink == 0) && c.ft.marks.lingering(ino) {
		c.ft.marks.urge(ino) // unlinked elsewhere: our mark goes now
	}
	if rec == nil {
		return
	}
	c.Reentry(ino, rec)
	if oi := c.lookupOpen(ino); oi != nil && rec.IsRegular() {
		oi.mu.Lock()
		c.followStoreLocked(oi)
		oi.mu.Unlock()
	}
}
