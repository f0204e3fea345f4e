package audit

import (
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

func openStore(t *testing.T, dir string) *metadata.Store {
	t.Helper()
	s, err := metadata.Open(dir, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newStore(t *testing.T) *metadata.Store {
	t.Helper()
	s := openStore(t, filepath.Join(t.TempDir(), "meta"))
	t.Cleanup(func() { s.Close() })
	return s
}

func records(t *testing.T, s *metadata.Store, f metadata.AuditFilter) []metadata.AuditRecord {
	t.Helper()
	var out []metadata.AuditRecord
	if err := s.QueryAudit(f, func(r metadata.AuditRecord) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

var alicePrivate = shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: "alice"}

func write(user, path string) shedfs.Event {
	return shedfs.Event{Time: time.Now(), User: user, Zone: alicePrivate, Path: path, Op: "write", Bytes: 10}
}

func TestDeniedEventHasItsRule(t *testing.T) {
	s := newStore(t)
	r := New(s, Options{})
	r.Record(write("alice", "/notes.txt"))
	r.Record(shedfs.Event{
		Time: time.Now(), User: "alice",
		Zone: shedfs.Zone{Kind: shedfs.ZoneUploads, Principal: "alice"},
		Path: "/uploads/report.pdf", Op: "write",
		Errno: syscall.EACCES, Reason: "uploads-read-only",
	})
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	got := records(t, s, metadata.AuditFilter{Denied: true})
	if len(got) != 1 {
		t.Fatalf("denied records: %+v", got)
	}
	d := got[0]
	if d.User != "alice" || d.View != "alice" || d.Zone != "uploads:alice" || d.Path != "/uploads/report.pdf" ||
		d.Op != "write" || d.Result != "EACCES" || d.Rule != "uploads-read-only" {
		t.Fatalf("denial stored as %+v", d)
	}
	ok := records(t, s, metadata.AuditFilter{Op: "write", User: "alice"})
	if len(ok) != 2 || ok[0].Result != "ok" || ok[0].Bytes != 10 || ok[0].Zone != "private:alice" {
		t.Fatalf("records: %+v", ok)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Recorded() != 2 || r.Written() != 2 || r.Dropped() != 0 || r.QueueLen() != 0 {
		t.Fatalf("counters: recorded %d written %d dropped %d queue %d", r.Recorded(), r.Written(), r.Dropped(), r.QueueLen())
	}
}

func TestRecordsSurviveReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	s := openStore(t, dir)
	r := New(s, Options{})
	for range 10 {
		r.Record(write("alice", "/f"))
	}
	// Close flushes without an explicit Flush.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r.Record(write("alice", "/after-close")) // counted, never a panic
	if r.Dropped() != 1 {
		t.Fatalf("record after close: dropped %d", r.Dropped())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	if n, err := s.AuditCount(); err != nil || n != 10 {
		t.Fatalf("after reopen: %d records, %v", n, err)
	}
}

func TestRetentionDropsOldRecords(t *testing.T) {
	s := newStore(t)
	old := time.Now().Add(-48 * time.Hour)
	var recs []metadata.AuditRecord
	for range 50 {
		recs = append(recs, metadata.AuditRecord{Time: old, User: "alice", Op: "write", Result: "ok"})
	}
	if err := s.AppendAudit(recs); err != nil {
		t.Fatal(err)
	}
	r := New(s, Options{RetentionInterval: 20 * time.Millisecond, MaxAge: 24 * time.Hour, MaxRecords: 5})
	defer r.Close()
	for range 8 {
		r.Record(write("alice", "/new"))
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := s.AuditCount()
		if err != nil {
			t.Fatal(err)
		}
		// The recorder counts what it pruned after the store's
		// transaction commits, so wait for both.
		if n == 5 && r.Pruned() == 53 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention left %d records (want 5), pruned %d (want 53)", n, r.Pruned())
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := records(t, s, metadata.AuditFilter{})
	for _, g := range got {
		if g.Path != "/new" {
			t.Fatalf("an old record survived: %+v", g)
		}
	}
	if r.Pruned() != 53 {
		t.Fatalf("Pruned() = %d, want 53", r.Pruned())
	}
}

// burst records n events from several goroutines, as concurrent callbacks
// would.
func burst(r *Recorder, n int) time.Duration {
	const workers = 8
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				r.Record(write("alice", "/burst"))
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// overflowCount sums what the trail says it misses.
func overflowCount(t *testing.T, s *metadata.Store) uint64 {
	var n uint64
	for _, rec := range records(t, s, metadata.AuditFilter{Op: metadata.OpAuditOverflow}) {
		n += rec.Dropped
	}
	return n
}

func TestBurstLosesNothingWithRoom(t *testing.T) {
	const n = 100_000
	s := newStore(t)
	r := New(s, Options{QueueSize: n})
	burst(r, n)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Recorded() != n || r.Dropped() != 0 || r.Written() != n {
		t.Fatalf("recorded %d dropped %d written %d", r.Recorded(), r.Dropped(), r.Written())
	}
	if c, _ := s.AuditCount(); c != n {
		t.Fatalf("trail has %d records, want %d", c, n)
	}
	if o := overflowCount(t, s); o != 0 {
		t.Fatalf("overflow records claim %d lost", o)
	}
}

func TestBurstCountsExactlyWhatOverflowed(t *testing.T) {
	const n = 100_000
	s := newStore(t)
	// A disk slower than the burst (1 ms a batch), so the queue must
	// overflow however fast this machine is.
	r := newRecorder(s, Options{QueueSize: 512, BatchSize: 256}, func(recs []metadata.AuditRecord) error {
		time.Sleep(time.Millisecond)
		return s.AppendAudit(recs)
	})
	burst(r, n)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Recorded()+r.Dropped() != n {
		t.Fatalf("recorded %d + dropped %d != %d", r.Recorded(), r.Dropped(), n)
	}
	if r.Dropped() == 0 {
		t.Fatalf("a 512-slot queue took a burst of %d without overflow; test proves nothing", n)
	}
	events := len(records(t, s, metadata.AuditFilter{Op: "write"}))
	lost := overflowCount(t, s)
	if uint64(events) != r.Recorded() || lost != r.Dropped() || uint64(events)+lost != n {
		t.Fatalf("trail: %d events + %d reported lost, recorder: %d recorded, %d dropped", events, lost, r.Recorded(), r.Dropped())
	}
	t.Logf("burst of %d: %d stored, %d dropped and reported", n, events, lost)
}

func TestRecordNeverBlocks(t *testing.T) {
	const n = 100_000
	s := newStore(t)
	release := make(chan struct{})
	stalled := make(chan struct{}, 1)
	r := newRecorder(s, Options{QueueSize: 1000, BatchSize: 10}, func(recs []metadata.AuditRecord) error {
		select {
		case stalled <- struct{}{}:
		default:
		}
		<-release // the disk hangs
		return s.AppendAudit(recs)
	})
	r.Record(write("alice", "/first"))
	select {
	case <-stalled:
	case <-time.After(5 * time.Second):
		t.Fatal("writer never started a batch")
	}
	took := burst(r, n)
	if took > 2*time.Second {
		t.Fatalf("%d Record calls took %v with the writer stalled", n, took)
	}
	t.Logf("%d Record calls with a stalled writer: %v (%v each)", n, took, took/n)
	if q := r.QueueLen(); q != 1000 {
		t.Fatalf("queue holds %d, want it full (1000)", q)
	}
	close(release)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Recorded()+r.Dropped() != n+1 || r.Dropped() < n-1000 {
		t.Fatalf("recorded %d dropped %d", r.Recorded(), r.Dropped())
	}
	if lost := overflowCount(t, s); lost != r.Dropped() {
		t.Fatalf("trail reports %d lost, recorder dropped %d", lost, r.Dropped())
	}
}

func TestResultNames(t *testing.T) {
	for errno, want := range map[syscall.Errno]string{
		0: "ok", syscall.EACCES: "EACCES", syscall.EPERM: "EPERM", syscall.EXDEV: "EXDEV",
		syscall.EDQUOT: "EDQUOT", syscall.Errno(4000): "errno 4000",
	} {
		if got := Result(errno); got != want {
			t.Errorf("Result(%d) = %q, want %q", int(errno), got, want)
		}
	}
}

// TestShortDiskWritesNothing: while the store's disk is down to what the
// metadata needs, batches are counted as failed instead of written; once
// there is room again, writing resumes.
func TestShortDiskWritesNothing(t *testing.T) {
	s := newStore(t)
	var mu sync.Mutex
	short := true
	r := New(s, Options{Short: func() bool { mu.Lock(); defer mu.Unlock(); return short }})
	for range 10 {
		r.Record(write("alice", "/full"))
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := records(t, s, metadata.AuditFilter{}); len(got) != 0 || r.Failed() != 10 || r.Written() != 0 {
		t.Fatalf("short disk: %d records stored, failed %d, written %d", len(got), r.Failed(), r.Written())
	}
	mu.Lock()
	short = false
	mu.Unlock()
	r.Record(write("alice", "/room"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := records(t, s, metadata.AuditFilter{}); len(got) != 1 || got[0].Path != "/room" || r.Written() != 1 {
		t.Fatalf("with room: %+v, written %d", got, r.Written())
	}
}

// TestRefusedRecordsWrittenLater: while the store refuses records (a
// shared store whose lease is gone refuses every write), they are kept
// and written once it takes them again, in order; none is lost.
func TestRefusedRecordsWrittenLater(t *testing.T) {
	s := newStore(t)
	var mu sync.Mutex
	refuse := true
	tried := make(chan struct{}, 1)
	r := newRecorder(s, Options{BatchSize: 3, FlushInterval: 5 * time.Millisecond}, func(recs []metadata.AuditRecord) error {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			select {
			case tried <- struct{}{}:
			default:
			}
			return syscall.EIO // "lease not found": etcdErr's EIO
		}
		return s.AppendAudit(recs)
	})
	for i := range 10 {
		r.Record(write("alice", "/f"+string(rune('a'+i))))
	}
	<-tried
	if err := r.Flush(); err == nil {
		t.Fatal("Flush reported no error while the store refused records")
	}
	r.Record(write("alice", "/late"))
	mu.Lock()
	refuse = false
	mu.Unlock()
	if err := r.Flush(); err != nil {
		t.Fatalf("Flush once the store takes records again: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	got := records(t, s, metadata.AuditFilter{Oldest: true})
	if len(got) != 11 || r.Failed() != 0 || r.Written() != 11 {
		t.Fatalf("%d records stored, failed %d, written %d; want 11, 0, 11", len(got), r.Failed(), r.Written())
	}
	for i, rec := range got[:10] {
		if want := "/f" + string(rune('a'+i)); rec.Path != want {
			t.Fatalf("record %d is %s, want %s (order kept)", i, rec.Path, want)
		}
	}
}

// TestRefusedRecordsBounded: what the store refuses is kept up to
// QueueSize records; older ones are counted in Failed, and Close counts
// what is still refused.
func TestRefusedRecordsBounded(t *testing.T) {
	s := newStore(t)
	r := newRecorder(s, Options{QueueSize: 4, BatchSize: 2, FlushInterval: time.Hour}, func([]metadata.AuditRecord) error {
		return syscall.EIO
	})
	for i := range 10 {
		r.Record(write("alice", "/f"))
		if i%2 == 1 {
			_ = r.Flush()
		}
	}
	if got := r.Failed(); got != 6 {
		t.Fatalf("failed %d before Close, want 6 (10 refused, 4 kept)", got)
	}
	if err := r.Close(); err == nil {
		t.Fatal("Close reported no error with records refused")
	}
	if got := r.Failed(); got != 10 || r.Written() != 0 {
		t.Fatalf("failed %d written %d after Close, want 10, 0", got, r.Written())
	}
}
