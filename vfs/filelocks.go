package vfs

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// File locks (flock, fcntl record locks, OFD locks) are kept in the core,
// per store inode, rather than in the kernel: each view is a mount of its
// own, and the kernel keeps one lock table per mount, so two views would
// never see each other's locks. With the table in the core a lock taken
// through any view conflicts with the same lock wanted through any other
// view of any user, whichever door serves it. A door converts its
// protocol's lock requests into a Lock and calls Handle.Getlk/Setlk, and
// tells the core of closes (View.Unlock); the rules are here.
//
// Linux keeps flock locks and record locks apart (a flock never conflicts
// with an fcntl lock), and so does the table. Record locks are POSIX
// locks, owned by a process (its file table), or OFD locks, owned by an open
// file description; FUSE sends both alike, with an owner number per
// process or per description, so the table treats them alike: byte ranges,
// read and write, owners that never conflict with themselves. flock locks
// are whole-file locks owned by an open file description.
//
// Locks go when their owner lets go: an unlock, a close (FLUSH carries the
// process's owner and releases its record locks; the last close of a
// description releases the flock and OFD locks taken through it), a
// process's death (the kernel closes its descriptors), or the end of the
// view.

// lockKind separates the lock families that never conflict with each other.
type lockKind uint8

const (
	// kindRecord is an fcntl record lock: POSIX (F_SETLK) or OFD
	// (F_OFD_SETLK), which FUSE does not tell apart.
	kindRecord lockKind = iota
	// kindFlock is a flock(2) lock.
	kindFlock
)

// String is the kind as status shows it.
func (k lockKind) String() string {
	if k == kindFlock {
		return "flock"
	}
	return "posix"
}

// lockOwner is who holds a lock: the owner number the kernel of one view
// gave (a process's file table, or an open file description). Kernels
// number owners independently, so the view is part of the owner, and so
// is the daemon for a lock another daemon sharing the store holds
// (filelocks_shared.go; "" for this one).
type lockOwner struct {
	daemon string
	view   uint64
	owner  uint64
}

// fileLock is a held lock or a request for one. Ranges are inclusive byte
// offsets, as FUSE sends them (to the end of the file is end = maxOffset).
type fileLock struct {
	owner      lockOwner
	kind       lockKind
	typ        uint32 // syscall.F_RDLCK or F_WRLCK; F_UNLCK in a request
	start, end uint64
	pid        uint32
	// user and path say who took the lock and on what, for status.
	user, path string
	// view is the view a lock of this daemon was taken through (nil for
	// another daemon's), told when the lock is lost (filelocks_lost.go).
	view *View
}

// maxOffset is the kernel's OFFSET_MAX: a range ending there runs to the
// end of the file, however long it grows.
const maxOffset = 1<<63 - 1

// conflicts reports whether l and o cannot be held together.
func (l *fileLock) conflicts(o *fileLock) bool {
	return l.kind == o.kind && l.owner != o.owner &&
		l.start <= o.end && o.start <= l.end &&
		(l.typ == syscall.F_WRLCK || o.typ == syscall.F_WRLCK)
}

// touches reports whether l overlaps or adjoins [start, end].
func (l *fileLock) touches(start, end uint64) bool {
	return (start == 0 || l.end >= start-1) && (l.start == 0 || end >= l.start-1)
}

// inodeLocks are the locks of one inode and the requests waiting for them.
type inodeLocks struct {
	held []fileLock
	// changed is closed, and cleared, whenever a held lock goes or
	// weakens, so that waiters look again.
	changed chan struct{}
	waiters int
}

// conflict returns the first held lock that req cannot coexist with.
func (il *inodeLocks) conflict(req *fileLock) (fileLock, bool) {
	for i := range il.held {
		if il.held[i].conflicts(req) {
			return il.held[i], true
		}
	}
	return fileLock{}, false
}

// wake tells the waiters that something was released.
func (il *inodeLocks) wake() {
	if il.changed != nil {
		close(il.changed)
		il.changed = nil
	}
}

// apply makes req the owner's state over its range: unlocks cut the
// owner's locks there (splitting one that straddles an end), a lock
// replaces them and merges with the owner's locks of the same type that it
// overlaps or adjoins.
func (il *inodeLocks) apply(req fileLock) {
	out := make([]fileLock, 0, len(il.held)+2)
	start, end := req.start, req.end
	weakened := false
	for _, l := range il.held {
		switch {
		case l.owner != req.owner || l.kind != req.kind:
			out = append(out, l)
		case req.typ != syscall.F_UNLCK && l.typ == req.typ && l.touches(req.start, req.end):
			start, end = min(start, l.start), max(end, l.end)
		case l.end < req.start || l.start > req.end:
			out = append(out, l)
		default:
			weakened = true
			if l.start < req.start {
				left := l
				left.end = req.start - 1
				out = append(out, left)
			}
			if l.end > req.end {
				right := l
				right.start = req.end + 1
				out = append(out, right)
			}
		}
	}
	if req.typ != syscall.F_UNLCK {
		req.start, req.end = start, end
		out = append(out, req)
	}
	il.held = out
	if weakened {
		il.wake()
	}
}

// drop removes every lock of owner of kind, and reports whether any went.
func (il *inodeLocks) drop(owner lockOwner, kind lockKind) bool {
	out := il.held[:0]
	for _, l := range il.held {
		if l.owner != owner || l.kind != kind {
			out = append(out, l)
		}
	}
	gone := len(out) < len(il.held)
	clear(il.held[len(out):])
	il.held = out
	if gone {
		il.wake()
	}
	return gone
}

// lockUse is an owner that took locks on an inode through open handles.
type lockUse struct {
	ino   uint64
	owner lockOwner
}

// lockRefs are the owners that took locks through one open handle. The
// table guards owners.
type lockRefs struct {
	owners map[lockOwner]bool
	// lost is set when a lock taken through the handle was lost
	// (filelocks_lost.go): its I/O fails from then on.
	lost atomic.Bool
}

// lockTable is every lock held through the views of one core. Its mutex is
// never held while a request waits, and nothing else is locked under it.
type lockTable struct {
	mu     sync.Mutex
	inodes map[uint64]*inodeLocks
	// uses are, per inode and owner, the open handles through which the
	// owner took locks. When the last of them is released the owner can
	// take no more and its locks go: that is how OFD locks, which the
	// kernel never unlocks itself, end with their file description. A
	// lost lock marks them (filelocks_lost.go).
	uses map[lockUse]map[*lockRefs]bool
	// shared is where the locks of the daemons sharing a store on etcd
	// meet (filelocks_shared.go); nil when the locks of this daemon are all
	// there is.
	shared lockShare
	log    *slog.Logger
}

func newLockTable() *lockTable {
	return &lockTable{inodes: make(map[uint64]*inodeLocks), uses: make(map[lockUse]map[*lockRefs]bool), log: slog.New(slog.DiscardHandler)}
}

// waiting counts the lock calls waiting for a lock (a takeover cannot
// move them: Core.LocksWaiting).
func (t *lockTable) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, il := range t.inodes {
		n += il.waiters
	}
	return n
}

// inodeLocked returns the locks of ino, made if needed. t.mu is held.
func (t *lockTable) inodeLocked(ino uint64) *inodeLocks {
	il := t.inodes[ino]
	if il == nil {
		il = &inodeLocks{}
		t.inodes[ino] = il
	}
	return il
}

// tidyLocked forgets an inode without locks or waiters. t.mu is held.
func (t *lockTable) tidyLocked(ino uint64, il *inodeLocks) {
	if len(il.held) == 0 && il.waiters == 0 && t.inodes[ino] == il {
		delete(t.inodes, ino)
	}
}

// test returns a held lock, here or in another daemon sharing the store,
// that would block req (F_GETLK).
func (t *lockTable) test(ino uint64, req fileLock) (fileLock, bool, syscall.Errno) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if il := t.inodes[ino]; il != nil {
		if l, busy := il.conflict(&req); busy {
			return l, true, 0
		}
	}
	return t.remoteConflict(ino, &req)
}

// set applies req at once (F_SETLK, flock with LOCK_NB, and every
// unlock), or fails with EAGAIN when another owner's lock is in the way.
// via records that the owner acted through that handle.
func (t *lockTable) set(ino uint64, req fileLock, via *lockRefs) syscall.Errno {
	t.mu.Lock()
	defer t.mu.Unlock()
	il := t.inodeLocked(ino)
	defer t.tidyLocked(ino, il)
	if ok, e := t.tryLocked(ino, il, req, via); e != 0 || ok {
		return e
	}
	return syscall.EAGAIN
}

// wait applies req as soon as no other owner's lock is in the way
// (F_SETLKW, flock without LOCK_NB). It ends with EINTR, having changed
// nothing, when ctx ends: go-fuse cancels it when the caller is
// interrupted by a signal or the view goes.
func (t *lockTable) wait(ctx context.Context, ino uint64, req fileLock, via *lockRefs) syscall.Errno {
	for {
		t.mu.Lock()
		il := t.inodeLocked(ino)
		if ok, e := t.tryLocked(ino, il, req, via); e != 0 || ok {
			t.tidyLocked(ino, il)
			t.mu.Unlock()
			return e
		}
		if il.changed == nil {
			il.changed = make(chan struct{})
		}
		changed := il.changed
		il.waiters++
		t.mu.Unlock()

		// Another daemon's lock going wakes the waiter through the
		// store's watch (remoteChanged); the poll only covers a watch
		// that was cut.
		var poll <-chan time.Time
		if t.shared != nil {
			poll = time.After(sharedLockPoll)
		}
		var e syscall.Errno
		select {
		case <-changed:
		case <-poll:
		case <-ctx.Done():
			e = syscall.EINTR
		}
		t.mu.Lock()
		il.waiters--
		t.tidyLocked(ino, il)
		t.mu.Unlock()
		if e != 0 {
			return e
		}
	}
}

// tryLocked applies req if nothing is in its way, here or in another
// daemon sharing the store (where the new state is then published). A
// flock conversion (shared to exclusive or back) first lets go of the old
// lock, as Linux does, so that two holders converting at once cannot
// deadlock. t.mu is held.
func (t *lockTable) tryLocked(ino uint64, il *inodeLocks, req fileLock, via *lockRefs) (bool, syscall.Errno) {
	converted := false
	if req.kind == kindFlock && req.typ != syscall.F_UNLCK {
		for i := range il.held {
			l := &il.held[i]
			if l.owner == req.owner && l.kind == kindFlock {
				if l.typ == req.typ {
					return true, 0
				}
				il.drop(req.owner, kindFlock)
				converted = true
				break
			}
		}
	}
	if req.typ != syscall.F_UNLCK {
		if _, busy := il.conflict(&req); busy {
			if converted {
				t.syncLocked(ino, il)
			}
			return false, 0
		}
	}
	base := slices.Clone(il.held)
	il.apply(req)
	// An unlock of nothing has nothing to tell the other daemons.
	if req.typ != syscall.F_UNLCK || !slices.Equal(base, il.held) {
		if ok, e := t.publishLocked(ino, il, &req); e != 0 || !ok {
			il.held = base
			if converted {
				t.syncLocked(ino, il)
			}
			return false, e
		}
	}
	if via != nil && req.typ != syscall.F_UNLCK && !via.owners[req.owner] {
		if via.owners == nil {
			via.owners = make(map[lockOwner]bool)
		}
		via.owners[req.owner] = true
		u := lockUse{ino, req.owner}
		if t.uses[u] == nil {
			t.uses[u] = make(map[*lockRefs]bool)
		}
		t.uses[u][via] = true
	}
	return true, 0
}

// unlockOwner releases every lock of kind that owner holds on ino: a
// close releases the process's record locks, the last close of a
// description its flock.
func (t *lockTable) unlockOwner(ino uint64, owner lockOwner, kind lockKind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if il := t.inodes[ino]; il != nil {
		if il.drop(owner, kind) {
			t.syncLocked(ino, il)
		}
		t.tidyLocked(ino, il)
	}
}

// closed notes that the handle behind via is released: owners that took
// locks through it and through no other open handle lose every lock on
// ino.
func (t *lockTable) closed(ino uint64, via *lockRefs) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for owner := range via.owners {
		u := lockUse{ino, owner}
		if delete(t.uses[u], via); len(t.uses[u]) > 0 {
			continue
		}
		delete(t.uses, u)
		if il := t.inodes[ino]; il != nil {
			record := il.drop(owner, kindRecord)
			if il.drop(owner, kindFlock) || record {
				t.syncLocked(ino, il)
			}
			t.tidyLocked(ino, il)
		}
	}
	via.owners = nil
}

// dropView releases every lock taken through a view that is gone.
func (t *lockTable) dropView(view uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ino, il := range t.inodes {
		out := il.held[:0]
		for _, l := range il.held {
			if l.owner.view != view {
				out = append(out, l)
			}
		}
		if len(out) < len(il.held) {
			clear(il.held[len(out):])
			il.held = out
			il.wake()
			t.syncLocked(ino, il)
		}
		t.tidyLocked(ino, il)
	}
	for u := range t.uses {
		if u.owner.view == view {
			delete(t.uses, u)
		}
	}
}

// heldLock is one held lock with its inode, as status lists it.
type heldLock struct {
	ino uint64
	fileLock
}

// list returns every held lock, by inode, then start.
func (t *lockTable) list() []heldLock {
	t.mu.Lock()
	var out []heldLock
	for ino, il := range t.inodes {
		for _, l := range il.held {
			out = append(out, heldLock{ino, l})
		}
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.ino != b.ino {
			return a.ino < b.ino
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		return a.start < b.start
	})
	return out
}
