package web

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// fixture is a store with alice (in team-alpha) and bob, a link service
// and an HTTP test server in front of it.
type fixture struct {
	t     testing.TB
	dir   string
	st    *metadata.Store
	blobs *blobs.Dir
	svc   *Service
	srv   *httptest.Server
	alice *shedfs.User
	now   time.Time
	rec   *events
	// core is the core the service is built on, over st, recording
	// into rec and guarding the disk with disk.
	core *vfs.Core
	disk *diskSwitch
}

type events struct {
	mu   sync.Mutex
	list []shedfs.Event
}

func (e *events) Record(ev shedfs.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

func (e *events) all() []shedfs.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]shedfs.Event(nil), e.list...)
}

func newFixture(t testing.TB, opts ...func(*Options)) *fixture {
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
	f := &fixture{t: t, dir: dir, st: st, blobs: b, now: time.Now(), rec: &events{}, disk: &diskSwitch{}}
	f.core = vfs.New(st, b, vfs.Options{Recorder: f.rec, Space: f.disk})
	if f.alice, err = st.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUser("bob"); err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewUnstartedServer(nil)
	o := Options{Core: f.core, Dir: dir, PublicURL: "http://" + f.srv.Listener.Addr().String(),
		Now: func() time.Time { return f.now }, MaxConcurrent: 4}
	for _, fn := range opts {
		fn(&o)
	}
	f.svc, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = f.svc.Handler()
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) mkdir(parent uint64, name string) *shedfs.Inode {
	f.t.Helper()
	p, err := f.st.GetInode(parent)
	if err != nil {
		f.t.Fatal(err)
	}
	n, err := f.st.Create(parent, name, &shedfs.Inode{Mode: syscall.S_IFDIR | 0o755, Zone: p.Zone, Owner: p.Owner}, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) write(parent uint64, name, content string) *shedfs.Inode {
	f.t.Helper()
	p, err := f.st.GetInode(parent)
	if err != nil {
		f.t.Fatal(err)
	}
	n, err := f.st.Create(parent, name, &shedfs.Inode{Mode: syscall.S_IFREG | 0o644, Zone: p.Zone, Owner: p.Owner}, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(f.blobs.Path(n.Ino)), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(f.blobs.Path(n.Ino), []byte(content), 0o600); err != nil {
		f.t.Fatal(err)
	}
	n, err = f.st.Update(n.Ino, func(n *shedfs.Inode) error { n.Size = uint64(len(content)); return nil }, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) get(url string, hdr ...string) (*http.Response, string) {
	f.t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestFileLink(t *testing.T) {
	f := newFixture(t)
	out := f.alice.Roots.Output
	n := f.write(out, "report.html", "<h1>hi</h1>")
	info, err := f.svc.Create("alice", n.Ino, out, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if info.Path != "output/report.html" || !strings.HasPrefix(info.URL, f.srv.URL+"/l/") {
		t.Fatalf("info = %+v", info)
	}
	resp, body := f.get(info.URL)
	if resp.StatusCode != 200 || body != "<h1>hi</h1>" {
		t.Fatalf("GET = %d %q", resp.StatusCode, body)
	}
	for h, want := range map[string]string{
		"Content-Type":    "text/html; charset=utf-8",
		"Content-Length":  "11",
		"Referrer-Policy": "no-referrer",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'none'") {
		t.Errorf("HTML without CSP: %q", resp.Header.Get("Content-Security-Policy"))
	}
	etag := resp.Header.Get("ETag")
	if !strings.HasPrefix(etag, `W/"`) || resp.Header.Get("Last-Modified") == "" {
		t.Errorf("validators: ETag %q Last-Modified %q", etag, resp.Header.Get("Last-Modified"))
	}
	if resp, _ := f.get(info.URL, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	if resp, body := f.get(info.URL, "Range", "bytes=1-2"); resp.StatusCode != http.StatusPartialContent || body != "h1" {
		t.Errorf("Range: %d %q", resp.StatusCode, body)
	}
	if resp, _ := f.get(info.URL + "?download=1"); resp.Header.Get("Content-Disposition") != `attachment; filename=report.html` {
		t.Errorf("download: %q", resp.Header.Get("Content-Disposition"))
	}
	// A rename keeps the link and serves the new name.
	if _, err := f.st.Rename(out, "report.html", out, "final.html", 0); err != nil {
		t.Fatal(err)
	}
	if resp, _ := f.get(info.URL + "?download=1"); resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Disposition"), "final.html") {
		t.Errorf("after rename: %d %q", resp.StatusCode, resp.Header.Get("Content-Disposition"))
	}
	l, err := f.st.GetLink(info.ID)
	if err != nil || l.Downloads != 4 {
		t.Errorf("downloads = %+v, %v (want 4: GET, range, two downloads)", l, err)
	}
	// Expiry: 403; revocation: 403; deletion: 404.
	f.now = f.now.Add(3 * time.Hour)
	if resp, body := f.get(info.URL); resp.StatusCode != 403 || strings.Contains(body, f.dir) {
		t.Errorf("expired: %d %q", resp.StatusCode, body)
	}
	f.now = f.now.Add(-3 * time.Hour)
	if _, err := f.st.Unlink(out, "final.html", false); err != nil {
		t.Fatal(err)
	}
	if resp, _ := f.get(info.URL); resp.StatusCode != 404 {
		t.Errorf("deleted: %d", resp.StatusCode)
	}
	if err := f.svc.Revoke(info.ID); err != nil {
		t.Fatal(err)
	}
	if resp, body := f.get(info.URL, "Accept", "application/json"); resp.StatusCode != 403 || !strings.Contains(body, `"status": 403`) {
		t.Errorf("revoked: %d %q", resp.StatusCode, body)
	}
	evs := f.rec.all()
	last := evs[len(evs)-1]
	if last.Op != OpDownload || last.Link != info.ID || last.Reason != ruleRevoked || last.Client == "" || last.Errno != syscall.EACCES {
		t.Errorf("audit event = %+v", last)
	}
	if evs[0].Path != "/output/report.html" || evs[0].User != "alice" || evs[0].Errno != 0 {
		t.Errorf("first audit event = %+v", evs[0])
	}
	// Every event of the link server names its door.
	for _, e := range evs {
		if e.Door != Door {
			t.Errorf("audit event of door %q, want %q: %+v", e.Door, Door, e)
		}
	}
}

func TestGroupLinkStopsWithMembership(t *testing.T) {
	f := newFixture(t)
	g, err := f.st.AddGroup("team-alpha")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.AddMember("team-alpha", "bob"); err != nil {
		t.Fatal(err)
	}
	n := f.write(g.Root, "plan.md", "plan")
	info, err := f.svc.Create("bob", n.Ino, g.Root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := info.Expires.Sub(info.Created); d < 24*time.Hour || d > 24*time.Hour+time.Second {
		t.Errorf("default lifetime: %v to %v", info.Created, info.Expires)
	}
	if resp, _ := f.get(info.URL); resp.StatusCode != 200 {
		t.Fatalf("member: %d", resp.StatusCode)
	}
	if err := f.st.RemoveMember("team-alpha", "bob"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := f.get(info.URL); resp.StatusCode != 403 {
		t.Fatalf("after leaving: %d", resp.StatusCode)
	}
	if _, err := f.svc.Create("bob", n.Ino, g.Root, 0); err == nil {
		t.Fatal("a non-member made a link")
	}
}

func TestFolderLink(t *testing.T) {
	f := newFixture(t)
	out := f.alice.Roots.Output
	top := f.mkdir(out, "site")
	sub := f.mkdir(top.Ino, "sub")
	f.write(top.Ino, `<script>x&"q".txt`, "escaped")
	f.write(top.Ino, "a.txt", "A")
	f.write(sub.Ino, "deep.txt", "deep")
	f.write(out, "secret.txt", "outside")
	info, err := f.svc.Create("alice", top.Ino, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := f.get(info.URL)
	if resp.StatusCode != 200 || !strings.Contains(body, "&lt;script&gt;x&amp;") || strings.Contains(body, "<script>") {
		t.Fatalf("page: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(body, "viewport") || strings.Contains(body, "secret") {
		t.Fatalf("page: %s", body)
	}
	_, js := f.get(info.URL + "?format=json")
	var page Folder
	if err := json.Unmarshal([]byte(js), &page); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range page.Entries {
		names = append(names, e.Name)
	}
	if strings.Join(names, "|") != `sub|<script>x&"q".txt|a.txt` {
		t.Fatalf("entries: %q", names)
	}
	// Each entry's link works; the subfolder's page lists its file.
	if resp, body := f.get(page.Entries[2].URL); resp.StatusCode != 200 || body != "A" {
		t.Fatalf("a.txt: %d %q", resp.StatusCode, body)
	}
	if resp, body := f.get(page.Entries[1].URL); resp.StatusCode != 200 || body != "escaped" {
		t.Fatalf("escaped name: %d %q", resp.StatusCode, body)
	}
	_, js = f.get(page.Entries[0].URL + "?format=json")
	var subPage Folder
	if err := json.Unmarshal([]byte(js), &subPage); err != nil || len(subPage.Entries) != 1 || subPage.Top != info.URL {
		t.Fatalf("sub page: %s", js)
	}
	if resp, body := f.get(subPage.Entries[0].URL); resp.StatusCode != 200 || body != "deep" {
		t.Fatalf("deep.txt: %d %q", resp.StatusCode, body)
	}
	// The child token of a.txt does not open another name, and nothing
	// outside the folder is reachable.
	u := page.Entries[2].URL
	if resp, _ := f.get(strings.TrimSuffix(u, "a.txt") + "secret.txt"); resp.StatusCode != 403 {
		t.Fatalf("other name: %d", resp.StatusCode)
	}
	if resp, _ := f.get(strings.TrimSuffix(u, "a.txt") + "%2E%2E"); resp.StatusCode != 403 {
		t.Fatalf("escaped dot-dot: %d", resp.StatusCode)
	}
	// A literal .. is cleaned away by the server: above the token there
	// is nothing.
	if resp, body := f.get(u + "/../../.."); resp.StatusCode != 404 || strings.Contains(body, "secret") {
		t.Fatalf("dot-dot: %d %s", resp.StatusCode, body)
	}
	// A subfolder moved out of the linked folder is no longer reachable.
	if _, err := f.st.Rename(top.Ino, "sub", out, "sub", 0); err != nil {
		t.Fatal(err)
	}
	if resp, _ := f.get(subPage.Entries[0].URL); resp.StatusCode != 404 {
		t.Fatalf("moved out: %d", resp.StatusCode)
	}
}

func TestRotateKeyAndPersistence(t *testing.T) {
	f := newFixture(t)
	n := f.write(f.alice.Roots.Private, "f", "x")
	info, err := f.svc.Create("alice", n.Ino, f.alice.Roots.Private, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(f.dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	// A second service on the same store (a restart) serves the link.
	again, err := New(Options{Core: f.core, Dir: f.dir, PublicURL: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	list, err := again.List("alice")
	if err != nil || len(list) != 1 || list[0].URL != info.URL || list[0].Path != "f" {
		t.Fatalf("list after restart: %+v, %v", list, err)
	}
	if err := f.svc.RotateKey(); err != nil {
		t.Fatal(err)
	}
	if resp, _ := f.get(info.URL); resp.StatusCode != 403 {
		t.Fatalf("after rotation: %d", resp.StatusCode)
	}
}

func TestNoListingWithoutToken(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/", "/l/", "/l", "/metrics", "/../../etc/passwd", "/l/x/y"} {
		resp, body := f.get(f.srv.URL + p)
		if resp.StatusCode != 404 && resp.StatusCode != 403 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
		if strings.Contains(body, f.dir) || strings.Contains(body, "goroutine") {
			t.Errorf("%s leaks: %s", p, body)
		}
	}
	req, _ := http.NewRequest("POST", f.srv.URL+"/l/x", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestConcurrencyCap(t *testing.T) {
	f := newFixture(t)
	for range cap(f.svc.lim.slots) {
		f.svc.lim.slots <- struct{}{}
	}
	resp, _ := f.get(f.srv.URL + "/l/x")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: %d", resp.StatusCode)
	}
}

func TestPurgeAndPrivateRoot(t *testing.T) {
	f := newFixture(t)
	info, err := f.svc.Create("alice", f.alice.Roots.Private, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if info.Path != "." {
		t.Errorf("path of the view root: %q", info.Path)
	}
	if _, body := f.get(info.URL); !strings.Contains(body, "<title>alice</title>") {
		t.Errorf("view root page: %s", body)
	}
	// Listen purges at once: the link expired an hour later is gone.
	f.now = f.now.Add(2 * time.Hour)
	if _, err := f.svc.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.svc.Shutdown(t.Context()) })
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := f.st.GetLink(info.ID); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("expired link not purged")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fullDisk is a store disk below the free-space mark.
// diskSwitch is the store's disk guard as the core asks it (the rule is
// acl.AdmitSpace): with room, or full to the metadata's headroom.
type diskSwitch struct{ full atomic.Bool }

func (d *diskSwitch) Admit(bytes, inodes int64) acl.Decision {
	free := int64(1 << 40)
	if d.full.Load() {
		free = 0
	}
	return acl.AdmitSpace(acl.Space{FreeBytes: free, FreeInodes: 1 << 30}, bytes, inodes)
}
func (d *diskSwitch) Short() bool { return d.full.Load() }

func TestFullDisk(t *testing.T) {
	f := newFixture(t)
	n := f.write(f.alice.Roots.Private, "f", "x")
	info, err := f.svc.Create("alice", n.Ino, f.alice.Roots.Private, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.disk.full.Store(true)
	if _, err := f.svc.Create("alice", n.Ino, f.alice.Roots.Private, time.Hour); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a link on a full disk: %v, want ENOSPC", err)
	}
	// Downloads are served, not counted.
	if resp, _ := f.get(info.URL); resp.StatusCode != 200 {
		t.Fatalf("download on a full disk: %d", resp.StatusCode)
	}
	if l, err := f.st.GetLink(info.ID); err != nil || l.Downloads != 0 {
		t.Fatalf("downloads counted on a full disk: %+v %v", l, err)
	}
}
