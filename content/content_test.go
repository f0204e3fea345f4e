package content

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/scan"
)

type fixture struct {
	st    *metadata.Store
	blobs *blobs.Dir
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := metadata.Open(filepath.Join(dir, "meta"), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := blobs.OpenDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{st: st, blobs: b}
}

// write makes a file in share with data, persisted as a view would,
// with its pending mark.
func (f *fixture) write(t *testing.T, name string, data []byte) uint64 {
	t.Helper()
	n, err := f.st.Create(f.st.ShareRoot(), name, &shedfs.Inode{Mode: syscall.S_IFREG | 0o644}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.blobs.Path(n.Ino), data, 0o600); err != nil {
		os.MkdirAll(filepath.Dir(f.blobs.Path(n.Ino)), 0o700)
		if err := os.WriteFile(f.blobs.Path(n.Ino), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.st.UpdateWritten(n.Ino, "alice", func(r *shedfs.Inode) error { r.Size = uint64(len(data)); return nil }, nil); err != nil {
		t.Fatal(err)
	}
	return n.Ino
}

func waitState(t *testing.T, s *Service, ino uint64, want shedfs.ScanState) shedfs.Content {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := s.store.Content(ino)
		if err == nil && c.State == want {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("inode %d: %+v, %v; want %v", ino, c, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestQueueDigestsAndRecordsClose: a queued file gets its digest and the
// unscanned state without a scanner, and the close callback sees it.
func TestQueueDigestsAndRecordsClose(t *testing.T) {
	f := newFixture(t)
	s := New(f.st, f.blobs, Options{})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ino := f.write(t, "a", []byte("hello\n"))
	got := make(chan shedfs.Content, 1)
	s.Changed(ino, func(c shedfs.Content) { got <- c })
	select {
	case c := <-got:
		const want = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
		if c.SHA256 != want || c.State != shedfs.ScanUnscanned {
			t.Fatalf("close recorded with %+v, want digest %s unscanned", c, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the close callback never ran")
	}
	waitState(t, s, ino, shedfs.ScanUnscanned)
}

// TestQueueCoalescesAndOverflows: repeated closes of one file are one
// entry, and a full queue leaves the rest in the store, from where the
// worker takes them once it drains.
func TestQueueCoalescesAndOverflows(t *testing.T) {
	f := newFixture(t)
	s := New(f.st, f.blobs, Options{QueueSize: 2})
	var inos []uint64
	for _, name := range []string{"a", "b", "c", "d"} {
		inos = append(inos, f.write(t, name, []byte(name)))
	}
	var mu sync.Mutex
	early := 0
	for range 3 {
		s.Changed(inos[0], func(c shedfs.Content) {
			if c.State == shedfs.ScanPending {
				mu.Lock()
				early++
				mu.Unlock()
			}
		})
	}
	for _, ino := range inos[1:] {
		s.Changed(ino, nil)
	}
	s.mu.Lock()
	n := len(s.queue)
	s.mu.Unlock()
	if n != 2 {
		t.Fatalf("queue holds %d, want 2 (bounded, coalesced)", n)
	}
	mu.Lock()
	if early != 2 {
		t.Errorf("%d superseded closes recorded at once, want 2", early)
	}
	mu.Unlock()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, ino := range inos {
		waitState(t, s, ino, shedfs.ScanUnscanned)
	}
}

// TestResumeAfterRestart: marks left by an earlier run are taken up at
// start, with nothing queued in memory.
func TestResumeAfterRestart(t *testing.T) {
	f := newFixture(t)
	ino := f.write(t, "left", []byte("left over"))
	s := New(f.st, f.blobs, Options{})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := waitState(t, s, ino, shedfs.ScanUnscanned)
	if c.SHA256 == "" {
		t.Fatal("no digest")
	}
}

// TestAdmitWaitsForPending: with a scanner that never answers, another
// user's open waits the configured time and is refused as scan_pending;
// the writer opens at once.
func TestAdmitWaitsForPending(t *testing.T) {
	f := newFixture(t)
	s := New(f.st, f.blobs, Options{Scanner: stuck{}, Wait: 200 * time.Millisecond})
	ino := f.write(t, "p", []byte("x"))
	share := shedfs.Zone{Kind: shedfs.ZoneShare}
	if _, d := s.Admit(context.Background(), "alice", ino, share); !d.Allowed() {
		t.Fatalf("writer refused: %+v", d)
	}
	start := time.Now()
	_, d := s.Admit(context.Background(), "bob", ino, share)
	if d.Errno != syscall.EAGAIN || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("bob: %+v after %v, want EAGAIN after the wait", d, time.Since(start))
	}
	// A zone not scanned is never pending.
	s.opts.ScanZone, _ = ParseZones("group")
	if _, d := s.Admit(context.Background(), "bob", ino, share); !d.Allowed() {
		t.Fatalf("unscanned zone: %+v", d)
	}
}

// stuck is a scanner that never gets a verdict (Admit only reads states:
// the worker is not started).
type stuck struct{}

func (stuck) Scan(ctx context.Context, r io.Reader) (scan.Verdict, error) {
	<-ctx.Done()
	return scan.Verdict{}, ctx.Err()
}

func TestParseZones(t *testing.T) {
	for _, tc := range []struct {
		flag string
		zone shedfs.Zone
		want bool
		err  bool
	}{
		{"all", shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: "a"}, true, false},
		{"share,group", shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: "t"}, true, false},
		{"share,group", shedfs.Zone{Kind: shedfs.ZoneOutput, Principal: "a"}, false, false},
		{"group:t", shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: "t"}, true, false},
		{"group:t", shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: "u"}, false, false},
		{"shared", shedfs.Zone{}, false, true},
	} {
		fn, err := ParseZones(tc.flag)
		if (err != nil) != tc.err {
			t.Errorf("ParseZones(%q): %v", tc.flag, err)
			continue
		}
		if err == nil && (fn == nil || fn(tc.zone)) != tc.want {
			t.Errorf("ParseZones(%q)(%v) != %v", tc.flag, tc.zone, tc.want)
		}
	}
}

// TestForLink: a link never serves a pending file, even its writer's,
// and gets the digest as its ETag once the file is verified.
func TestForLink(t *testing.T) {
	f := newFixture(t)
	s := New(f.st, f.blobs, Options{Scanner: stuck{}, Wait: 50 * time.Millisecond})
	ino := f.write(t, "l", []byte("hello\n"))
	share := shedfs.Zone{Kind: shedfs.ZoneShare}
	if _, _, d := s.ForLink(context.Background(), ino, share); d.Reason != "scan_pending" {
		t.Fatalf("pending file: %+v", d)
	}
	gen, _ := f.st.PendingGen(ino)
	if _, err := f.st.SetVerdict(ino, gen, shedfs.Content{SHA256: "ab", State: shedfs.ScanClean}); err != nil {
		t.Fatal(err)
	}
	if etag, _, d := s.ForLink(context.Background(), ino, share); !d.Allowed() || etag != "ab" {
		t.Fatalf("clean file: etag %q, %+v", etag, d)
	}
	if _, err := f.st.SetVerdict(ino, 0, shedfs.Content{SHA256: "ab", State: shedfs.ScanInfected, Detail: "X"}); err != nil {
		t.Fatal(err)
	}
	if _, c, d := s.ForLink(context.Background(), ino, share); d.Errno != syscall.EACCES || c.Detail != "X" {
		t.Fatalf("infected file: %+v %+v", c, d)
	}
}

// TestExamineOverMaxSize: a file over the scan limit is not sent to the
// scanner; it is hashed and unscanned.
func TestExamineOverMaxSize(t *testing.T) {
	f := newFixture(t)
	s := New(f.st, f.blobs, Options{Scanner: stuck{}, MaxSize: 4})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := s.Examine(ctx, strings.NewReader("hello\n"), 6, shedfs.Zone{Kind: shedfs.ZoneShare})
	if err != nil || c.State != shedfs.ScanUnscanned || c.SHA256 != "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" {
		t.Fatalf("%+v, %v", c, err)
	}
}
