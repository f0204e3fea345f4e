package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// The lock callbacks of open files: the kernel of every view sends flock,
// fcntl and OFD locks here (fuse.MountOptions.EnableLocks), and they are
// decided in the FS's lock table, over the store inode.

// lockRequest turns what the kernel sent into a request of the table.
func (h *handle) lockRequest(owner uint64, lk *fuse.FileLock, flags uint32) (fileLock, syscall.Errno) {
	switch lk.Typ {
	case syscall.F_RDLCK, syscall.F_WRLCK, syscall.F_UNLCK:
	default:
		return fileLock{}, syscall.EINVAL
	}
	if lk.Start > lk.End {
		return fileLock{}, syscall.EINVAL
	}
	kind := kindRecord
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		kind = kindFlock
	}
	return fileLock{
		owner: lockOwner{view: h.node.v.id, owner: owner},
		kind:  kind,
		typ:   lk.Typ,
		start: lk.Start,
		end:   lk.End,
		pid:   lk.Pid,
		user:  h.node.v.user,
	}, 0
}

// admitLock decides whether the view may still take locks on the file (a
// member removed from a group may not); unlocking is never refused.
func (h *handle) admitLock(req *fileLock) syscall.Errno {
	if req.typ == syscall.F_UNLCK {
		return 0
	}
	entry := h.vh.Entry()
	if d := acl.Lock(h.node.v.actor(), entry); !d.Allowed() {
		return h.node.deny(acl.OpLock, "", d)
	}
	req.path = h.node.pathOf("")
	return 0
}

// Getlk implements fs.FileGetlker (F_GETLK, F_OFD_GETLK): the first lock
// of another owner, in any view, that would block lk.
func (h *handle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) (errno syscall.Errno) {
	defer h.node.v.fs.track("getlk", h.node.zone, time.Now(), &errno)
	req, e := h.lockRequest(owner, lk, flags)
	if e != 0 {
		return e
	}
	if e := h.lockLost(acl.OpLock, false); e != 0 {
		return e
	}
	l, busy, e := h.node.v.fs.locks.test(h.node.ino, req)
	if e != 0 {
		return e
	}
	if !busy {
		*out = fuse.FileLock{Start: lk.Start, End: lk.End, Typ: syscall.F_UNLCK}
		return 0
	}
	*out = fuse.FileLock{Start: l.start, End: l.end, Typ: l.typ, Pid: l.pid}
	return 0
}

// Setlk implements fs.FileSetlker (F_SETLK, F_OFD_SETLK, flock with
// LOCK_NB, and every unlock): EAGAIN when another owner's lock is in the
// way.
func (h *handle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) (errno syscall.Errno) {
	defer h.node.v.fs.track("setlk", h.node.zone, time.Now(), &errno)
	return h.setlk(ctx, owner, lk, flags, false)
}

// Setlkw implements fs.FileSetlkwer (F_SETLKW, F_OFD_SETLKW, flock): waits
// until the lock is free, holding nothing else meanwhile, or until the
// caller is interrupted (EINTR; the kernel restarts the call if the signal
// handler asked for it).
func (h *handle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) (errno syscall.Errno) {
	defer h.node.v.fs.track("setlkw", h.node.zone, time.Now(), &errno)
	return h.setlk(ctx, owner, lk, flags, true)
}

func (h *handle) setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	req, e := h.lockRequest(owner, lk, flags)
	if e != 0 {
		return e
	}
	if e := h.lockLost(acl.OpLock, req.typ == syscall.F_UNLCK); e != 0 {
		return e
	}
	if e := h.admitLock(&req); e != 0 {
		return e
	}
	f := h.node.v.fs
	if wait && req.typ != syscall.F_UNLCK {
		e = f.locks.wait(ctx, h.node.ino, req, &h.locks)
	} else {
		e = f.locks.set(h.node.ino, req, &h.locks)
	}
	if e != 0 || req.typ == syscall.F_UNLCK {
		return e
	}
	// What the previous holder wrote through another view must be out of
	// this view's cache before the new holder reads.
	f.syncCaches(ctx, h.node.v, h.node.zone)
	return 0
}

// releaseLocks lets go of what the handle's owners held through it alone.
func (h *handle) releaseLocks() {
	h.node.v.fs.locks.closed(h.node.ino, &h.locks)
}

// lockingFS is the view's go-fuse bridge with what the bridge does not
// pass on to file handles: the lock owner of FLUSH and RELEASE, which the
// kernel sends so that the daemon can release locks when a descriptor is
// closed (it releases none itself when locks are the daemon's).
type lockingFS struct {
	fuse.RawFileSystem
	v *View
}

// Flush is close(2) of one descriptor: as POSIX requires, the closing
// process loses its record locks on the file.
func (l *lockingFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	st := l.RawFileSystem.Flush(cancel, in)
	l.v.fs.locks.unlockOwner(l.v.storeIno(in.NodeId), lockOwner{view: l.v.id, owner: in.LockOwner}, kindRecord)
	return st
}

// Release is the last close of an open file description: its flock goes
// (the handle's own Release does the same for OFD locks).
func (l *lockingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	if in.ReleaseFlags&fuse.FUSE_RELEASE_FLOCK_UNLOCK != 0 {
		l.v.fs.locks.unlockOwner(l.v.storeIno(in.NodeId), lockOwner{view: l.v.id, owner: in.LockOwner}, kindFlock)
	}
	l.RawFileSystem.Release(cancel, in)
	l.v.lockFhs.released(in.Fh)
}

// Locks lists every lock held through the views, by inode.
func (f *FS) Locks() []vfs.LockInfo {
	held := f.locks.list()
	out := make([]vfs.LockInfo, 0, len(held))
	for _, l := range held {
		out = append(out, lockInfo(l.ino, &l.fileLock))
	}
	return out
}

// lockInfo is l, held on ino, as status lists it.
func lockInfo(ino uint64, l *fileLock) vfs.LockInfo {
	li := vfs.LockInfo{User: l.user, Ino: ino, Path: l.path, Kind: l.kind.String(),
		Write: l.typ == syscall.F_WRLCK, Start: l.start, Pid: l.pid}
	if l.end != maxOffset {
		li.Len = l.end - l.start + 1
	}
	return li
}
