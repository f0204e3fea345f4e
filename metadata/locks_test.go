package metadata

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

// TestEtcdLocks: a daemon's lock records are seen by the other, which the
// admit function may refuse; a record changed between the other's read
// and its commit makes it read again; the watch tells the other daemon;
// records go with the daemon's lease. An embedded store keeps nothing.
func TestEtcdLocks(t *testing.T) {
	a, b := openPair(t)
	changed := make(chan uint64, 16)
	b.FollowLocks(func(ino uint64) { changed <- ino })
	w := LockRecord{View: 1, Owner: 7, Write: true, Start: 0, End: 99, Pid: 42, User: "alice", Path: "/f"}
	if ok, err := a.PublishLocks(5, []LockRecord{w}, func([]DaemonLocks) bool { return true }); !ok || err != nil {
		t.Fatalf("a's first lock: %v %v", ok, err)
	}
	select {
	case ino := <-changed:
		if ino != 5 {
			t.Errorf("b told of inode %d, want 5", ino)
		}
	case <-time.After(5 * time.Second):
		t.Error("b not told of a's lock")
	}
	others := must[[]DaemonLocks](t)(b.OtherLocks(5))
	if len(others) != 1 || len(others[0].Locks) != 1 || others[0].Locks[0] != w {
		t.Fatalf("b sees %+v, want a's %+v", others, w)
	}
	if mine := must[[]DaemonLocks](t)(a.OtherLocks(5)); len(mine) != 0 {
		t.Errorf("a sees its own locks as another's: %+v", mine)
	}
	// Status on b lists a's lock with a's name; a lists none of its own
	// (its table has them).
	peers := must[[]PeerLock](t)(b.PeerLocks())
	if len(peers) != 1 || peers[0].Ino != 5 || peers[0].LockRecord != w || peers[0].Daemon != a.DaemonName() {
		t.Errorf("b's PeerLocks %+v, want a's lock on inode 5 held by %q", peers, a.DaemonName())
	}
	if mine := must[[]PeerLock](t)(a.PeerLocks()); len(mine) != 0 {
		t.Errorf("a's PeerLocks lists its own: %+v", mine)
	}
	var seen []DaemonLocks
	ok, err := b.PublishLocks(5, []LockRecord{{View: 1, Owner: 7}}, func(o []DaemonLocks) bool { seen = o; return false })
	if ok || err != nil || len(seen) != 1 {
		t.Fatalf("b's refused lock: ok %v err %v, admit saw %+v", ok, err, seen)
	}
	if got := must[[]DaemonLocks](t)(a.OtherLocks(5)); len(got) != 0 {
		t.Errorf("a refused publish wrote %+v", got)
	}
	// a changes its record while b decides: b decides again on the new
	// one (a record that only went would not matter: it frees more).
	calls := 0
	w2 := w
	w2.Start = 100
	ok, err = b.PublishLocks(5, []LockRecord{{View: 2, Owner: 1, Start: 200, End: 299}}, func(o []DaemonLocks) bool {
		calls++
		if calls == 1 {
			if _, err := a.PublishLocks(5, []LockRecord{w2}, nil); err != nil {
				t.Error(err)
			}
			return true
		}
		return len(o) == 1 && o[0].Locks[0] == w2
	})
	if !ok || err != nil || calls != 2 {
		t.Fatalf("b's lock raced by a's change: ok %v err %v after %d decisions, want 2", ok, err, calls)
	}
	if _, err := a.PublishLocks(5, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := must[[]DaemonLocks](t)(b.OtherLocks(5)); len(got) != 0 {
		t.Errorf("a's unlock left %+v", got)
	}
	b.Close()
	if got := must[[]DaemonLocks](t)(a.OtherLocks(5)); len(got) != 0 {
		t.Errorf("b closed: its locks stay: %+v", got)
	}

	e := newStore(t)
	if ok, err := e.PublishLocks(5, []LockRecord{w}, nil); !ok || err != nil {
		t.Fatalf("embedded store: %v %v", ok, err)
	}
	if got := must[[]DaemonLocks](t)(e.OtherLocks(5)); len(got) != 0 {
		t.Errorf("embedded store keeps locks: %+v", got)
	}
	if got := must[[]PeerLock](t)(e.PeerLocks()); len(got) != 0 {
		t.Errorf("embedded store lists peer locks: %+v", got)
	}
}

// TestEtcdLeaseRenewed: a daemon whose lease is revoked (as if etcd had
// been out of reach past the TTL) fails its writes with EIO until the
// lease is granted again under the same id, is registered again, and is
// told (FollowLease) so that it puts back what it holds; then it writes
// again.
func TestEtcdLeaseRenewed(t *testing.T) {
	a, b := openPair(t)
	renewed := make(chan struct{}, 1)
	a.FollowLease(func() { renewed <- struct{}{} })
	f := must[*shedfs.Inode](t)(a.Create(a.ShareRoot(), "f", file(0o644), nil))
	if err := a.Hold(f.Ino); err != nil {
		t.Fatal(err)
	}
	e := a.engine().(*etcdKV)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.cli.Revoke(ctx, e.lease); err != nil {
		t.Fatal(err)
	}
	if peers := must[[]string](t)(b.Peers()); len(peers) != 0 {
		t.Errorf("a's registration outlived its lease: %v", peers)
	}
	_, err := a.Create(a.ShareRoot(), "g", file(0o644), nil)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("a create with the lease lost: %v, want EIO", err)
	}
	select {
	case <-renewed:
	case <-time.After(15 * time.Second):
		t.Fatal("a's lease not renewed")
	}
	if peers := must[[]string](t)(b.Peers()); len(peers) != 1 {
		t.Errorf("a not registered again: %v", peers)
	}
	must[*shedfs.Inode](t)(a.Create(a.ShareRoot(), "h", file(0o644), nil))
}
