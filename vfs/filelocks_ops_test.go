package vfs

import (
	"context"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// TestHandleLocks: locks taken through the handles of two views of one
// file conflict in the core with no mount; F_GETLK names the holder; a
// close of the holder's descriptor (View.Unlock), the release of the
// handle and the end of the view each let go; a lock lost with the lease
// fails the I/O of its handle with EIO, once recorded, but not an unlock.
func TestHandleLocks(t *testing.T) {
	f := newFixture(t, nil)
	n := f.file(t, "f", 10)
	open := func() (*View, *Handle) {
		t.Helper()
		v, err := f.core.NewView(DoorFUSE, "alice", nil, ViewOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h, _, e := v.Open(context.Background(), At{Ino: n.Ino, Zone: n.Zone, Paths: paths("/f")}, syscall.O_RDWR)
		if e != 0 {
			t.Fatalf("open: %v", e)
		}
		return v, h
	}
	v1, h1 := open()
	v2, h2 := open()
	ctx := context.Background()
	write := Lock{Owner: 7, Type: syscall.F_WRLCK, Start: 0, End: MaxLockOffset, Pid: 42}
	if e := h1.Setlk(ctx, write, false); e != 0 {
		t.Fatalf("lock through view 1: %v", e)
	}
	// The same owner number in another view is another owner.
	if e := h2.Setlk(ctx, write, false); e != syscall.EAGAIN {
		t.Fatalf("lock through view 2: %v, want EAGAIN", e)
	}
	got, e := h2.Getlk(Lock{Owner: 7, Type: syscall.F_RDLCK, Start: 5, End: 5})
	if e != 0 || got.Type != syscall.F_WRLCK || got.Pid != 42 || got.End != MaxLockOffset {
		t.Fatalf("getlk through view 2: %+v %v", got, e)
	}
	if ls := f.core.Locks(); len(ls) != 1 || ls[0].Path != "/f" || ls[0].User != "alice" || !ls[0].Write {
		t.Fatalf("locks listed: %+v", ls)
	}
	if _, e := h1.Getlk(Lock{Type: 99}); e != syscall.EINVAL {
		t.Errorf("a lock of no type: %v, want EINVAL", e)
	}
	// A flock is another family: no conflict with the record lock.
	if e := h2.Setlk(ctx, Lock{Owner: 8, Flock: true, Type: syscall.F_WRLCK, End: MaxLockOffset}, false); e != 0 {
		t.Fatalf("flock beside a record lock: %v", e)
	}
	v1.Unlock(n.Ino, 7, false) // the holder closed a descriptor
	if e := h2.Setlk(ctx, write, false); e != 0 {
		t.Fatalf("lock through view 2 after view 1's close: %v", e)
	}
	h2.Release()
	if e := h1.Setlk(ctx, write, true); e != 0 {
		t.Fatalf("lock through view 1 after view 2's handle went: %v", e)
	}
	v1.Close()
	if ls := f.core.Locks(); len(ls) != 0 {
		t.Fatalf("locks left after the views let go: %+v", ls)
	}
	v2.Close()

	// A lock lost with the lease (another daemon took a conflicting one
	// meanwhile): the frontend is told, and I/O through its handle
	// fails, an unlock does not.
	fr := &frontend{}
	f.core.Attach(fr)
	share := newFakeShare()
	f.core.locks.shared = share
	v3, h3 := open()
	defer v3.Close()
	if e := h3.Setlk(ctx, write, false); e != 0 {
		t.Fatalf("lock on a shared store: %v", e)
	}
	share.set(n.Ino, metadata.LockRecord{View: 1, Owner: 1, Write: true, End: MaxLockOffset})
	f.core.locksLost(f.core.locks.renewed())
	if len(fr.lost) != 1 || fr.lost[0] != n.Ino {
		t.Fatalf("frontend told of lost locks on %v, want [%d]", fr.lost, n.Ino)
	}
	if ev := f.events.last(); ev.Reason != acl.ReasonLockLost || ev.Path != "/f" || ev.Door != DoorFUSE || ev.Zone != n.Zone {
		t.Errorf("recorded %+v, want the lost lock", ev)
	}
	denied := f.events.count(acl.OpRead.String())
	if _, e := h3.Read(make([]byte, 4), 0); e != syscall.EIO {
		t.Errorf("read after the lock was lost: %v, want EIO", e)
	}
	if _, _, e := h3.Write([]byte("x"), 0); e != syscall.EIO {
		t.Errorf("write after the lock was lost: %v, want EIO", e)
	}
	if e := h3.Setlk(ctx, Lock{Owner: 1, Type: syscall.F_UNLCK, End: MaxLockOffset}, false); e != 0 {
		t.Errorf("unlock after the lock was lost: %v", e)
	}
	if ev := f.events.last(); ev.Reason != acl.ReasonLockLost || ev.Path != "/f" {
		t.Errorf("recorded %+v, want the lost lock's refusal", ev)
	}
	if f.events.count(acl.OpRead.String()) != denied+1 {
		t.Errorf("the refused read was not recorded once")
	}
}
