package vfs

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

// TestAdmitWaitsForClosingKeptFile: a growth the quota refuses while the
// kept file that would make room is still open waits for its release when
// every handle of it was flushed (a closed descriptor whose RELEASE is on
// its way), and is admitted once it comes; a kept file a descriptor still
// holds (never flushed, or written after a flush) is refused at once, and
// one whose release never comes is refused after releaseWait.
func TestAdmitWaitsForClosingKeptFile(t *testing.T) {
	cases := []struct {
		name string
		// use acts on the kept file's handle before the admission.
		use func(t *testing.T, h *Handle)
		// release is when the handle is released (0: never, until the
		// end of the case).
		release time.Duration
		want    syscall.Errno
		// slow says the refusal comes after releaseWait.
		slow bool
	}{
		{"flushed, released 200 ms later", flush, 200 * time.Millisecond, 0, false},
		{"flushed, released at once", flush, time.Millisecond, 0, false},
		{"still open, never flushed", func(*testing.T, *Handle) {}, 0, syscall.EDQUOT, false},
		{"flushed, then written again", func(t *testing.T, h *Handle) {
			flush(t, h)
			if _, _, e := h.Write([]byte("more"), 0); e != 0 {
				t.Fatalf("write: %v", e)
			}
		}, 0, syscall.EDQUOT, false},
		{"flushed, the release never comes", flush, 0, syscall.EDQUOT, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			v, err := f.core.NewView(DoorFUSE, "alice", nil, ViewOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n := f.file(t, "f", 600<<10)
			h, _, e := v.Open(context.Background(), At{Ino: n.Ino, Zone: n.Zone, Paths: paths("/f")}, syscall.O_RDWR)
			if e != 0 {
				t.Fatalf("open: %v", e)
			}
			released := make(chan struct{})
			defer func() { h.Release(); <-released }()
			tc.use(t, h)
			f.trash(t, "f")
			u, _ := f.store.Usage(alice)
			f.limit(t, shedfs.Limit{Bytes: u.Bytes + 100<<10})
			go func() {
				defer close(released)
				if tc.release > 0 {
					time.Sleep(tc.release)
					h.Release()
				}
			}()
			start := time.Now()
			adm, d, err := f.core.Admit(Growth{Holder: alice, Bytes: 500 << 10, Allot: true})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			adm.Done()
			if d.Errno != tc.want {
				t.Fatalf("500 KiB with the kept file's 600 KiB: %v after %v, want errno %v", d, took, tc.want)
			}
			if tc.want == 0 && f.trashed(t) != 0 {
				t.Error("admitted, but the kept file is still in the trash")
			}
			if slow := took >= releaseWait; slow != tc.slow {
				t.Errorf("decided in %v, want after releaseWait (%v): %v", took, releaseWait, tc.slow)
			}
			if tc.release > 0 && tc.want == 0 && took < tc.release {
				t.Errorf("admitted in %v, before the release at %v", took, tc.release)
			}
		})
	}
}

// flush closes a descriptor of h's open file description.
func flush(t *testing.T, h *Handle) {
	t.Helper()
	if e := h.Flush(); e != 0 {
		t.Fatalf("flush: %v", e)
	}
}

// TestAwaitReleaseSinceDecision: a kept file released after a refused
// growth read the release log (and so after its eviction skipped the
// file) but before the growth looks for files being closed is no longer
// open, yet counts: the growth is decided again. One released before the
// reading does not, nor does another account's.
func TestAwaitReleaseSinceDecision(t *testing.T) {
	f := newFixture(t, nil)
	v, err := f.core.NewView(DoorFUSE, "alice", nil, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := f.file(t, "f", 600<<10)
	h, _, e := v.Open(context.Background(), At{Ino: n.Ino, Zone: n.Zone, Paths: paths("/f")}, syscall.O_RDWR)
	if e != 0 {
		t.Fatalf("open: %v", e)
	}
	flush(t, h)
	f.trash(t, "f")
	since := f.core.releaseSeq()
	h.Release()
	deadline := time.Now().Add(releaseWait)
	if !f.core.awaitRelease(alice, since, deadline) {
		t.Error("a release after the reading: not seen")
	}
	if f.core.awaitRelease(shedfs.UserHolder("bob"), since, deadline) {
		t.Error("alice's release seen for bob")
	}
	start := time.Now()
	if f.core.awaitRelease(alice, f.core.releaseSeq(), deadline) {
		t.Error("a release before the reading: seen")
	}
	if took := time.Since(start); took > releaseWait/2 {
		t.Errorf("with nothing being closed, waited %v", took)
	}
}
