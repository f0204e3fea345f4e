package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRequestsReadAfterStat counts the kernel's requests for the
// smallfiles phases of the bench: files written, stat'd, then read back.
// The page cache holds what the writes put there, and the stat's GETATTR
// (the write left size and times to refresh) must not drop it: views do
// not negotiate FUSE_AUTO_INVAL_DATA (fusefs/reqcache.go), so the reads
// cost an OPEN, FLUSH and RELEASE and no READ. With it, the GETATTR's
// mtime, newer than the one the kernel held from CREATE, dropped the
// pages and every file was read again. In share/, with another view
// holding the files, the same: a view is never told to drop what its own
// kernel saw written.
func TestRequestsReadAfterStat(t *testing.T) {
	t.Parallel()
	t.Run("private", func(t *testing.T) {
		t.Parallel()
		v, addr := startObservedView(t, newStore(t))
		readAfterStat(t, addr, v.Path("d"), nil)
	})
	t.Run("share", func(t *testing.T) {
		// Another view holds the files too: the writer's own kernel is
		// still not told to drop what it saw itself.
		t.Parallel()
		store := newStore(t)
		for _, u := range []string{"alice", "bob"} {
			adminOK(t, "user", "add", u, "--store", store)
		}
		addr := freeAddr(t)
		s := startServeWith(t, store, []string{"--metrics", addr, "--share-mode", "group"}, "alice", "bob")
		waitMetrics(t, addr)
		readAfterStat(t, addr, s.In("alice", "share", "d"), func(name string) string {
			return s.In("bob", "share", "d", name)
		})
	})
}

// readAfterStat writes files in dir, stats and reads them back, and checks
// the requests the stats and reads cost. other, if set, is where another
// view sees a file of dir; it stats each file there before.
func readAfterStat(t *testing.T, addr, dir string, other func(name string) string) {
	mustMkdir(t, dir, 0o755)
	const n = 8
	content := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 4096) }
	name := func(i int) string { return fmt.Sprintf("f%d", i) }
	for i := range n {
		mustWrite(t, filepath.Join(dir, name(i)), content(i), 0o644)
	}
	for i := range n {
		if other == nil {
			break
		}
		if _, err := os.Stat(other(name(i))); err != nil {
			t.Fatal(err)
		}
	}
	// The last create left dir's attributes to refresh (its mtime moved):
	// the next walk through it asks for them once.
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	beforeStat := scrape(t, addr)
	for i := range n {
		st, err := os.Stat(filepath.Join(dir, name(i)))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != 4096 {
			t.Fatalf("stat %s: size %d, want 4096", name(i), st.Size())
		}
	}
	beforeRead := scrape(t, addr)
	if got := requests(beforeRead, "getattr") - requests(beforeStat, "getattr"); got != n {
		// The write left size and times stale: one GETATTR each, no more.
		t.Errorf("%d stats of files just written cost %v GETATTRs, want %d", n, got, n)
	}
	for i := range n {
		if got := mustRead(t, filepath.Join(dir, name(i))); !bytes.Equal(got, content(i)) {
			t.Fatalf("read %s: %q..., want %q...", name(i), truncate(got, 8), truncate(content(i), 8))
		}
	}
	after := scrape(t, addr)
	if got := requests(after, "read") - requests(beforeRead, "read"); got != 0 {
		t.Errorf("%d reads of files written and stat'd in the same view cost %v READs, want 0 (the page cache has them)", n, got)
	}
	if got := requests(after, "open") - requests(beforeRead, "open"); got != n {
		t.Errorf("%d reads cost %v OPENs, want %d", n, got, n)
	}
	if got := requests(after, "getattr") - requests(beforeRead, "getattr"); got != 0 {
		t.Errorf("%d reads of files just stat'd cost %v GETATTRs, want 0", n, got)
	}
}
