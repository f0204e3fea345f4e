package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startLinkServe starts `shedfs serve --http 127.0.0.1:0 --metrics
// 127.0.0.1:0` on store and waits for the views of users, and returns the
// daemon with its metrics address (from its log).
func startLinkServe(t *testing.T, store string, users ...string) (*serveDaemon, string) {
	t.Helper()
	s := startServeWith(t, store, []string{"--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0"}, users...)
	m := regexp.MustCompile(`msg="metrics listening" addr=(\S+)`).FindStringSubmatch(s.Stderr())
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", s.Stderr())
	}
	return s, m[1]
}

// getLink reads a new link of path with getfattr, as an agent would.
func getLink(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("getfattr", "--only-values", "-n", "user.shedfs.link", path).Output()
	if err != nil {
		t.Fatalf("getfattr -n user.shedfs.link %s: %v", path, err)
	}
	u := string(out)
	if !strings.HasPrefix(u, "http://127.0.0.1:") || strings.ContainsAny(u, " \n") {
		t.Fatalf("getfattr gave %q, not a link", u)
	}
	return u
}

// fetch GETs url with headers (name, value, ...) and returns the status
// and body.
func fetch(t *testing.T, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp, b
}

func wantStatus(t *testing.T, what, url string, want int) []byte {
	t.Helper()
	resp, body := fetch(t, url)
	if resp.StatusCode != want {
		t.Errorf("%s: GET answered %d, want %d: %s", what, resp.StatusCode, want, truncate(body, 200))
	}
	return body
}

type linkInfo struct {
	ID        string `json:"id"`
	User      string `json:"user"`
	Path      string `json:"path"`
	URL       string `json:"url"`
	Downloads uint64 `json:"downloads"`
}

func listLinks(t *testing.T, store string) []linkInfo {
	t.Helper()
	var ls []linkInfo
	if err := json.Unmarshal([]byte(adminOK(t, "link", "list", "--json", "--store", store)), &ls); err != nil {
		t.Fatal(err)
	}
	return ls
}

func linkID(t *testing.T, store, url string) string {
	t.Helper()
	for _, l := range listLinks(t, store) {
		if l.URL == url {
			return l.ID
		}
	}
	t.Fatalf("link %s not in link list", url)
	return ""
}

// TestLinks shares files and folders by link through a running daemon:
// links from getfattr and from the CLI, fetched with Go's HTTP client.
func TestLinks(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	setupTeam(t, store)
	s, metricsAddr := startLinkServe(t, store, "alice", "bob")

	data := bytes.Repeat([]byte("0123456789abcdef"), 64*1024) // 1 MiB
	report := s.In("alice", "output", "report.bin")
	mustWrite(t, report, data, 0o644)
	u := getLink(t, report)
	if n := len(listLinks(t, store)); n != 1 {
		t.Fatalf("one getfattr made %d links, want 1", n)
	}
	if _, body := fetch(t, u); !bytes.Equal(body, data) {
		t.Fatalf("the link serves %d bytes, not the file's %d", len(body), len(data))
	}
	resp, body := fetch(t, u, "Range", "bytes=100-115")
	if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[100:116]) ||
		resp.Header.Get("Content-Range") != "bytes 100-115/1048576" {
		t.Errorf("Range: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Range"))
	}

	// A rename within the zone keeps the link; a delete ends it (404).
	moved := s.In("alice", "output", "final.bin")
	if err := os.Rename(report, moved); err != nil {
		t.Fatal(err)
	}
	resp, _ = fetch(t, u+"?download=1")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Disposition"), "final.bin") {
		t.Errorf("after rename: %d %q", resp.StatusCode, resp.Header.Get("Content-Disposition"))
	}
	if ls := listLinks(t, store); len(ls) != 1 || ls[0].Path != "output/final.bin" || ls[0].Downloads != 3 {
		t.Errorf("link list after rename and three downloads: %+v", ls)
	}
	if err := os.Remove(moved); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "deleted file", u, http.StatusNotFound)

	// Revoke and expiry: 403.
	mustWrite(t, s.In("alice", "notes.txt"), []byte("notes\n"), 0o644)
	revoked := strings.TrimSpace(adminOK(t, "link", "create", "--user", "alice", "notes.txt", "--store", store))
	wantStatus(t, "fresh CLI link", revoked, http.StatusOK)
	adminOK(t, "link", "revoke", linkID(t, store, revoked), "--store", store)
	wantStatus(t, "revoked link", revoked, http.StatusForbidden)
	if err := unix.Setxattr(s.In("alice", "notes.txt"), "user.shedfs.link.ttl", []byte("1s"), 0); err != nil {
		t.Fatalf("setfattr user.shedfs.link.ttl: %v", err)
	}
	short := getLink(t, s.In("alice", "notes.txt"))
	wantStatus(t, "short link before expiry", short, http.StatusOK)
	// Expiry is rounded up to the second: a 1s link lives 1 to 2 s.
	time.Sleep(2100 * time.Millisecond)
	wantStatus(t, "expired link", short, http.StatusForbidden)
	if err := unix.Setxattr(s.In("alice", "notes.txt"), "user.shedfs.link.ttl", []byte("8d"), 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a lifetime past 7 days: %v, want EINVAL", err)
	}

	// bob's link to a group file stops when bob leaves the group.
	mustWrite(t, s.In("bob", "groups", "team-alpha", "plan.md"), []byte("plan\n"), 0o644)
	bobs := getLink(t, s.In("bob", "groups", "team-alpha", "plan.md"))
	wantStatus(t, "bob's group link", bobs, http.StatusOK)
	adminOK(t, "group", "remove-member", "team-alpha", "bob", "--store", store)
	wantStatus(t, "bob's group link after he left", bobs, http.StatusForbidden)

	// A folder page lists exactly the folder's entries, each link works.
	site := s.In("alice", "output", "site")
	mustMkdir(t, site, 0o755)
	mustMkdir(t, filepath.Join(site, "sub"), 0o755)
	want := map[string]string{"a.txt": "A\n", "<b>&.txt": "escaped\n"}
	for name, content := range want {
		mustWrite(t, filepath.Join(site, name), []byte(content), 0o644)
	}
	mustWrite(t, filepath.Join(site, "sub", "deep.txt"), []byte("deep\n"), 0o644)
	mustWrite(t, s.In("alice", "output", "secret.txt"), []byte("secret\n"), 0o644)
	folder := getLink(t, site)
	page := wantStatus(t, "folder page", folder, http.StatusOK)
	if !bytes.Contains(page, []byte("&lt;b&gt;&amp;.txt")) || bytes.Contains(page, []byte("<b>&")) || bytes.Contains(page, []byte("secret")) {
		t.Errorf("folder page:\n%s", page)
	}
	var listing struct {
		Entries []struct{ Name, Type, URL string }
	}
	if err := json.Unmarshal(wantStatus(t, "folder JSON", folder+"?format=json", http.StatusOK), &listing); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range listing.Entries {
		names = append(names, e.Name)
		switch {
		case e.Type == "folder":
			var sub struct{ Entries []struct{ Name, URL string } }
			if err := json.Unmarshal(wantStatus(t, "subfolder", e.URL+"?format=json", http.StatusOK), &sub); err != nil || len(sub.Entries) != 1 {
				t.Fatalf("subfolder: %+v %v", sub, err)
			}
			if got := wantStatus(t, "file in subfolder", sub.Entries[0].URL, http.StatusOK); string(got) != "deep\n" {
				t.Errorf("deep.txt: %q", got)
			}
		case want[e.Name] != "":
			if got := wantStatus(t, e.Name, e.URL, http.StatusOK); string(got) != want[e.Name] {
				t.Errorf("%s: %q", e.Name, got)
			}
		}
	}
	if strings.Join(names, "|") != "sub|<b>&.txt|a.txt" {
		t.Errorf("folder lists %q", names)
	}
	wantStatus(t, "no token", strings.Split(folder, "/l/")[0]+"/", http.StatusNotFound)
	resp, body = fetch(t, revoked, "Accept", "application/json")
	if resp.StatusCode != 403 || !strings.Contains(string(body), `"status": 403`) || strings.Contains(string(body), store) {
		t.Errorf("JSON error: %d %s", resp.StatusCode, body)
	}

	// Audit (written in batches: wait for the last refusal) and metrics.
	var ok, refused int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ok, refused = 0, 0
		for _, line := range strings.Split(strings.TrimSpace(adminOK(t, "audit", "--op", "download", "--json", "--store", store)), "\n") {
			var r struct{ Result, Rule, Link, Client string }
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("audit line %q: %v", line, err)
			}
			if r.Link == "" || !strings.HasPrefix(r.Client, "127.0.0.1:") {
				t.Fatalf("audit record without link or client: %+v", r)
			}
			if r.Result == "ok" {
				ok++
			} else {
				refused++
			}
		}
		if (ok >= 8 && refused >= 5) || time.Now().After(deadline) {
			break
		}
	}
	if ok < 8 || refused < 5 {
		t.Errorf("audit: %d served, %d refused downloads; want at least 8 and 5", ok, refused)
	}
	_, m := fetch(t, "http://"+metricsAddr+"/metrics")
	for _, re := range []string{
		`shedfs_http_requests_total\{code="403"\} [4-9]`,
		`shedfs_http_requests_total\{code="404"\} [2-9]`,
		`shedfs_link_downloads_total [1-9]`,
	} {
		if !regexp.MustCompile(re).Match(m) {
			t.Errorf("metrics lack %s", re)
		}
	}
	// Two full downloads of the 1 MiB file, at least.
	served := regexp.MustCompile(`(?m)^shedfs_http_bytes_served_total (\S+)$`).FindSubmatch(m)
	if served == nil {
		t.Errorf("no shedfs_http_bytes_served_total in the metrics")
	} else if n, err := strconv.ParseFloat(string(served[1]), 64); err != nil || n < 2*float64(len(data)) {
		t.Errorf("shedfs_http_bytes_served_total = %s, want at least %d", served[1], 2*len(data))
	}
	t.Run("browser", func(t *testing.T) { browserCheck(t, s, folder) })

	// A new key ends every link.
	adminOK(t, "link", "rotate-key", "--store", store)
	wantStatus(t, "folder link after rotate-key", folder, http.StatusForbidden)
}

// TestLinkWithoutHTTP: a daemon without --http makes no links.
func TestLinkWithoutHTTP(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice")
	mustWrite(t, v.Path("f"), []byte("x"), 0o644)
	buf := make([]byte, 256)
	if _, err := unix.Getxattr(v.Path("f"), "user.shedfs.link", buf); !errors.Is(err, unix.ENOTSUP) {
		t.Errorf("getxattr user.shedfs.link without --http: %v, want ENOTSUP", err)
	}
	adminFails(t, "--http", "link", "create", "--user", "alice", "f", "--store", store)
}

// browserCheck opens a folder page and a linked HTML report in headless
// Chromium: the rendered DOM lists the folder, the report's own script
// runs and its request to another URL is blocked by the CSP. Screenshots
// are kept for a person to look at.
func browserCheck(t *testing.T, s *serveDaemon, folder string) {
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium not installed (CI=true: failing instead of skipping): %v", err)
		}
		t.Skipf("chromium not installed: %v", err)
	}
	reportHTML := `<!doctype html><html><head><title>Report</title></head><body>
<h1 id="h">static</h1><p id="net">pending</p>
<script>
document.getElementById("h").textContent = "rendered by script";
fetch(` + "`" + folder + "?format=json`" + `).then(() => { document.getElementById("net").textContent = "fetch allowed"; })
  .catch(() => { document.getElementById("net").textContent = "fetch blocked"; });
</script></body></html>`
	mustWrite(t, s.In("alice", "output", "site", "report.html"), []byte(reportHTML), 0o644)
	report := getLink(t, s.In("alice", "output", "site", "report.html"))

	art := os.Getenv("SHEDFS_TEST_ARTIFACTS")
	if art == "" {
		art = filepath.Join(os.TempDir(), "shedfs-artifacts")
	}
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	profile := t.TempDir()
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
			"--no-first-run", "--disable-extensions", "--virtual-time-budget=3000"}
		cmd := exec.CommandContext(ctx, chrome, append(base, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, truncate(stderr.Bytes(), 2000))
		}
		return string(out)
	}
	// One run per page: the DOM after its scripts, and a screenshot in a
	// phone-sized window.
	shot := func(name string) string { return "--screenshot=" + filepath.Join(art, name) }
	dom := run(shot("links-folder-page.png"), "--window-size=390,844", "--dump-dom", folder)
	for _, want := range []string{`id="entries"`, ">a.txt<", ">report.html<", ">sub<", "&lt;b&gt;&amp;.txt"} {
		if !strings.Contains(dom, want) {
			t.Errorf("folder page in Chromium lacks %q:\n%s", want, truncate([]byte(dom), 3000))
		}
	}
	dom = run(shot("links-report.png"), "--window-size=390,844", "--dump-dom", report)
	if !strings.Contains(dom, "rendered by script") || !strings.Contains(dom, "fetch blocked") {
		t.Errorf("report in Chromium: want its script run and its fetch blocked:\n%s", truncate([]byte(dom), 3000))
	}
	for _, name := range []string{"links-folder-page.png", "links-report.png"} {
		if fi, err := os.Stat(filepath.Join(art, name)); err != nil || fi.Size() < 1000 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
	t.Logf("screenshots of the folder page and the report (phone-sized window): %s", filepath.Join(art, "links-*.png"))
}
