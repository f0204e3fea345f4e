package vfs

import (
	"fmt"
	"log/slog"
	"sort"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/metadata"
)

// Several daemons may serve one store on etcd, each with its own lock
// table. For a lock taken on one host to block the others, every table
// publishes the locks it holds on an inode in the store
// (metadata.Store.PublishLocks, under the daemon's lease) in the same step
// that checks them against what the other daemons published, and wakes its
// waiters when another daemon's locks change (the store's watch:
// FollowLocks). The table still decides among its own views alone; the
// store only adds the other daemons' locks. A daemon that dies takes its
// locks with its lease; one whose lease was lost and renewed publishes its
// locks again, and loses those another daemon took meanwhile (renewed;
// I/O through the descriptions that held them then fails: filelocks_lost.go).

// sharedLockPoll is how often a waiter for a lock held in another daemon
// looks again without being woken, should the watch have missed a change.
const sharedLockPoll = 2 * time.Second

// lockShare is the store as the place where the daemons' locks meet:
// *metadata.Store.
type lockShare interface {
	OtherLocks(ino uint64) ([]metadata.DaemonLocks, error)
	PublishLocks(ino uint64, mine []metadata.LockRecord, admit func(others []metadata.DaemonLocks) bool) (bool, error)
}

// share makes the table meet the other daemons of a store on etcd, and
// wake its waiters when their locks change.
func (t *lockTable) share(store *metadata.Store, log *slog.Logger) {
	t.log = log
	if store == nil || !store.Shared() {
		return
	}
	t.shared = store
	store.FollowLocks(t.remoteChanged)
}

// recordOf is a lock of this daemon as the store keeps it.
func recordOf(l *fileLock) metadata.LockRecord {
	return metadata.LockRecord{View: l.owner.view, Owner: l.owner.owner, Flock: l.kind == kindFlock,
		Write: l.typ == syscall.F_WRLCK, Start: l.start, End: l.end, Pid: l.pid, User: l.user, Path: l.path}
}

// lockOfRecord is a lock another daemon holds, as the table compares it.
func lockOfRecord(daemon string, r *metadata.LockRecord) fileLock {
	l := fileLock{owner: lockOwner{daemon: daemon, view: r.View, owner: r.Owner},
		kind: kindRecord, typ: syscall.F_RDLCK, start: r.Start, end: r.End, pid: r.Pid, user: r.User, path: r.Path}
	if r.Flock {
		l.kind = kindFlock
	}
	if r.Write {
		l.typ = syscall.F_WRLCK
	}
	return l
}

// firstConflict returns the first lock of others that req cannot coexist
// with.
func firstConflict(others []metadata.DaemonLocks, req *fileLock) (fileLock, bool) {
	for _, d := range others {
		for i := range d.Locks {
			if l := lockOfRecord(d.Daemon, &d.Locks[i]); l.conflicts(req) {
				return l, true
			}
		}
	}
	return fileLock{}, false
}

// remoteConflict returns a lock another daemon holds that would block
// req; EIO when the store cannot say. t.mu is held.
func (t *lockTable) remoteConflict(ino uint64, req *fileLock) (fileLock, bool, syscall.Errno) {
	if t.shared == nil {
		return fileLock{}, false, 0
	}
	others, err := t.shared.OtherLocks(ino)
	if err != nil {
		t.log.Error("read the locks of other daemons", "ino", ino, "err", err)
		return fileLock{}, false, syscall.EIO
	}
	l, busy := firstConflict(others, req)
	return l, busy, 0
}

// records are the locks of il as the store keeps them.
func records(il *inodeLocks) []metadata.LockRecord {
	out := make([]metadata.LockRecord, 0, len(il.held))
	for i := range il.held {
		out = append(out, recordOf(&il.held[i]))
	}
	return out
}

// publishLocked publishes il, which now holds req, unless another daemon
// holds a lock in req's way (ok false). An unlock is always published; if
// the store cannot take it, the record stays until the next publish or
// the lease's end, and the unlock holds here. EIO when a lock cannot be
// published. t.mu is held.
func (t *lockTable) publishLocked(ino uint64, il *inodeLocks, req *fileLock) (bool, syscall.Errno) {
	if t.shared == nil {
		return true, 0
	}
	if req.typ == syscall.F_UNLCK {
		t.syncLocked(ino, il)
		return true, 0
	}
	ok, err := t.shared.PublishLocks(ino, records(il), func(others []metadata.DaemonLocks) bool {
		_, busy := firstConflict(others, req)
		return !busy
	})
	if err != nil {
		t.log.Error("publish a lock to the other daemons", "ino", ino, "err", err)
		return false, syscall.EIO
	}
	return ok, 0
}

// syncLocked publishes il after locks went. t.mu is held.
func (t *lockTable) syncLocked(ino uint64, il *inodeLocks) {
	if t.shared == nil {
		return
	}
	if _, err := t.shared.PublishLocks(ino, records(il), nil); err != nil {
		t.log.Error("publish an unlock to the other daemons", "ino", ino, "err", err)
	}
}

// remoteChanged wakes the waiters for ino (0: for every inode) when
// another daemon's locks on it changed.
func (t *lockTable) remoteChanged(ino uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ino != 0 {
		if il := t.inodes[ino]; il != nil {
			il.wake()
		}
		return
	}
	for _, il := range t.inodes {
		il.wake()
	}
}

// renewed publishes every lock of the table again after the daemon's
// lease, and with it every record, was lost and renewed. A lock that
// another daemon's lock now conflicts with was taken from its holder
// meanwhile: it goes here too, logged, and the handles it was taken
// through are marked lost (filelocks_lost.go). It returns the lost locks.
func (t *lockTable) renewed() []heldLock {
	if t.shared == nil {
		return nil
	}
	var gone []heldLock
	t.mu.Lock()
	defer t.mu.Unlock()
	for ino, il := range t.inodes {
		if len(il.held) == 0 {
			continue
		}
		for range 3 {
			var lost []fileLock
			ok, err := t.shared.PublishLocks(ino, records(il), func(others []metadata.DaemonLocks) bool {
				lost = lost[:0]
				for i := range il.held {
					if _, busy := firstConflict(others, &il.held[i]); busy {
						lost = append(lost, il.held[i])
					}
				}
				return len(lost) == 0
			})
			if err != nil {
				t.log.Error("publish locks again after the lease was renewed", "ino", ino, "err", err)
				break
			}
			if ok {
				break
			}
			kept := il.held[:0]
			for _, l := range il.held {
				if !containsLock(lost, &l) {
					kept = append(kept, l)
				}
			}
			clear(il.held[len(kept):])
			il.held = kept
			for _, l := range lost {
				t.log.Error("lock lost with the lease: another daemon took a conflicting lock meanwhile; I/O through the descriptions that held it fails with EIO",
					"ino", ino, "path", l.path, "user", l.user, "pid", l.pid, "kind", l.kind.String())
				for via := range t.uses[lockUse{ino, l.owner}] {
					via.lost.Store(true)
				}
				gone = append(gone, heldLock{ino, l})
			}
			il.wake()
		}
		t.tidyLocked(ino, il)
	}
	return gone
}

// containsLock reports whether ls holds l.
func containsLock(ls []fileLock, l *fileLock) bool {
	for i := range ls {
		if ls[i] == *l {
			return true
		}
	}
	return false
}

// PeerLocks lists, on a store several daemons share, every daemon's
// locks: this one's (Locks) and the others' as the store keeps them, each
// with the daemon that holds it, by inode. Locks alone on a store no
// other daemon shares.
func (c *Core) PeerLocks() ([]LockInfo, error) {
	own := c.Locks()
	if c.locks.shared == nil {
		return own, nil
	}
	me := c.store.DaemonName()
	for i := range own {
		own[i].Daemon = me
	}
	peers, err := c.store.PeerLocks()
	if err != nil {
		return own, fmt.Errorf("locks of the other daemons: %w", err)
	}
	for i := range peers {
		p := &peers[i]
		l := lockOfRecord(p.Daemon, &p.LockRecord)
		li := lockInfo(p.Ino, &l)
		li.Daemon = p.Daemon
		own = append(own, li)
	}
	sort.SliceStable(own, func(i, j int) bool { return own[i].Ino < own[j].Ino })
	return own, nil
}
