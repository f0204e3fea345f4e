package fusefs

import (
	"sync"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs/metadata"
)

// TestAccountantPending checks that pending charges of many writers add
// up exactly per holder, and that the holder lock serializes decisions.
func TestAccountantPending(t *testing.T) {
	a := newAccountant()
	h, other := metadata.Holder("group:g"), metadata.Holder("user:u")
	var wg sync.WaitGroup
	inLock := 0
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				unlock := a.lock(h)
				inLock++
				if inLock != 1 {
					t.Error("two admissions of one holder at once")
				}
				a.add(h, 4096)
				inLock--
				unlock()
				a.add(other, 1)
			}
		}()
	}
	wg.Wait()
	if got := a.pending(h); got != 8*1000*4096 {
		t.Fatalf("pending %d", got)
	}
	if got := a.pending(other); got != 8000 {
		t.Fatalf("pending of the other holder %d", got)
	}
	a.add(h, -a.pending(h))
	if got := a.pending(h); got != 0 {
		t.Fatalf("pending after release %d", got)
	}
}

func TestLabels(t *testing.T) {
	for _, c := range []struct {
		e    syscall.Errno
		want string
	}{{0, "ok"}, {syscall.EACCES, "EACCES"}, {syscall.EDQUOT, "EDQUOT"}, {syscall.Errno(4095), "errno"}} {
		if got := resultLabel(c.e); got != c.want {
			t.Errorf("resultLabel(%d) = %q, want %q", c.e, got, c.want)
		}
	}
	if got := zoneLabel(metadata.Zone{Kind: metadata.ZoneGroup, Principal: "team"}); got != "group" {
		t.Errorf("zone label %q: principals must not become label values", got)
	}
	if got := zoneLabel(metadata.Zone{}); got != "none" {
		t.Errorf("zone label of no zone %q", got)
	}
}
