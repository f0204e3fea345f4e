package metadata

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shedfs/shedfs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdOwnMarker: a daemon's own open marker, kept after its last close
// (fusefs lingers it), does not stop that daemon's own unlink or
// ReclaimIdle, which delete it with the inode; Reclaim (callers that have
// not checked the daemon's handles) still counts it, and another daemon's
// marker stops all of them. Unholds takes many markers back in one
// request and names the inodes that lost their last link.
func TestEtcdOwnMarker(t *testing.T) {
	a, b := openPair(t)
	root := a.ShareRoot()
	always := func(uint64) bool { return true }
	ea := a.engine().(*etcdKV)
	markers := func(ino uint64) int {
		t.Helper()
		ctx, cancel := ea.ctx()
		defer cancel()
		resp, err := ea.cli.Get(ctx, etcdOpenPrefix(string(ea.prefix), ino), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Kvs)
	}

	// Unlink on a of a file only a's lingering marker holds: freed, and
	// the marker is gone with it.
	f := must[*shedfs.Inode](t)(a.CreateOpen(root, "f", file(0o644), nil))
	if n, freed, err := a.UnlinkFree(root, "f", false, always); err != nil || !freed {
		t.Fatalf("unlink on a of a file only a's own marker holds: freed %v, %+v, %v", freed, n, err)
	}
	if m := markers(f.Ino); m != 0 {
		t.Fatalf("%d markers left after the unlink freed the inode", m)
	}

	// Reclaim counts the own marker, ReclaimIdle does not.
	g := must[*shedfs.Inode](t)(a.CreateOpen(root, "g", file(0o644), nil))
	if _, freed, err := a.UnlinkFree(root, "g", false, func(uint64) bool { return false }); err != nil || freed {
		t.Fatalf("unlink of a file open on a: freed %v, %v", freed, err)
	}
	if _, err := a.Reclaim(g.Ino); !errors.Is(err, ErrHeld) {
		t.Fatalf("Reclaim of an orphan a's marker holds: %v, want ErrHeld", err)
	}
	if _, err := a.ReclaimIdle(g.Ino); err != nil {
		t.Fatalf("ReclaimIdle of an orphan only a's own marker holds: %v", err)
	}
	if m := markers(g.Ino); m != 0 {
		t.Fatalf("%d markers left after ReclaimIdle", m)
	}

	// Another daemon's marker stops a's unlink from freeing and a's
	// ReclaimIdle.
	h := must[*shedfs.Inode](t)(a.CreateOpen(root, "h", file(0o644), nil))
	if err := b.Hold(h.Ino); err != nil {
		t.Fatal(err)
	}
	if _, freed, err := a.UnlinkFree(root, "h", false, always); err != nil || freed {
		t.Fatalf("unlink on a of a file b holds: freed %v, %v", freed, err)
	}
	if _, err := a.ReclaimIdle(h.Ino); !errors.Is(err, ErrHeld) {
		t.Fatalf("ReclaimIdle on a of a file b holds: %v, want ErrHeld", err)
	}

	// Unholds: a's markers of many files in few requests; the unlinked
	// one is named.
	var inos []uint64
	for i := range 2*unholdBatch + 3 {
		n := must[*shedfs.Inode](t)(a.CreateOpen(root, fmt.Sprintf("m%03d", i), file(0o644), nil))
		inos = append(inos, n.Ino)
	}
	if _, err := b.Unlink(root, "m000", false); err != nil {
		t.Fatal(err)
	}
	before := ea.requests.snapshot()["Txn"]
	orphans, err := a.Unholds(append(inos, h.Ino))
	if err != nil {
		t.Fatal(err)
	}
	if got := ea.requests.snapshot()["Txn"] - before; got != 3 {
		t.Errorf("Unholds of %d markers took %d requests, want 3", len(inos)+1, got)
	}
	if len(orphans) != 2 || orphans[0] != inos[0] || orphans[1] != h.Ino {
		t.Errorf("Unholds orphans %v, want [%d %d]", orphans, inos[0], h.Ino)
	}
	for _, ino := range inos {
		if m := markers(ino); m != 0 {
			t.Fatalf("inode %d: %d markers left after Unholds", ino, m)
		}
	}
	if orphan, err := b.Unhold(h.Ino); err != nil || !orphan {
		t.Fatalf("unhold on b: orphan %v, %v", orphan, err)
	}
}
