package vfs

import (
	"context"
	"syscall"

	"github.com/shedfs/shedfs/acl"
)

// Lock is a file lock as a door hands it to the core, and as Getlk answers
// it: the kernel's F_GETLK/F_SETLK arguments, whatever the protocol.
type Lock struct {
	// Owner is who holds the lock within its view: the number the
	// view's kernel gives a process's file table (POSIX locks) or an open
	// file description (OFD and flock locks).
	Owner uint64
	// Flock is a flock(2) lock; otherwise an fcntl record lock (POSIX or
	// OFD). The two families never conflict with each other.
	Flock bool
	// Type is syscall.F_RDLCK, F_WRLCK, or F_UNLCK (an unlock; in
	// Getlk's answer: nothing is in the way).
	Type uint32
	// Start and End are the inclusive byte range; End MaxLockOffset runs
	// to the end of the file, however long it grows.
	Start, End uint64
	// Pid is the process that asks, or that holds the lock in the way.
	Pid uint32
}

// MaxLockOffset is the kernel's OFFSET_MAX: a lock ending there runs to
// the end of the file.
const MaxLockOffset = maxOffset

// request is l, asked through h, as the table compares it; EINVAL for a
// type or a range no kernel sends.
func (h *Handle) request(l Lock) (fileLock, syscall.Errno) {
	switch l.Type {
	case syscall.F_RDLCK, syscall.F_WRLCK, syscall.F_UNLCK:
	default:
		return fileLock{}, syscall.EINVAL
	}
	if l.Start > l.End {
		return fileLock{}, syscall.EINVAL
	}
	kind := kindRecord
	if l.Flock {
		kind = kindFlock
	}
	return fileLock{owner: lockOwner{view: h.v.id, owner: l.Owner}, kind: kind, typ: l.Type,
		start: l.Start, end: l.End, pid: l.Pid, user: h.v.user, view: h.v}, 0
}

// Getlk is F_GETLK (and F_OFD_GETLK): the first lock of another owner, in
// any view or in another daemon sharing the store, that would block l;
// Type F_UNLCK over l's range when none does.
func (h *Handle) Getlk(l Lock) (Lock, syscall.Errno) {
	req, e := h.request(l)
	if e != 0 {
		return Lock{}, e
	}
	if e := h.lockLost(acl.OpLock, false); e != 0 {
		return Lock{}, e
	}
	held, busy, e := h.v.c.locks.test(h.at.Ino, req)
	if e != 0 {
		return Lock{}, e
	}
	if !busy {
		return Lock{Start: l.Start, End: l.End, Type: syscall.F_UNLCK}, 0
	}
	return Lock{Flock: held.kind == kindFlock, Type: held.typ, Start: held.start, End: held.end, Pid: held.pid}, 0
}

// Setlk applies l (F_SETLK, F_OFD_SETLK, flock, and every unlock): at once,
// or EAGAIN when another owner's lock is in the way; with wait (F_SETLKW,
// flock without LOCK_NB) as soon as nothing is in the way, holding
// nothing else meanwhile, or EINTR when ctx ends first (the door cancels
// it when the caller is interrupted or the view goes). Taking a lock is
// decided by acl (a member removed from a group may take none on its
// files); letting go is never refused.
func (h *Handle) Setlk(ctx context.Context, l Lock, wait bool) syscall.Errno {
	req, e := h.request(l)
	if e != 0 {
		return e
	}
	unlock := req.typ == syscall.F_UNLCK
	if e := h.lockLost(acl.OpLock, unlock); e != 0 {
		return e
	}
	if !unlock {
		if d := acl.Lock(h.v.Actor(), h.Entry()); !d.Allowed() {
			return h.v.deny(acl.OpLock, h.at, "", d)
		}
		req.path = h.at.pathOf("")
		h.v.tookLocks.Store(true)
	}
	t := h.v.c.locks
	if wait && !unlock {
		return t.wait(ctx, h.at.Ino, req, &h.locks)
	}
	return t.set(h.at.Ino, req, &h.locks)
}

// Unlock releases every lock of one family that owner holds on ino through
// v: a close of a descriptor (FLUSH) releases the closing process's record
// locks, as POSIX requires, and the last close of an open file description
// its flock (flock set).
func (v *View) Unlock(ino, owner uint64, flock bool) {
	if !v.tookLocks.Load() {
		return
	}
	kind := kindRecord
	if flock {
		kind = kindFlock
	}
	v.c.locks.unlockOwner(ino, lockOwner{view: v.id, owner: owner}, kind)
}

// releaseLocks lets go of what the handle's owners held through it alone:
// OFD and flock locks end with their open file description.
func (h *Handle) releaseLocks() {
	if h.v.tookLocks.Load() {
		h.v.c.locks.closed(h.at.Ino, &h.locks)
	}
}

// dropLocks releases every lock taken through v, which is gone.
func (v *View) dropLocks() {
	if v.tookLocks.Load() {
		v.c.locks.dropView(v.id)
	}
}

// Locks lists every lock held through the views of this process, by
// inode.
func (c *Core) Locks() []LockInfo {
	held := c.locks.list()
	out := make([]LockInfo, 0, len(held))
	for _, l := range held {
		out = append(out, lockInfo(l.ino, &l.fileLock))
	}
	return out
}

// lockInfo is l, held on ino, as status lists it.
func lockInfo(ino uint64, l *fileLock) LockInfo {
	li := LockInfo{User: l.user, Ino: ino, Path: l.path, Kind: l.kind.String(),
		Write: l.typ == syscall.F_WRLCK, Start: l.start, Pid: l.pid}
	if l.end != maxOffset {
		li.Len = l.end - l.start + 1
	}
	return li
}

// LocksWaiting counts the lock calls that wait for a lock (F_SETLKW, flock
// without LOCK_NB): requests in flight that only this process can answer,
// which a takeover cannot move.
func (c *Core) LocksWaiting() int { return c.locks.waiting() }

// HeldLock is a lock of this daemon held through one view, as a takeover
// hands it to the next daemon, which takes it again through the same
// handles (Handle.Setlk).
type HeldLock struct {
	Ino uint64
	Lock
}

// HeldLocks lists the locks held through v by this daemon.
func (v *View) HeldLocks() []HeldLock {
	var out []HeldLock
	for _, l := range v.c.locks.list() {
		if l.owner.view != v.id || l.owner.daemon != "" {
			continue
		}
		out = append(out, HeldLock{Ino: l.ino, Lock: Lock{Owner: l.owner.owner, Flock: l.kind == kindFlock,
			Type: l.typ, Start: l.start, End: l.end, Pid: l.pid}})
	}
	return out
}
