package integration

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
)

// These tests scrape the real /metrics endpoint of a running view before
// and after operations whose effect on the counters is known exactly, and
// check every scrape with the Prometheus text parser.

// families is one parsed scrape.
type families map[string]*dto.MetricFamily

// freeAddr returns a loopback address with a port that was free a moment
// ago: listen on port 0, close, reuse.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startObservedView mounts alice's view of store with --metrics on a free
// port plus extra flags, and waits until the endpoint answers.
func startObservedView(t testing.TB, store string, extra ...string) (*View, string) {
	t.Helper()
	addr := freeAddr(t)
	v := startView(t, store, "alice", append([]string{"--metrics", addr}, extra...)...)
	deadline := time.Now().Add(mountTimeout)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			resp.Body.Close()
			return v, addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics endpoint %s does not answer: %v\nstderr:\n%s", addr, err, v.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scrape fetches /metrics from addr and parses it with the Prometheus text
// parser. It fails the test unless every family parses, every sample has
// a value, and no label value looks like a path (label values stay
// bounded: zone kinds, operations, rules, holders; never paths).
func scrape(t testing.TB, addr string) families {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s, %v", addr, resp.Status, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("scrape content type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("scrape does not parse with the Prometheus text parser: %v\n%s", err, body)
	}
	for name, mf := range fams {
		if mf.GetHelp() == "" {
			t.Errorf("family %s has no help text", name)
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), "/") {
					t.Errorf("%s{%s=%q}: label value contains '/' (a path?)", name, lp.GetName(), lp.GetValue())
				}
			}
		}
	}
	return fams
}

// value is the value of the sample of family name whose labels include
// labels ("k=v" pairs), 0 if there is none; it fails the test if several
// samples match.
func (f families) value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	mf := f[name]
	if mf == nil {
		return 0
	}
	var out float64
	found := 0
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		ok := true
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				ok = false
			}
		}
		if !ok {
			continue
		}
		found++
		switch {
		case m.Counter != nil:
			out = m.Counter.GetValue()
		case m.Gauge != nil:
			out = m.Gauge.GetValue()
		case m.Untyped != nil:
			out = m.Untyped.GetValue()
		case m.Histogram != nil:
			out = float64(m.Histogram.GetSampleCount())
		}
	}
	if found > 1 {
		t.Fatalf("%s%v matches %d samples, want one", name, labels, found)
	}
	return out
}

// labelValues lists the values label takes in family name.
func (f families) labelValues(name, label string) []string {
	seen := map[string]bool{}
	for _, m := range f[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				seen[lp.GetValue()] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// delta checks that a counter moved by exactly want between two scrapes.
func delta(t testing.TB, before, after families, want float64, name string, labels ...string) {
	t.Helper()
	if got := after.value(t, name, labels...) - before.value(t, name, labels...); got != want {
		t.Errorf("%s%v grew by %v, want exactly %v", name, labels, got, want)
	}
}

// requiredFamilies are the families of docs/design.md, "Observability" (and the audit
// recorder's), which every scrape of a view with the audit trail on holds.
var requiredFamilies = []string{
	"shedfs_fuse_requests_total", "shedfs_fuse_request_duration_seconds",
	"shedfs_bytes_read_total", "shedfs_bytes_written_total", "shedfs_denials_total",
	"shedfs_quota_bytes", "shedfs_quota_inodes", "shedfs_views", "shedfs_open_files",
	"shedfs_badger_lsm_bytes", "shedfs_badger_vlog_bytes", "shedfs_store_commits_total",
	"shedfs_audit_events_total", "shedfs_audit_dropped_total", "shedfs_audit_written_total",
	"shedfs_audit_write_failures_total", "shedfs_audit_queue_length", "shedfs_audit_queue_capacity",
	"go_goroutines", "process_resident_memory_bytes",
}

// TestMetrics writes in two zones, gets refused three ways and fills a
// quota, and checks the exact counter deltas, the gauges, the bounded
// label values, and that `shedfs status` sees the same daemon.
func TestMetrics(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v, addr := startObservedView(t, store)
	before := scrape(t, addr)

	// Writes in two zones: N bytes each, three creates in private.
	const n = 10000
	data := randomBytes(5, n)
	mustWrite(t, v.Path("p0"), data, 0o644)
	mustWrite(t, v.Path("p1"), nil, 0o644)
	mustWrite(t, v.Path("p2"), nil, 0o644)
	mustWrite(t, v.Path("share", "s0"), data, 0o644)
	// Denials: a create in groups/ and a symlink out of share/.
	if err := os.WriteFile(v.Path("groups", "x"), data, 0o644); !errors.Is(err, unix.EACCES) {
		t.Errorf("create in groups/: %v, want EACCES", err)
	}
	if err := os.Symlink("/etc/passwd", v.Path("share", "l")); !errors.Is(err, unix.EPERM) {
		t.Errorf("symlink share/l to /etc/passwd: %v, want EPERM", err)
	}
	// A read of a file the view can write goes through the daemon (no
	// passthrough), once the kernel has let go of the pages the write
	// left in its cache (views keep them across a GETATTR: reqcache.go).
	dropPages(t, v.Path("p0"))
	if got := mustRead(t, v.Path("p0")); len(got) != n {
		t.Fatalf("read p0: %d bytes, want %d", len(got), n)
	}
	after := scrape(t, addr)
	for _, name := range requiredFamilies {
		if after[name] == nil {
			t.Errorf("scrape lacks family %s", name)
		}
	}
	// No --clamd: no clamd to be up or down (issue 27: it said 1).
	if f := after["shedfs_clamd_up"]; f != nil {
		t.Errorf("without --clamd the scrape has shedfs_clamd_up: %v", f)
	}

	delta(t, before, after, n, "shedfs_bytes_read_total", "zone=private")
	delta(t, before, after, n, "shedfs_bytes_written_total", "zone=private")
	delta(t, before, after, n, "shedfs_bytes_written_total", "zone=share")
	delta(t, before, after, 3, "shedfs_fuse_requests_total", "op=create", "zone=private", "result=ok")
	delta(t, before, after, 1, "shedfs_fuse_requests_total", "op=create", "zone=share", "result=ok")
	delta(t, before, after, 1, "shedfs_denials_total", "reason=groups_readonly")
	delta(t, before, after, 1, "shedfs_denials_total", "reason=symlink_policy")
	for _, r := range after.labelValues("shedfs_denials_total", "reason") {
		if r != "groups_readonly" && r != "symlink_policy" {
			delta(t, before, after, 0, "shedfs_denials_total", "reason="+r)
		}
	}
	if got := after.value(t, "shedfs_views"); got != 1 {
		t.Errorf("shedfs_views = %v, want 1", got)
	}

	// A quota refusal: 64 KiB for alice, of which p0 already uses N;
	// write 8 KiB at a time until the daemon refuses.
	if out, errOut, code := runCLI(t, "quota", "set", "user:alice", "--bytes", "64K", "--store", store); code != 0 {
		t.Fatalf("quota set: exit %d\n%s%s", code, out, errOut)
	}
	before = scrape(t, addr)
	f, err := os.OpenFile(v.Path("big"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	written, refused := 0, 0
	chunk := randomBytes(6, 8192)
	for i := 0; i < 16 && refused == 0; i++ {
		k, err := f.Write(chunk)
		written += k
		switch {
		case errors.Is(err, unix.EDQUOT):
			refused++
		case err != nil:
			t.Fatalf("write %d of big: %v, want success or EDQUOT", i, err)
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, unix.EDQUOT) {
		t.Errorf("close big: %v", err)
	}
	if refused != 1 || written == 0 {
		t.Fatalf("big: %d bytes written and %d writes refused; want some written, then one EDQUOT", written, refused)
	}
	after = scrape(t, addr)
	delta(t, before, after, 1, "shedfs_denials_total", "reason=quota_bytes")
	delta(t, before, after, float64(written), "shedfs_bytes_written_total", "zone=private")
	delta(t, before, after, 1, "shedfs_fuse_requests_total", "op=write", "zone=private", "result=EDQUOT")
	if got := after.value(t, "shedfs_quota_bytes", "holder=user:alice", "kind=limit"); got != 65536 {
		t.Errorf(`shedfs_quota_bytes{holder="user:alice",kind="limit"} = %v, want 65536`, got)
	}
	// Quotas charge sizes rounded up to 4 KiB.
	charge := func(size int) float64 { return float64((size + 4095) / 4096 * 4096) }
	if got, want := after.value(t, "shedfs_quota_bytes", "holder=user:alice", "kind=used"), charge(n)+charge(written); got != want {
		t.Errorf(`shedfs_quota_bytes{holder="user:alice",kind="used"} = %v, want %v`, got, want)
	}
	if got, want := after.value(t, "shedfs_quota_bytes", "holder=share", "kind=used"), charge(n); got != want {
		t.Errorf(`shedfs_quota_bytes{holder="share",kind="used"} = %v, want %v`, got, want)
	}

	// Bounded labels: zones are kinds, results ok or errno names.
	zoneKinds := []string{"group", "none", "output", "private", "share", "uploads"}
	for _, fam := range []string{"shedfs_fuse_requests_total", "shedfs_bytes_written_total", "shedfs_bytes_read_total"} {
		for _, z := range after.labelValues(fam, "zone") {
			if !slices.Contains(zoneKinds, z) {
				t.Errorf("%s has zone label %q, want a zone kind", fam, z)
			}
		}
	}
	errnoName := regexp.MustCompile(`^(ok|E[A-Z0-9]+)$`)
	for _, r := range after.labelValues("shedfs_fuse_requests_total", "result") {
		if !errnoName.MatchString(r) {
			t.Errorf("shedfs_fuse_requests_total has result %q, want ok or an errno name", r)
		}
	}

	checkStatus(t, store, v, after)
	checkDeployQueries(t, after)
	v.Stop()
}

// checkStatus runs `shedfs status` against the running view: through the
// admin socket it sees the view, the quota and the request rate.
func checkStatus(t *testing.T, store string, v *View, fams families) {
	t.Helper()
	out, errOut, code := runCLI(t, "status", "--json", "--store", store)
	if code != 0 {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, errOut)
	}
	var st struct {
		Daemon bool `json:"daemon"`
		Views  []struct {
			User, Mountpoint string
		} `json:"views"`
		Requests *struct {
			PerSecond float64 `json:"per_second"`
			Total     uint64  `json:"total"`
		} `json:"requests"`
		Quotas []struct {
			Holder string
			Used   struct{ Bytes int64 }
			Limit  struct{ Bytes int64 }
		} `json:"quotas"`
		Size struct {
			LSMBytes  int64 `json:"lsm_bytes"`
			DataBytes int64 `json:"data_bytes"`
		} `json:"size"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if !st.Daemon || len(st.Views) != 1 || st.Views[0].User != "alice" || st.Views[0].Mountpoint != v.Dir {
		t.Errorf("status --json: daemon %v, views %+v; want alice at %s", st.Daemon, st.Views, v.Dir)
	}
	total := 0.0
	for _, m := range fams["shedfs_fuse_requests_total"].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	if st.Requests == nil || float64(st.Requests.Total) < total || st.Requests.PerSecond <= 0 {
		t.Errorf("status --json: requests %+v, want a rate and at least the %v requests scraped before", st.Requests, total)
	}
	found := false
	for _, q := range st.Quotas {
		if q.Holder == "user:alice" {
			found = q.Limit.Bytes == 65536 && q.Used.Bytes > 0
		}
	}
	if !found {
		t.Errorf("status --json: quotas %+v, want user:alice with a 64 KiB limit", st.Quotas)
	}
	if st.Size.DataBytes <= 0 {
		t.Errorf("status --json: size %+v, want the data of the files", st.Size)
	}
	text, _, code := runCLI(t, "status", "--store", store)
	for _, want := range []string{"daemon:      running", "alice → " + v.Dir, "requests:    ", "/s over the last", "user:alice", "64 KiB"} {
		if code != 0 || !strings.Contains(text, want) {
			t.Errorf("status (exit %d) lacks %q:\n%s", code, want, text)
		}
	}
}

// metricName finds the metric names in a PromQL expression or rule file.
var metricName = regexp.MustCompile(`\b(?:shedfs|process|go)_[a-z0-9_]+\b`)

// flagFamilies are families a daemon exports only with a flag, which the
// scrape checkDeployQueries gets has not: their queries simply find no
// series elsewhere (an alert on them cannot fire without the flag).
var flagFamilies = map[string]string{
	"shedfs_clamd_up": "--clamd",
}

// checkDeployQueries checks that every query of the Grafana dashboard and
// of the alert rules under deploy/ names only metrics the live scrape has
// (a histogram's _bucket, _sum and _count series count as its family), or
// that exist only with a flag (flagFamilies).
func checkDeployQueries(t *testing.T, fams families) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	exists := func(name string) bool {
		if fams[name] != nil || flagFamilies[name] != "" {
			return true
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok && fams[base].GetType() == dto.MetricType_HISTOGRAM {
				return true
			}
		}
		return false
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana-dashboard.json: %v", err)
	}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			names := metricName.FindAllString(q.Expr, -1)
			if len(names) == 0 {
				t.Errorf("dashboard panel %q: query %q names no shedfs, process or go metric", p.Title, q.Expr)
			}
			for _, name := range names {
				if !exists(name) {
					t.Errorf("dashboard panel %q: query %q uses %s, which the daemon does not export", p.Title, q.Expr, name)
				}
			}
		}
	}
	if queries < 15 {
		t.Errorf("dashboard has %d queries, want the full set", queries)
	}
	rules, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range metricName.FindAllString(string(rules), -1) {
		if !exists(name) {
			t.Errorf("deploy/prometheus-alerts.yml uses %s, which the daemon does not export", name)
		}
	}
	t.Logf("dashboard: %d queries checked against %d families", queries, len(fams))
}

// TestMetricsSetattrCountedOnce: a chmod is one SETATTR request, and the
// request counter says so: the attributes its reply carries are not
// counted as a GETATTR too (they were, which made the untar of the Go tree
// look like 61,611 GETATTRs where the kernel sent 23,206).
func TestMetricsSetattrCountedOnce(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v, addr := startObservedView(t, store)
	p := v.Path("f")
	mustWrite(t, p, []byte("x"), 0o644)
	if _, err := os.Stat(p); err != nil { // the kernel now holds f's attributes
		t.Fatal(err)
	}
	count := func(f families, op string) float64 {
		return f.value(t, "shedfs_fuse_requests_total", "op="+op, "result=ok", "zone=private")
	}
	before := scrape(t, addr)
	const n = 10
	for i := range n {
		if err := os.Chmod(p, os.FileMode(0o600+i%2*0o44)); err != nil {
			t.Fatal(err)
		}
	}
	after := scrape(t, addr)
	if got := count(after, "setattr") - count(before, "setattr"); got != n {
		t.Errorf("%d chmods counted as %v SETATTRs", n, got)
	}
	if got := count(after, "getattr") - count(before, "getattr"); got >= n {
		t.Errorf("%d chmods also counted %v GETATTRs: each reply's attributes counted as a request", n, got)
	}
}

// dropPages makes the kernel forget the cached pages of path, so that the
// next read asks the daemon.
func dropPages(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise DONTNEED %s: %v", path, err)
	}
}
