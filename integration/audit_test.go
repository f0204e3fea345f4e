package integration

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests read the audit trail with `shedfs audit` as an operator
// would, through the running daemon and from the store directly.

// trailRecord is a record of `shedfs audit --json`.
type trailRecord struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	User    string    `json:"user"`
	Zone    string    `json:"zone"`
	Path    string    `json:"path"`
	Op      string    `json:"op"`
	Result  string    `json:"result"`
	Rule    string    `json:"rule"`
	Dropped uint64    `json:"dropped"`
	SHA256  string    `json:"sha256"`
	Scan    string    `json:"scan"`
}

// trailRecords runs `shedfs audit --json` on store with args and parses
// its JSON lines.
func trailRecords(t testing.TB, store string, args ...string) []trailRecord {
	t.Helper()
	out, errOut, code := runCLI(t, append([]string{"audit", "--json", "--store", store}, args...)...)
	if code != 0 {
		t.Fatalf("shedfs audit --json %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	var recs []trailRecord
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r trailRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("shedfs audit --json: line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// waitTrail polls the trail until cond holds on the records (the recorder
// writes in batches, a tenth of a second apart), failing after timeout.
func waitTrail(t testing.TB, store string, timeout time.Duration, what string, cond func([]trailRecord) bool, args ...string) []trailRecord {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		recs := trailRecords(t, store, args...)
		if cond(recs) {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit trail: %s not seen within %v; records %+v", what, timeout, recs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// isGroupsDenial is the record of the refused create of /groups/x.
func isGroupsDenial(r trailRecord) bool {
	return r.User == "alice" && r.Path == "/groups/x" && r.Op == "create" && r.Result == "EACCES" && r.Rule == "groups_readonly"
}

// TestAuditDenialSurvivesRestart checks that a denied write shows in
// `shedfs audit --denied` with its rule and path, through the daemon, and
// is still there read from the store directly and after a restart.
func TestAuditDenialSurvivesRestart(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice")
	mustWrite(t, v.Path("ok"), []byte("fine"), 0o644)
	if err := os.WriteFile(v.Path("groups", "x"), []byte("no"), 0o644); !errors.Is(err, unix.EACCES) {
		t.Fatalf("create in groups/: %v, want EACCES", err)
	}
	one := func(recs []trailRecord) bool { return len(recs) == 1 && isGroupsDenial(recs[0]) }
	waitTrail(t, store, 3*time.Second, "the denial of /groups/x alone under --denied", one, "--denied")
	v.Stop()

	// From the store, with no daemon: the same record, and the create.
	if recs := trailRecords(t, store, "--denied"); !one(recs) {
		t.Errorf("audit --denied without a daemon: %+v, want the groups_readonly denial", recs)
	}
	if recs := trailRecords(t, store, "--op", "create"); len(recs) != 2 {
		t.Errorf("audit --op create without a daemon: %+v, want the create of /ok and the refused /groups/x", recs)
	}

	// Through a new daemon.
	v = startView(t, store, "alice")
	if recs := trailRecords(t, store, "--denied"); !one(recs) {
		t.Errorf("audit --denied after a restart: %+v, want the groups_readonly denial", recs)
	}
	out, _, code := runCLI(t, "audit", "--denied", "--store", store)
	if code != 0 || !strings.Contains(out, "groups_readonly") || !strings.Contains(out, "/groups/x") {
		t.Errorf("audit --denied (table): exit %d, want the rule and the path:\n%s", code, out)
	}
	v.Stop()
}

// TestAuditRetention keeps at most 10 records: after 30 changes, the next
// retention pass (every minute; there is no flag to make it sooner) leaves
// the 10 newest.
func TestAuditRetention(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice", "--audit-max-records", "10", "--audit-retention-interval", "500ms")
	for i := range 30 {
		mustWrite(t, v.Path(fmt.Sprintf("f%02d", i)), nil, 0o644)
	}
	// 30 records are written; retention (which may already run while they
	// are) leaves the 10 newest. Waiting for the last one to be there
	// keeps a prune that ran before all were written from passing.
	recs := waitTrail(t, store, 10*time.Second, "retention down to the 10 newest records",
		func(r []trailRecord) bool { return len(r) > 0 && len(r) <= 10 && r[len(r)-1].Path == "/f29" })
	if len(recs) != 10 || recs[0].Path != "/f20" || recs[9].Path != "/f29" {
		t.Errorf("after retention: %d records from %q to %q, want the 10 newest (/f20 to /f29)", len(recs), recs[0].Path, recs[len(recs)-1].Path)
	}
	v.Stop()
}

// TestAuditOverflowCounted floods a view whose audit queue has 4 slots
// with 20,000 operations (10,000 creates and their unlinks) from eight
// writers: whatever the queue could not take is counted in
// shedfs_audit_dropped_total and reported in the trail by audit_overflow
// records, and everything else is stored. (With 64 slots nothing
// overflows here: the writer empties the queue into its batch at once and
// only stops taking events while a batch is stored, for a millisecond or
// two every 100 ms; 4 slots overflow in every such pause.)
//
// The identities (audit/audit.go): every event handed to the recorder ends
// in exactly one of shedfs_audit_events_total (queued) and
// shedfs_audit_dropped_total; every queued event ends in exactly one of
// shedfs_audit_written_total and shedfs_audit_write_failures_total; the
// overflow records are not counted as written, and their dropped fields
// sum to shedfs_audit_dropped_total.
func TestAuditOverflowCounted(t *testing.T) {
	t.Parallel()
	const files, writers = 10000, 8
	store := newStore(t)
	v, addr := startObservedView(t, store, "--audit-queue", "4")
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < files; i += writers {
				p := v.Path(fmt.Sprintf("f%d", i))
				f, err := os.Create(p)
				if err == nil {
					err = f.Close()
				}
				if err == nil {
					err = os.Remove(p)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create/unlink: %v", err)
	}
	t.Logf("%d creates and unlinks in %v", files, time.Since(start).Round(time.Millisecond))

	// Wait until the queue is drained and the drops are reported.
	start = time.Now()
	var fams families
	var recs []trailRecord
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams = scrape(t, addr)
		queued := fams.value(t, "shedfs_audit_events_total")
		done := fams.value(t, "shedfs_audit_written_total") + fams.value(t, "shedfs_audit_write_failures_total")
		if fams.value(t, "shedfs_audit_queue_length") == 0 && queued == done {
			recs = trailRecords(t, store)
			var reported uint64
			for _, r := range recs {
				reported += r.Dropped
			}
			if float64(reported) == fams.value(t, "shedfs_audit_dropped_total") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit queue not drained and reported within 10s: events %v, written %v, failures %v, dropped %v, queue %v",
				queued, fams.value(t, "shedfs_audit_written_total"), fams.value(t, "shedfs_audit_write_failures_total"),
				fams.value(t, "shedfs_audit_dropped_total"), fams.value(t, "shedfs_audit_queue_length"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("drained and read the trail in %v", time.Since(start).Round(time.Millisecond))
	events := fams.value(t, "shedfs_audit_events_total")
	written := fams.value(t, "shedfs_audit_written_total")
	dropped := fams.value(t, "shedfs_audit_dropped_total")
	if f := fams.value(t, "shedfs_audit_write_failures_total"); f != 0 {
		t.Errorf("shedfs_audit_write_failures_total = %v, want 0", f)
	}
	// One event per create and one per unlink (closing an empty new file
	// writes nothing).
	if events+dropped != 2*files {
		t.Errorf("events %v + dropped %v = %v, want one per create and unlink: %d", events, dropped, events+dropped, 2*files)
	}
	if events != written {
		t.Errorf("events %v != written %v", events, written)
	}
	if dropped == 0 {
		// Whether a burst overflows depends on how fast the writer
		// drains on this machine; either way nothing may go uncounted.
		// The overflow path itself is proven with a stalled writer in
		// the audit package's tests (TestBurstCountsExactlyWhatOverflowed).
		t.Logf("no event dropped with a 4-slot queue and %d writers: the writer kept up", writers)
	}
	var stored, overflows int
	var reported uint64
	for _, r := range recs {
		if r.Op == "audit_overflow" {
			overflows++
			reported += r.Dropped
			if r.Result != "dropped" || r.Dropped == 0 {
				t.Errorf("overflow record %+v: want result dropped and a count", r)
			}
			continue
		}
		stored++
	}
	if float64(stored) != written {
		t.Errorf("trail holds %d event records, shedfs_audit_written_total says %v", stored, written)
	}
	if float64(reported) != dropped {
		t.Errorf("audit_overflow records report %d dropped events, shedfs_audit_dropped_total says %v", reported, dropped)
	}
	t.Logf("events %v = written %v; dropped %v, reported by %d audit_overflow records", events, written, dropped, overflows)
	v.Stop()
}
