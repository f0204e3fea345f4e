package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs/vfs"
)

// The lock callbacks of open files: the kernel of every view sends flock,
// fcntl and OFD locks here (fuse.MountOptions.EnableLocks), and the core
// decides them in its lock table, over the store inode (vfs/filelocks.go).
// These callbacks only convert.

// lockOf is what the kernel sent, as the core takes it.
func lockOf(owner uint64, lk *fuse.FileLock, flags uint32) vfs.Lock {
	return vfs.Lock{Owner: owner, Flock: flags&fuse.FUSE_LK_FLOCK != 0, Type: lk.Typ, Start: lk.Start, End: lk.End, Pid: lk.Pid}
}

// Getlk implements fs.FileGetlker (F_GETLK, F_OFD_GETLK): the first lock
// of another owner, in any view, that would block lk (vfs.Handle.Getlk).
func (h *handle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) (errno syscall.Errno) {
	defer h.node.v.fs.track("getlk", h.node.zone, time.Now(), &errno)
	l, e := h.vh.Getlk(lockOf(owner, lk, flags))
	if e != 0 {
		return e
	}
	*out = fuse.FileLock{Start: l.Start, End: l.End, Typ: l.Type, Pid: l.Pid}
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
	if e := h.vh.Setlk(ctx, lockOf(owner, lk, flags), wait); e != 0 || lk.Typ == syscall.F_UNLCK {
		return e
	}
	// What the previous holder wrote through another view must be out of
	// this view's cache before the new holder reads.
	h.node.v.fs.syncCaches(ctx, h.node.v, h.node.zone)
	return 0
}

// lockingFS is the view's go-fuse bridge with what the bridge does not
// pass on to file handles: the lock owner of FLUSH and RELEASE, which the
// kernel sends so that the core can release locks when a descriptor is
// closed (it releases none itself when locks are the daemon's).
type lockingFS struct {
	fuse.RawFileSystem
	v *View
}

// Flush is close(2) of one descriptor: as POSIX requires, the closing
// process loses its record locks on the file.
func (l *lockingFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	st := l.RawFileSystem.Flush(cancel, in)
	l.v.vv.Unlock(l.v.storeIno(in.NodeId), in.LockOwner, false)
	return st
}

// Release is the last close of an open file description: its flock and
// OFD locks go with the handle's own Release (vfs.Handle.Release), which
// drops what was taken through that handle alone. Not by the release's
// lock owner: for flock that is the kernel's file pointer, which a file
// opened after this one may already reuse, and a RELEASE is sent in the
// background, so it can arrive after the new file's lock and would drop
// it (TestLocksAcrossViews met it under load).
func (l *lockingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	l.RawFileSystem.Release(cancel, in)
	l.v.lockFhs.released(in.Fh)
}

// LocksLost implements vfs.Frontend: locks taken through vv were lost with
// the lease; its kernel drops its cached pages of their files, so that
// reads reach the core and fail there, and each is counted.
func (f *FS) LocksLost(vv *vfs.View, inos []uint64) {
	v, ok := vv.Kernel.(*View)
	if !ok || v.fs != f {
		return
	}
	if m := f.opts.Metrics; m != nil && m.locksLost != nil {
		m.locksLost.Add(float64(len(inos)))
	}
	items := make([]inval, 0, len(inos))
	for _, ino := range inos {
		items = append(items, dataOf(ino, 0, 0))
	}
	f.notify.post(nil, map[*View][]inval{v: items})
}

// newLocksLost is the counter of locks lost with the lease.
func newLocksLost() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shedfs_locks_lost_total",
		Help: "File locks this daemon lost because its lease on a shared store ended and another daemon took a conflicting lock before it was renewed; I/O through the descriptions that held them fails with EIO.",
	})
}
