package integration

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestReleasesBatched: files closed one after another (each released
// dirty, the last one twice) are persisted together, fewer commits than
// files (main: one commit per release); every view reads each size at
// once, before the batch and after it, a restart keeps them, and a kill -9
// right after closes leaves a store that recovery and fsck find whole.
func TestReleasesBatched(t *testing.T) {
	t.Parallel()
	const files = 16
	store := newStore(t)
	v, addr := startObservedView(t, store, "--no-audit")
	content := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 1000+i) }
	open := make([]*os.File, files)
	for i := range open {
		f, err := os.Create(v.Path(fmt.Sprintf("f%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(content(i)); err != nil {
			t.Fatal(err)
		}
		open[i] = f
	}
	c0 := commits(t, addr)
	for _, f := range open {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The last file, opened, written and released again at once, is
	// queued twice.
	last := files - 1
	again, err := os.OpenFile(v.Path(fmt.Sprintf("f%d", last)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Write([]byte("+")); err != nil {
		t.Fatal(err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	want := func(i int) int64 {
		if i == last {
			return int64(len(content(i))) + 1
		}
		return int64(len(content(i)))
	}
	sizes := func(what, dir string) {
		t.Helper()
		for i := range files {
			st, err := os.Stat(fmt.Sprintf("%s/f%d", dir, i))
			if err != nil {
				t.Errorf("%s: f%d: %v", what, i, err)
			} else if st.Size() != want(i) {
				t.Errorf("%s: f%d: size %d, want %d", what, i, st.Size(), want(i))
			}
		}
	}
	sizes("right after the closes", v.Dir)
	// The closes' commits end within a few lingers.
	seen, stable := commits(t, addr), 0
	for deadline := time.Now().Add(5 * time.Second); stable < 5 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if c := commits(t, addr); c != seen {
			seen, stable = c, 0
		} else {
			stable++
		}
	}
	if got := seen - c0; got > files/2 {
		t.Errorf("%v commits for %d files released one after another, want at most %d (main: one each)", got, files+1, files/2)
	}
	sizes("after the batch", v.Dir)
	v.Stop()

	v2 := startView(t, store, "alice")
	sizes("after a restart", v2.Dir)
	if got := mustRead(t, v2.Path("f3")); !bytes.Equal(got, content(3)) {
		t.Errorf("f3 after a restart: %q", got)
	}
	// Closed and released just before a kill -9: in the queue or
	// committed, the sizes come back and the store is clean.
	for i := range files {
		if err := os.WriteFile(v2.Path(fmt.Sprintf("g%d", i)), content(i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	syncDir(t, v2.Dir)
	v2.Kill()
	v3 := startView(t, store, "alice")
	for i := range files {
		st, err := os.Stat(v3.Path(fmt.Sprintf("g%d", i)))
		if err != nil {
			t.Errorf("g%d after kill -9: %v", i, err)
		} else if st.Size() != int64(len(content(i))) {
			t.Errorf("g%d after kill -9: size %d, want %d", i, st.Size(), len(content(i)))
		}
	}
	v3.Stop()
	fsckClean(t, store)
}
