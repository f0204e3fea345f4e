package integration

import (
	"os"
	"slices"
	"testing"
	"time"
)

// TestCoherenceRepeatedChanges: once a view's kernel was told that what it
// caches of an inode is stale, further changes do not tell it again until
// it asks the daemon (knownCount). Whatever it asks first, it gets the
// latest: changes in a row, an attribute change followed by a data change,
// pages of an open descriptor, a directory's listing and times.
func TestCoherenceRepeatedChanges(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", append([]string{"share"}, p...)...) }
	B := func(p ...string) string { return s.In("bob", append([]string{"share"}, p...)...) }
	readsAtOnce := func(what, path, want string) {
		t.Helper()
		atOnce(t, what, func() bool {
			got, err := os.ReadFile(path)
			return err == nil && string(got) == want
		})
	}

	mustWrite(t, A("f"), []byte("1"), 0o644)
	if got := string(mustRead(t, B("f"))); got != "1" {
		t.Fatalf("bob reads f: %q", got)
	}
	for _, v := range []string{"2", "3", "4"} {
		wantOK(t, "alice rewrites f", writeFile(A("f"), []byte(v)))
	}
	readsAtOnce("bob reads the last of three rewrites", B("f"), "4")

	// Sizes: appends in a row, then bob's stat.
	for range 3 {
		f, err := os.OpenFile(A("f"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write([]byte("+"))
		wantOK(t, "alice appends", errorsJoin(err, f.Close()))
	}
	atOnce(t, "bob's stat shows the size after three appends", func() bool {
		st, err := os.Stat(B("f"))
		return err == nil && st.Size() == 4
	})

	// An attribute change, then data: the data still reaches bob's
	// open descriptor's pages.
	g, err := os.Open(B("f"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readAt0(g); err != nil || string(got) != "4+++" {
		t.Fatalf("bob reads f through a descriptor: %q %v", got, err)
	}
	before, err := os.Stat(A("f"))
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, "alice chmods f", os.Chmod(A("f"), 0o640))
	wantOK(t, "alice rewrites f in place", writeFile(A("f"), []byte("5555")))
	wantOK(t, "alice rewrites f in place again", writeFile(A("f"), []byte("6666")))
	// The same size and mtime: nothing in the attributes tells bob's
	// kernel that its pages went stale.
	wantOK(t, "alice sets the old mtime back", os.Chtimes(A("f"), before.ModTime(), before.ModTime()))
	atOnce(t, "bob's open descriptor reads the rewrite after a chmod", func() bool {
		got, err := readAt0(g)
		return err == nil && string(got) == "6666"
	})
	atOnce(t, "bob's stat shows the mode", func() bool {
		st, err := os.Stat(B("f"))
		return err == nil && st.Mode().Perm() == 0o640
	})

	g.Close()

	// A directory: listed and stat'ed by bob, then several creates.
	mustMkdir(t, A("d"), 0o755)
	_ = listNames(t, B("d"))
	if _, err := os.Stat(B("d")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a later mtime
	for _, n := range []string{"a", "b", "c"} {
		mustWrite(t, A("d", n), []byte(n), 0o644)
	}
	atOnce(t, "bob's ls shows the three new files", func() bool {
		return slices.Equal(listNames(t, B("d")), []string{"a", "b", "c"})
	})
	atOnce(t, "bob's stat of d shows alice's mtime", func() bool {
		a, errA := os.Stat(A("d"))
		b, errB := os.Stat(B("d"))
		return errA == nil && errB == nil && a.ModTime().Equal(b.ModTime())
	})
	s.Stop()
	fsckClean(t, s.Store)
}

// errorsJoin returns the first non-nil error.
func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
