package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// TestLinkLifecycle, through a running daemon: a removed user's links die
// with them, even for a new user of the name; a file link follows a move
// to another folder; no link is made to a file in trash/; rotate-key ends
// every link, link list included (issue 24, items 18, 19, 22, 23).
func TestLinkLifecycle(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	adminOK(t, "user", "add", "carol", "--store", store)
	s, _ := startLinkServe(t, store, "alice", "carol")

	// 18: carol's link dies with carol, even to a file of share/, which
	// outlives her and the new carol can read.
	mustWrite(t, s.In("carol", "share", "c.txt"), []byte("carol's\n"), 0o644)
	carols := getLink(t, s.In("carol", "share", "c.txt"))
	wantStatus(t, "carol's link", carols, http.StatusOK)
	adminOK(t, "user", "remove", "carol", "--force", "--store", store)
	adminOK(t, "user", "add", "carol", "--store", store)
	wantStatus(t, "the old carol's link, for the new carol", carols, http.StatusForbidden)
	for _, l := range listLinks(t, store) {
		if l.User == "carol" {
			t.Errorf("link list shows the old carol's link: %+v", l)
		}
	}

	// 22: a file link follows its file to another folder.
	notes := s.In("alice", "output", "notes.txt")
	mustWrite(t, notes, []byte("<p>notes</p>\n"), 0o644)
	u := getLink(t, notes)
	mustMkdir(t, s.In("alice", "output", "sub"), 0o755)
	if err := os.Rename(notes, s.In("alice", "output", "sub", "page.html")); err != nil {
		t.Fatal(err)
	}
	resp, _ := fetch(t, u+"?download=1")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Disposition"), "page.html") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("after a move: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Disposition"), resp.Header.Get("Content-Type"))
	}
	if ls := listLinks(t, store); len(ls) != 1 || ls[0].Path != "output/sub/page.html" {
		t.Errorf("link list after a move: %+v", ls)
	}

	// 23: a file in trash/ is not linked.
	mustWrite(t, s.In("alice", "output", "gone.txt"), []byte("gone\n"), 0o644)
	if err := os.Remove(s.In("alice", "output", "gone.txt")); err != nil {
		t.Fatal(err)
	}
	kept := trashNames(t, s.In("alice", "trash", "output"), "gone.txt")
	if len(kept) != 1 {
		t.Fatalf("trash/output lists %v, want gone.txt once", kept)
	}
	_, err := getxattr(filepath.Join(s.In("alice", "trash", "output"), kept[0]), "user.shedfs.link")
	wantErrno(t, "getfattr -n user.shedfs.link on a file in trash/", err, syscall.EACCES)
	if n := len(listLinks(t, store)); n != 1 {
		t.Errorf("%d links after the refusal, want 1", n)
	}

	// 19: rotate-key ends every link: link list hands none out.
	adminOK(t, "link", "rotate-key", "--store", store)
	if ls := listLinks(t, store); len(ls) != 0 {
		t.Errorf("link list after rotate-key: %+v", ls)
	}
	wantStatus(t, "a link after rotate-key", u, http.StatusForbidden)
}

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestMigrateCarriesLinkKey: after shedfs migrate to etcd, the links made
// on the embedded store still open (item 20): the key goes beside the
// blobs, where a store on etcd keeps it. A daemon never replaces a
// missing key while links made under it live.
func TestMigrateCarriesLinkKey(t *testing.T) {
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	addr := "127.0.0.1:" + freePort(t)
	s := startServeWith(t, store, []string{"--http", addr}, "alice")
	mustWrite(t, s.In("alice", "output", "r.txt"), []byte("report\n"), 0o644)
	u := getLink(t, s.In("alice", "output", "r.txt"))
	wantStatus(t, "before the migration", u, http.StatusOK)
	s.Stop()

	c := etcdtest.Start(t, 1)
	meta := "etcd://" + strings.Join(c.Endpoints(), ",") + "/migrated"
	adminOK(t, "migrate", "--from", store, "--to", meta)
	blobs := filepath.Join(store, "blobs")
	if fi, err := os.Stat(filepath.Join(blobs, "links.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("link key beside the blobs: %v %v", fi, err)
	}
	e := &etcdStore{cluster: c, args: []string{"--meta", meta, "--blobs", blobs}, socket: filepath.Join(t.TempDir(), "admin.sock")}
	w := e.mount(t, "alice", "--http", addr)
	wantStatus(t, "after the migration", u, http.StatusOK)
	w.Stop()

	// Without its key, the daemon refuses to serve links rather than
	// make a new key that would turn every link into a 403.
	if err := os.Rename(filepath.Join(blobs, "links.key"), filepath.Join(blobs, "links.key.away")); err != nil {
		t.Fatal(err)
	}
	mnt := newMountpoint(t)
	t.Cleanup(func() {
		if _, ok := findMount(mnt); ok {
			lazyUnmount(mnt)
		}
	})
	args := append([]string{"mount", "--user", "alice", "--admin-socket", e.socket, "--http", addr}, e.args...)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, shedfsBin, append(args, mnt)...).CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "links.key is missing") {
		t.Errorf("mount with the link key missing: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(blobs, "links.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a new link key was made: %v", err)
	}
}
