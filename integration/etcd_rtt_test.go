package integration

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// TestEtcdRoundTrips counts the etcd requests (shedfs_etcd_requests_total)
// that file operations cost a view on an etcd store, per file, background
// work they cause included (checksum records; the audit trail is off, as
// its batches come at the recorder's pace), and holds them to a budget: on etcd every write request is a raft round with a WAL
// fsync on a quorum, so round trips are what an operation costs. Before
// this test a create, write and close cost 19.5 requests, a truncate 10.6;
// before open marks lingered after the last release, 5.15 and 4, and a
// read of a file 2.
func TestEtcdRoundTrips(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdStore(t, c)
	s.cli(t, "user", "add", "alice")
	s.cli(t, "quota", "set", "user:alice", "--bytes", "1GiB")
	addr := freeAddr(t)
	v := s.mount(t, "alice", "--metrics", addr, "--no-audit")
	waitMetrics(t, addr)
	sc := &etcdScraper{addr: addr}
	mustMkdir(t, v.Path("d"), 0o755)
	// Warm up: the inode-number lease, the first reservation, the cache
	// of the directory.
	mustWrite(t, v.Path("d", "warm"), make([]byte, 4096), 0o644)

	const n = 20
	data := make([]byte, 4096)
	// Each phase: what it does to file i, and its budget of requests per
	// file, all kinds together.
	phases := []struct {
		name   string
		budget float64
		do     func(p string) error
	}{
		// LOOKUP of the new name (a Range), CREATE (a Txn: record,
		// entry, usage, open marker), the first write (nothing: the
		// quota reservation has room), FLUSH (a Txn: size, content
		// pending), RELEASE (nothing: the open marker lingers,
		// fusefs/marks.go); then in the background the checksum
		// record (a Txn). Once per phase, not per file: the quota
		// reservation taken at the first write and given back a
		// second after the last (3 requests, 0.15 a file), and a
		// stray read (a retried lookup).
		{"create+write+close", 4.25, func(p string) error { return os.WriteFile(p, data, 0o644) }},
		{"stat", 0, func(p string) error { _, err := os.Stat(p); return err }},
		// The open marker left by the create still stands: an open
		// for reading and its release ask etcd nothing (they put it
		// and took it back, two writes, before the marks lingered).
		{"read", 0, func(p string) error { _, err := os.ReadFile(p); return err }},
		{"chmod", 1, func(p string) error { return os.Chmod(p, 0o600) }},
		// The file is opened for the truncate (its marker lingers);
		// the size's Txn; the checksum.
		{"truncate", 2, func(p string) error { return os.Truncate(p, 100) }},
		// The unlink's Txn deletes this daemon's lingering marker
		// with the inode.
		{"unlink", 1, func(p string) error { return os.Remove(p) }},
	}
	var report []string
	before, at := sc.settled(t)
	for _, ph := range phases {
		for i := range n {
			if err := ph.do(v.Path("d", fmt.Sprintf("f%02d", i))); err != nil {
				t.Fatalf("%s f%02d: %v", ph.name, i, err)
			}
		}
		after, upto := sc.settled(t)
		kinds := map[string]float64{}
		for _, m := range after["shedfs_etcd_requests_total"].GetMetric() {
			kind := m.GetLabel()[0].GetValue()
			d := m.GetCounter().GetValue() - before.value(t, "shedfs_etcd_requests_total", "kind="+kind)
			if d > 0 && !strings.HasPrefix(kind, "Lease") {
				kinds[kind] = d / n
			}
		}
		// The scrapes' own reads, all Range.
		kinds["Range"] -= float64(upto-at) * sc.perScrape / n
		total := 0.0
		for _, d := range kinds {
			total += d
		}
		var parts []string
		for k, d := range kinds {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, d))
		}
		sort.Strings(parts)
		report = append(report, fmt.Sprintf("%s: %.2f per file (%s)", ph.name, total, strings.Join(parts, ", ")))
		// A little slack: a commit that met a concurrent one (the
		// checksum's) runs again.
		if total > ph.budget+0.25 {
			t.Errorf("%s: %.2f etcd requests per file (%s), want at most %v", ph.name, total, strings.Join(parts, ", "), ph.budget)
		}
		before, at = after, upto
	}
	t.Log("etcd requests per file:\n" + strings.Join(report, "\n"))
}

// etcdScraper scrapes a daemon's metrics and counts its scrapes: each
// costs the daemon a few etcd reads of its own (the quota gauges), which
// a phase's count must leave out.
type etcdScraper struct {
	addr    string
	scrapes int
	// perScrape is what one scrape costs in etcd requests.
	perScrape float64
}

func (s *etcdScraper) scrape(t *testing.T) families {
	s.scrapes++
	return scrape(t, s.addr)
}

// total is the etcd requests f counts, leases left out (their keep-alive
// runs on its own clock).
func etcdTotal(f families) float64 {
	sum := 0.0
	for _, m := range f["shedfs_etcd_requests_total"].GetMetric() {
		if !strings.HasPrefix(m.GetLabel()[0].GetValue(), "Lease") {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// settled scrapes once the daemon's requests have gone quiet: two
// intervals of 1.5 s (longer than quota.AllotIdle) that each grew by the
// same count, which is then what one scrape costs. A phase is so charged
// with the work it caused in the background too: audit batches,
// checksums, the reservation given back.
func (s *etcdScraper) settled(t *testing.T) (families, int) {
	t.Helper()
	prev := s.scrape(t)
	lastDelta := -1.0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		time.Sleep(1500 * time.Millisecond)
		f := s.scrape(t)
		d := etcdTotal(f) - etcdTotal(prev)
		if d == lastDelta {
			s.perScrape = d
			return f, s.scrapes
		}
		lastDelta, prev = d, f
	}
	t.Fatal("the daemon's etcd requests did not settle in 60 s")
	return nil, 0
}

// waitMetrics waits until the metrics endpoint at addr answers.
func waitMetrics(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(mountTimeout)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics endpoint %s does not answer: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
