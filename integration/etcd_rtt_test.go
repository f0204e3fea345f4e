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
// that file operations cost a view on an etcd store, per file, and holds
// them to a budget: on etcd every write request is a raft round with a WAL
// fsync on a quorum, so round trips are what a create costs. The
// budgets are what a create, chmod, truncate and unlink need: one
// transaction each, plus the open marker's release at the last close of a
// file (the marker of a created file is put by its create's transaction,
// and a quota reservation is kept for the next file instead of being given
// back and taken again).
func TestEtcdRoundTrips(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdStore(t, c)
	s.cli(t, "user", "add", "alice")
	s.cli(t, "quota", "set", "user:alice", "--bytes", "1GiB")
	addr := freeAddr(t)
	v := s.mount(t, "alice", "--metrics", addr)
	waitMetrics(t, addr)
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
		// CREATE (one Txn: the record, the entry, the usage, the open
		// marker), FLUSH (one Txn: the size), RELEASE (one Txn: the
		// marker goes, the record is read).
		{"create+write+close", 3, func(p string) error { return os.WriteFile(p, data, 0o644) }},
		{"stat", 0, func(p string) error { _, err := os.Stat(p); return err }},
		{"chmod", 1, func(p string) error { return os.Chmod(p, 0o600) }},
		{"truncate", 1, func(p string) error { return os.Truncate(p, 100) }},
		{"unlink", 1, func(p string) error { return os.Remove(p) }},
	}
	var report []string
	for _, ph := range phases {
		before := scrape(t, addr)
		for i := range n {
			if err := ph.do(v.Path("d", fmt.Sprintf("f%02d", i))); err != nil {
				t.Fatalf("%s f%02d: %v", ph.name, i, err)
			}
		}
		after := scrape(t, addr)
		kinds := map[string]float64{}
		total := 0.0
		for _, m := range after["shedfs_etcd_requests_total"].GetMetric() {
			kind := m.GetLabel()[0].GetValue()
			d := m.GetCounter().GetValue() - before.value(t, "shedfs_etcd_requests_total", "kind="+kind)
			if d > 0 && !strings.HasPrefix(kind, "Lease") {
				kinds[kind] = d / n
				total += d / n
			}
		}
		var parts []string
		for k, d := range kinds {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, d))
		}
		sort.Strings(parts)
		report = append(report, fmt.Sprintf("%s: %.2f per file (%s)", ph.name, total, strings.Join(parts, ", ")))
		// A little slack for the audit recorder's batches and the
		// inode-number lease, which come now and then.
		if total > ph.budget+0.25 {
			t.Errorf("%s: %.2f etcd requests per file (%s), want at most %v", ph.name, total, strings.Join(parts, ", "), ph.budget)
		}
	}
	t.Log("etcd requests per file:\n" + strings.Join(report, "\n"))
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
