//go:build linux

package fuseuring

import (
	"runtime"
	"testing"
)

// TestRingNop sets up a 128-byte-SQE ring and completes NOPs through it:
// the ring mapping, SQE publication and CQE reaping.
func TestRingNop(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := newRing(4, 0)
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	defer r.close()
	for round := range 3 {
		for i := range 4 {
			sqe := r.getSQE()
			if sqe == nil {
				t.Fatalf("round %d: SQ full at %d", round, i)
			}
			sqe[0] = opNop
			putU64(sqe[32:], uint64(round*10+i))
		}
		if r.getSQE() != nil {
			t.Fatal("a fifth SQE in a ring of 4")
		}
		seen := map[uint64]bool{}
		for len(seen) < 4 {
			if err := r.enter(true); err != nil {
				t.Fatal(err)
			}
			r.reap(func(c cqe) {
				if c.res != 0 {
					t.Errorf("nop: %d", c.res)
				}
				seen[c.userData] = true
			})
		}
		for i := range 4 {
			if !seen[uint64(round*10+i)] {
				t.Errorf("round %d: no completion for %d", round, i)
			}
		}
	}
}

// TestGoFuseLayout: the go-fuse in go.mod has the layout attach reads (a
// go-fuse upgrade that changes it fails here, not at a mount).
func TestGoFuseLayout(t *testing.T) {
	if err := checkLayout(); err != nil {
		t.Fatal(err)
	}
}
