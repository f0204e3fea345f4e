package web

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// A removed user's links die with them: a new user of the same name
// neither opens nor lists them (issue 24, item 18).
func TestLinksDieWithTheirUser(t *testing.T) {
	f := newFixture(t)
	n := f.write(f.alice.Roots.Output, "r.txt", "old alice")
	info, err := f.svc.Create("alice", n.Ino, f.alice.Roots.Output, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.RemoveUser("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	if resp, body := f.get(info.URL); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
		t.Errorf("old alice's link for the new alice: %d %q", resp.StatusCode, body)
	}
	if ls, err := f.svc.List(""); err != nil || len(ls) != 0 {
		t.Errorf("link list after the user went: %+v %v", ls, err)
	}
	if _, err := f.st.GetLink(info.ID); err == nil {
		t.Error("the removed user's link record is still in the store")
	}
}

// A link record made for a user who is then removed and added again (a
// record the removal missed, or made while it ran) opens nothing.
func TestLinkOfAnEarlierUserOfTheName(t *testing.T) {
	f := newFixture(t)
	n := f.write(f.alice.Roots.Output, "r.txt", "x")
	info, err := f.svc.Create("alice", n.Ino, f.alice.Roots.Output, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.st.GetLink(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.RemoveUser("alice"); err != nil {
		t.Fatal(err)
	}
	alice, err := f.st.AddUser("alice")
	if err != nil {
		t.Fatal(err)
	}
	// The new alice has a file at the same inode's place: point the
	// stale record at it.
	m := f.write(alice.Roots.Output, "r.txt", "new alice")
	l.Ino, l.Dir = m.Ino, alice.Roots.Output
	if err := f.st.PutLink(*l); err != nil {
		t.Fatal(err)
	}
	if resp, body := f.get(info.URL); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a stale record of the old alice: %d %q", resp.StatusCode, body)
	}
	if ls, _ := f.svc.List(""); len(ls) != 0 {
		t.Errorf("link list shows a stale record: %+v", ls)
	}
}

// rotate-key stops every link: list hands out no new URL for them
// (item 19).
func TestRotateKeyEndsEveryLink(t *testing.T) {
	f := newFixture(t)
	n := f.write(f.alice.Roots.Private, "f", "x")
	info, err := f.svc.Create("alice", n.Ino, f.alice.Roots.Private, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RotateKey(); err != nil {
		t.Fatal(err)
	}
	ls, err := f.svc.List("")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if resp, _ := f.get(l.URL); resp.StatusCode == http.StatusOK {
			t.Errorf("after rotate-key, link list hands out %s, which works", l.URL)
		}
	}
	if len(ls) != 0 {
		t.Errorf("link list after rotate-key: %+v", ls)
	}
	if resp, _ := f.get(info.URL); resp.StatusCode != http.StatusForbidden {
		t.Errorf("old URL after rotate-key: %d", resp.StatusCode)
	}
}

// A missing key file is never replaced silently while links signed with
// it live: the service refuses to serve or make links (item 20).
func TestMissingKeyIsNotReplaced(t *testing.T) {
	f := newFixture(t)
	n := f.write(f.alice.Roots.Private, "f", "x")
	if _, err := f.svc.Create("alice", n.Ino, f.alice.Roots.Private, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.dir, KeyFile)); err != nil {
		t.Fatal(err)
	}
	again, err := New(Options{Core: f.core, Dir: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Listen("127.0.0.1:0"); err == nil {
		again.Shutdown(t.Context())
		t.Fatal("the link server started with a new key while links signed with the old one live")
	} else if !strings.Contains(err.Error(), KeyFile) {
		t.Errorf("error does not name the key file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, KeyFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a new key file was made: %v", err)
	}
	// rotate-key is the way out: it drops the links and makes a key.
	if err := again.RotateKey(); err != nil {
		t.Fatal(err)
	}
	if ls, err := again.List(""); err != nil || len(ls) != 0 {
		t.Errorf("links after rotate-key: %+v %v", ls, err)
	}
	if _, err := again.Listen("127.0.0.1:0"); err != nil {
		t.Fatalf("after rotate-key: %v", err)
	}
	again.Shutdown(t.Context())
}

// CopyKey carries the key to another directory, and refuses to replace
// a different key there (item 20, shedfs migrate).
func TestCopyKey(t *testing.T) {
	f := newFixture(t)
	k, err := f.svc.signingKey()
	if err != nil {
		t.Fatal(err)
	}
	to := t.TempDir()
	if err := CopyKey(f.dir, to); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(to, KeyFile))
	if err != nil || string(b) != string(k) {
		t.Fatalf("copied key: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(to, KeyFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("copied key mode %v", fi.Mode().Perm())
	}
	if err := CopyKey(f.dir, to); err != nil {
		t.Errorf("copying the same key again: %v", err)
	}
	other := t.TempDir()
	if _, err := RotateKey(other); err != nil {
		t.Fatal(err)
	}
	if err := CopyKey(f.dir, other); err == nil {
		t.Error("CopyKey replaced another key")
	}
	if err := CopyKey(t.TempDir(), to); err != nil {
		t.Errorf("no key to copy: %v", err)
	}
}

// A folder page shows a name with a bidi override or invalid UTF-8 as the
// audit table does, Go-quoted; the entry's link still opens it (item 21).
func TestFolderPageNeutralisesNames(t *testing.T) {
	f := newFixture(t)
	top := f.mkdir(f.alice.Roots.Output, "site")
	f.write(top.Ino, "rtl\u202etxt.exe", "bidi")
	f.write(top.Ino, "bad\xffname", "raw")
	info, err := f.svc.Create("alice", top.Ino, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := f.get(info.URL)
	if resp.StatusCode != 200 {
		t.Fatalf("page: %d", resp.StatusCode)
	}
	if strings.Contains(body, "\u202e") || strings.Contains(body, "\xff") {
		t.Errorf("the page carries a bidi override or invalid UTF-8:\n%s", body)
	}
	for _, want := range []string{`&#34;rtl\u202etxt.exe&#34;`, `&#34;bad\xffname&#34;`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s:\n%s", want, body)
		}
	}
	_, js := f.get(info.URL + "?format=json")
	var page Folder
	if err := json.Unmarshal([]byte(js), &page); err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Entries {
		if resp, _ := f.get(e.URL); resp.StatusCode != 200 {
			t.Errorf("entry %q: %d", e.Name, resp.StatusCode)
		}
	}
}

// A file link follows its file to another directory: served under its
// name and type now, listed at its path now (item 22).
func TestFileLinkFollowsAMove(t *testing.T) {
	f := newFixture(t)
	out := f.alice.Roots.Output
	sub := f.mkdir(out, "sub")
	n := f.write(out, "notes.txt", "<p>hi</p>")
	info, err := f.svc.Create("alice", n.Ino, out, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Rename(out, "notes.txt", sub.Ino, "page.html", 0); err != nil {
		t.Fatal(err)
	}
	resp, _ := f.get(info.URL + "?download=1")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Disposition"), "page.html") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("after a move: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Disposition"), resp.Header.Get("Content-Type"))
	}
	ls, err := f.svc.List("alice")
	if err != nil || len(ls) != 1 || ls[0].Path != "output/sub/page.html" {
		t.Errorf("link list after a move: %+v %v", ls, err)
	}
	evs := f.rec.all()
	if p := evs[len(evs)-1].Path; p != "/output/sub/page.html" {
		t.Errorf("audit path after a move: %q", p)
	}
}

// Ranges: a zero-length suffix is not satisfiable, 416 and 412 are the
// link server's error pages, and a request for many ranges gets the whole
// file once (item 24).
func TestRanges(t *testing.T) {
	f := newFixture(t)
	content := strings.Repeat("0123456789", 10240)
	n := f.write(f.alice.Roots.Output, "big.bin", content)
	info, err := f.svc.Create("alice", n.Ino, f.alice.Roots.Output, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := f.get(info.URL, "Range", "bytes=-0")
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || resp.Header.Get("Content-Range") != "bytes */102400" {
		t.Errorf("bytes=-0: %d %q", resp.StatusCode, resp.Header.Get("Content-Range"))
	}
	if !strings.Contains(body, "<h1>416") {
		t.Errorf("416 page: %q", body)
	}
	resp, body = f.get(info.URL, "Range", "bytes=200000-")
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || !strings.Contains(body, "<h1>416") || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("range past the end: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = f.get(info.URL, "If-Match", `"other"`, "Accept", "application/json")
	if resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(body, `"status": 412`) {
		t.Errorf("If-Match: %d %q", resp.StatusCode, body)
	}
	// A valid suffix still works, alone and beside an empty one.
	if resp, body := f.get(info.URL, "Range", "bytes=-3"); resp.StatusCode != 206 || body != "789" {
		t.Errorf("bytes=-3: %d %q", resp.StatusCode, body)
	}
	var many []string
	for i := range 3000 {
		many = append(many, itoa(i*30)+"-"+itoa(i*30))
	}
	resp, body = f.get(info.URL, "Range", "bytes="+strings.Join(many, ","))
	if len(body) > 2*len(content) {
		t.Errorf("3000 one-byte ranges: %d, %d bytes for a %d-byte file", resp.StatusCode, len(body), len(content))
	}
	evs := f.rec.all()
	if ev := evs[len(evs)-1]; ev.Errno != 0 && resp.StatusCode < 400 {
		t.Errorf("audit of the many-range request: %+v", ev)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// A link lives at least its lifetime: the expiry is rounded up to the
// second, never down (item 24).
func TestShortLinkLivesItsLifetime(t *testing.T) {
	f := newFixture(t)
	f.now = time.Unix(1_800_000_000, 999_000_000)
	n := f.write(f.alice.Roots.Private, "f", "x")
	info, err := f.svc.Create("alice", n.Ino, f.alice.Roots.Private, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if left := info.Expires.Sub(f.now); left < time.Second {
		t.Errorf("a 1s link expires %v after it was made", left)
	}
	f.now = f.now.Add(900 * time.Millisecond)
	if resp, _ := f.get(info.URL); resp.StatusCode != 200 {
		t.Errorf("a 1s link 0.9s later: %d", resp.StatusCode)
	}
}

// A folder page is one page of the folder: PageSize entries, folders
// first, with the URLs of the pages around it (item 3).
func TestFolderPages(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.PageSize = 20 })
	top := f.mkdir(f.alice.Roots.Output, "many")
	for i := range 45 {
		f.write(top.Ino, "f"+strconv.Itoa(100+i), "x")
	}
	zsub := f.mkdir(top.Ino, "zsub")
	for i := range 25 {
		f.write(zsub.Ino, "s"+strconv.Itoa(100+i), "x")
	}
	info, err := f.svc.Create("alice", top.Ino, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	u := info.URL + "?format=json"
	for pages := 0; u != ""; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages")
		}
		_, js := f.get(u)
		var page Folder
		if err := json.Unmarshal([]byte(js), &page); err != nil {
			t.Fatal(err)
		}
		if page.Total != 46 || page.Pages != 3 || page.Page != pages+1 || len(page.Entries) > 20 {
			t.Fatalf("page %d: total %d, page %d of %d, %d entries", pages+1, page.Total, page.Page, page.Pages, len(page.Entries))
		}
		for _, e := range page.Entries {
			names = append(names, e.Name)
		}
		u = page.Next
	}
	if len(names) != 46 || names[0] != "zsub" || names[1] != "f100" || names[45] != "f144" {
		t.Fatalf("pages list %d names: %q", len(names), names)
	}
	// A change in the folder shows at once, kept listing or not.
	f.write(top.Ino, "a-new", "x")
	_, js := f.get(info.URL + "?format=json")
	var again Folder
	if err := json.Unmarshal([]byte(js), &again); err != nil || again.Total != 47 || again.Entries[1].Name != "a-new" {
		t.Fatalf("after a new entry: %s", js)
	}
	if _, err := f.st.Unlink(top.Ino, "a-new", false); err != nil {
		t.Fatal(err)
	}
	resp, body := f.get(info.URL + "?page=2")
	if resp.StatusCode != 200 || !strings.Contains(body, `id="prev"`) || !strings.Contains(body, `id="next"`) || !strings.Contains(body, "page 2 of 3") {
		t.Errorf("HTML page 2: %d\n%s", resp.StatusCode, body)
	}
	for _, bad := range []string{"0", "4", "x", "-1"} {
		if resp, _ := f.get(info.URL + "?page=" + bad); resp.StatusCode != http.StatusNotFound {
			t.Errorf("page %s: %d", bad, resp.StatusCode)
		}
	}
	// A subfolder's pages are its own.
	_, js = f.get(info.URL + "?format=json")
	var first Folder
	json.Unmarshal([]byte(js), &first)
	_, js = f.get(first.Entries[0].URL + "?format=json")
	var sub Folder
	if err := json.Unmarshal([]byte(js), &sub); err != nil || sub.Total != 25 || sub.Pages != 2 || sub.Next == "" {
		t.Fatalf("subfolder: %s", js)
	}
	_, js = f.get(sub.Next)
	var sub2 Folder
	if err := json.Unmarshal([]byte(js), &sub2); err != nil || sub2.Page != 2 || len(sub2.Entries) != 5 || sub2.Entries[4].Name != "s124" || sub2.Top != info.URL {
		t.Errorf("subfolder page 2: %s", js)
	}
}

// infectedContent is a scan service that found every file infected.
type infectedContent struct{}

func (infectedContent) ForLink(ctx context.Context, ino uint64, z shedfs.Zone) (string, shedfs.Content, acl.Decision) {
	return "", shedfs.Content{State: shedfs.ScanInfected}, acl.Decision{Errno: syscall.EACCES, Reason: acl.ReasonInfected}
}

func (infectedContent) Content(ino uint64, z shedfs.Zone) (shedfs.Content, error) {
	return shedfs.Content{State: shedfs.ScanInfected, Detail: "EICAR"}, nil
}

// link create makes no link to a quarantined file, nor to one without a
// name (a file kept in trash/), as acl.NewLink decides (item 23).
func TestNoLinkThatCouldNeverOpen(t *testing.T) {
	f := newFixture(t)
	out := f.alice.Roots.Output
	n := f.write(out, "kept.txt", "x")
	if _, err := f.st.Unlink(out, "kept.txt", false); err != nil {
		t.Fatal(err)
	}
	// Unlink keeps the inode, without a name, until Reclaim.
	if _, err := f.svc.Create("alice", n.Ino, out, time.Hour); !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), acl.ReasonLinkUnnamed) {
		t.Errorf("a link to a file without a name: %v, want EACCES (link_unnamed)", err)
	}
	m := f.write(out, "eicar.txt", "x")
	f.svc.opts.Content = infectedContent{}
	if _, err := f.svc.Create("alice", m.Ino, out, time.Hour); !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), acl.ReasonInfected) {
		t.Errorf("a link to a quarantined file: %v, want EACCES (infected)", err)
	}
	if ls, _ := f.svc.List(""); len(ls) != 0 {
		t.Errorf("links made: %+v", ls)
	}
}
