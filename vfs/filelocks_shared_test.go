package vfs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs/metadata"
)

// fakeShare is the store as other daemons see it: their locks, and what
// this table published.
type fakeShare struct {
	mu        sync.Mutex
	others    map[uint64][]metadata.DaemonLocks
	published map[uint64][]metadata.LockRecord
	fail      error
	publishes int
}

func newFakeShare() *fakeShare {
	return &fakeShare{others: map[uint64][]metadata.DaemonLocks{}, published: map[uint64][]metadata.LockRecord{}}
}

func (s *fakeShare) OtherLocks(ino uint64) ([]metadata.DaemonLocks, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.others[ino], s.fail
}

func (s *fakeShare) PublishLocks(ino uint64, mine []metadata.LockRecord, admit func([]metadata.DaemonLocks) bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return false, s.fail
	}
	if admit != nil && !admit(s.others[ino]) {
		return false, nil
	}
	s.publishes++
	s.published[ino] = mine
	return true, nil
}

func (s *fakeShare) set(ino uint64, locks ...metadata.LockRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(locks) == 0 {
		delete(s.others, ino)
		return
	}
	s.others[ino] = []metadata.DaemonLocks{{Daemon: "other", Locks: locks}}
}

func (s *fakeShare) mine(ino uint64) []metadata.LockRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published[ino]
}

// TestLockTableShared: with another daemon's locks in the store, a
// conflicting request is refused (and F_GETLK reports the other's lock),
// one that fits is granted and published, an unlock is published, a store
// that cannot answer gives EIO and changes nothing, a waiter is woken when
// the other daemon lets go (remoteChanged), and after a lease renewal a
// lock another daemon took meanwhile wins.
func TestLockTableShared(t *testing.T) {
	share := newFakeShare()
	lt := newLockTable()
	lt.shared = share
	other := metadata.LockRecord{View: 1, Owner: 1, Write: true, Start: 0, End: 99, Pid: 77}
	share.set(1, other)

	if e := lt.set(1, rec(1, 1, rd, 50, 60), nil); e != syscall.EAGAIN {
		t.Fatalf("read lock over the other daemon's write lock: %v, want EAGAIN", e)
	}
	if got := state(lt, 1); got != "" {
		t.Errorf("refused lock left %q", got)
	}
	l, busy, e := lt.test(1, rec(1, 1, rd, 50, 60))
	if !busy || e != 0 || l.pid != 77 || l.start != 0 || l.end != 99 || l.owner.daemon != "other" {
		t.Errorf("F_GETLK over the other's lock: %+v busy %v errno %v", l, busy, e)
	}
	if e := lt.set(1, fl(1, 1, wr), nil); e != 0 {
		t.Errorf("flock beside the other's record lock: %v (the families never conflict)", e)
	}
	if e := lt.set(1, rec(1, 1, wr, 100, 199), nil); e != 0 {
		t.Fatalf("write lock beside the other's: %v", e)
	}
	if got := share.mine(1); len(got) != 2 {
		t.Errorf("published %+v, want the flock and the record lock", got)
	}
	if e := lt.set(1, rec(1, 1, un, 0, maxOffset), nil); e != 0 {
		t.Fatal(e)
	}
	if got := share.mine(1); len(got) != 1 || !got[0].Flock {
		t.Errorf("after the unlock published %+v, want the flock alone", got)
	}
	lt.unlockOwner(1, lockOwner{view: 1, owner: 1}, kindFlock)
	if got := share.mine(1); len(got) != 0 {
		t.Errorf("after the close published %+v, want nothing", got)
	}
	n := share.publishes
	lt.set(1, rec(1, 1, un, 0, maxOffset), nil)
	lt.unlockOwner(1, lockOwner{view: 1, owner: 1}, kindRecord)
	if share.publishes != n {
		t.Errorf("unlocks of nothing published %d times, want none", share.publishes-n)
	}

	share.fail = errors.New("etcd: lease not found")
	if e := lt.set(1, rec(1, 1, wr, 100, 199), nil); e != syscall.EIO {
		t.Errorf("lock with the store failing: %v, want EIO", e)
	}
	if _, _, e := lt.test(1, rec(1, 1, wr, 100, 199)); e != syscall.EIO {
		t.Errorf("F_GETLK with the store failing: %v, want EIO", e)
	}
	if got := state(lt, 1); got != "" {
		t.Errorf("a lock the store refused is held: %q", got)
	}
	share.fail = nil

	// A waiter is woken by the other daemon's unlock, well before its
	// poll.
	done := make(chan syscall.Errno, 1)
	start := time.Now()
	go func() { done <- lt.wait(context.Background(), 1, rec(2, 1, wr, 0, 9), nil) }()
	time.Sleep(50 * time.Millisecond)
	share.set(1)
	lt.remoteChanged(1)
	select {
	case e := <-done:
		if e != 0 {
			t.Fatalf("waiter: %v", e)
		}
		if d := time.Since(start); d >= sharedLockPoll {
			t.Errorf("waiter granted after %v: by the poll, not the wake", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not granted after the other daemon let go")
	}

	// The lease was lost and renewed; meanwhile the other daemon took
	// a lock over one of ours: ours goes, the other stays published.
	// The handles the lost lock was taken through are marked lost (their
	// I/O then fails); the kept lock's handle is not.
	var keptVia, lostVia lockRefs
	if e := lt.set(1, rec(3, 1, rd, 500, 599), &keptVia); e != 0 {
		t.Fatal(e)
	}
	share.set(1, metadata.LockRecord{View: 9, Owner: 9, Write: true, Start: 0, End: 5})
	lost := lt.renewed()
	if got := state(lt, 1); got != "3/1 posix R 500-599" {
		t.Errorf("after the renewal held %q, want only the lock nobody took", got)
	}
	if got := share.mine(1); len(got) != 1 || got[0].Start != 500 {
		t.Errorf("after the renewal published %+v", got)
	}
	if len(lost) != 1 || lost[0].ino != 1 || lost[0].owner != (lockOwner{view: 2, owner: 1}) {
		t.Errorf("renewal reported lost %+v, want the waiter's lock on inode 1", lost)
	}
	if keptVia.lost.Load() {
		t.Error("the handle of a lock that stayed is marked lost")
	}

	share.set(1)
	if e := lt.set(2, fl(4, 1, wr), &lostVia); e != 0 {
		t.Fatal(e)
	}
	share.set(2, metadata.LockRecord{View: 9, Owner: 9, Flock: true})
	if lost := lt.renewed(); len(lost) != 1 || lost[0].kind != kindFlock {
		t.Errorf("renewal reported lost %+v, want the flock", lost)
	}
	if !lostVia.lost.Load() {
		t.Error("the handle the lost flock was taken through is not marked lost")
	}
	if keptVia.lost.Load() {
		t.Error("a handle of another inode is marked lost")
	}
	lt.closed(2, &lostVia)
	lt.closed(1, &keptVia)
	if len(lt.uses) != 0 {
		t.Errorf("handles closed, uses left: %v", lt.uses)
	}
}
