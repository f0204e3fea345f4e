package vfs

import (
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// A daemon whose lease on a shared store ended loses its locks there, and
// another daemon may take a conflicting one before the lease is renewed
// (filelocks_shared.go, renewed). The process that believed it held the lock
// must not go on writing the file as if it still did, so this daemon does
// what the Linux NFSv4 client does with a lost lock (recover_lost_locks
// off): the lock is gone, and every read, write, fallocate and lock
// request through the open file descriptions it was taken through fails
// with EIO (acl.LockLost) until they are closed; unlocks and the close
// work, and a fresh open is a fresh start. The kernel names the
// description (the file handle) in each of those requests, so the
// daemon tells them apart: a flock or OFD lock marks the description it
// belongs to, a POSIX lock every description its process locked through.
// Reads served from a kernel's page cache never reach the core, so the
// view's frontend is told to drop its cached pages of the file with the
// loss (Frontend.LocksLost).

// lockLost refuses op through h once a lock taken through it was lost;
// unlock is letting go, which is never refused.
func (h *Handle) lockLost(op acl.Op, unlock bool) syscall.Errno {
	if d := acl.LockLost(h.locks.lost.Load(), unlock); !d.Allowed() {
		return h.v.deny(op, h.at, "", d)
	}
	return 0
}

// locksLost tells of locks lost with the lease: each is audited (reason
// lock_lost), and the frontends drop the cached pages of its file from
// the view it was taken through, so that reads reach the core and fail
// there.
func (c *Core) locksLost(lost []heldLock) {
	if len(lost) == 0 {
		return
	}
	byView := make(map[*View][]uint64)
	now := time.Now()
	for _, l := range lost {
		e := shedfs.Event{Time: now, User: l.user, Path: l.path, Op: acl.OpLock.String(), Errno: syscall.EIO, Reason: acl.ReasonLockLost, Door: DoorFUSE}
		if rec, err := c.store.GetInode(l.ino); err == nil {
			e.Zone = rec.Zone
		}
		if v := l.view; v != nil {
			e.Session, e.Door = v.session, v.door
			byView[v] = append(byView[v], l.ino)
		}
		c.Record(e)
	}
	for _, f := range c.attached() {
		for v, inos := range byView {
			f.LocksLost(v, inos)
		}
	}
}
