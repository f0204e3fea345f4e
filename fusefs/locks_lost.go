package fusefs

import (
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// A daemon whose lease on a shared store ended loses its locks there, and
// another daemon may take a conflicting one before the lease is renewed
// (locks_shared.go, renewed). The process that believed it held the lock
// must not go on writing the file as if it still did, so this daemon does
// what the Linux NFSv4 client does with a lost lock (recover_lost_locks
// off): the lock is gone, and every read, write, fallocate and lock
// request through the open file descriptions it was taken through fails
// with EIO (acl.LockLost) until they are closed; unlocks and the close
// work, and a fresh open is a fresh start. The kernel names the
// description (the file handle) in each of those requests, so the
// daemon tells them apart: a flock or OFD lock marks the description it
// belongs to, a POSIX lock every description its process locked through.
// Reads served from the kernel's page cache never reach the daemon, so
// the view's cached pages of the file are dropped with the loss.

// lockLost refuses op through h once a lock taken through it was lost;
// unlock is letting go, which is never refused.
func (h *handle) lockLost(op acl.Op, unlock bool) syscall.Errno {
	if d := acl.LockLost(h.locks.lost.Load(), unlock); !d.Allowed() {
		return h.node.deny(op, "", d)
	}
	return 0
}

// locksLost tells of locks lost with the lease: each is audited (reason
// lock_lost) and counted, and the cached pages of its file are dropped
// from the view it was taken through, so that reads reach the daemon and
// fail there.
func (f *FS) locksLost(lost []heldLock) {
	if len(lost) == 0 {
		return
	}
	views := make(map[uint64]*View)
	for _, v := range f.notify.all() {
		views[v.id] = v
	}
	byView := make(map[*View][]inval)
	now := time.Now()
	for _, l := range lost {
		e := shedfs.Event{Time: now, User: l.user, Path: l.path, Op: acl.OpLock.String(), Errno: syscall.EIO, Reason: acl.ReasonLockLost, Door: vfs.DoorFUSE}
		if rec, err := f.store.GetInode(l.ino); err == nil {
			e.Zone = rec.Zone
		}
		if v := views[l.owner.view]; v != nil {
			e.Session = v.session
			byView[v] = append(byView[v], dataOf(l.ino, 0, 0))
		}
		f.record(e)
		if m := f.opts.Metrics; m != nil && m.locksLost != nil {
			m.locksLost.Inc()
		}
	}
	f.notify.post(nil, byView)
}

// newLocksLost is the counter of locks lost with the lease.
func newLocksLost() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shedfs_locks_lost_total",
		Help: "File locks this daemon lost because its lease on a shared store ended and another daemon took a conflicting lock before it was renewed; I/O through the descriptions that held them fails with EIO.",
	})
}
