package integration

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDoorsReachKernels: a change made through any door into the store —
// another view, an import, a trash restore, a restore to a time, a
// session closed with --keep, an ownership override, and (the other way)
// a view's write read through a link — is seen at once by a view whose
// kernel had looked the name up before: every door goes through the
// core, which tells every view. Each check is one try, not a poll; the
// kernel caches names and attributes for an hour.
func TestDoorsReachKernels(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	setupTeam(t, store)
	s, _ := startLinkServe(t, store, "alice", "bob", "carol")
	A := func(p ...string) string { return s.In("alice", p...) }
	B := func(p ...string) string { return s.In("bob", p...) }
	absent := func(what, p string) {
		t.Helper()
		if _, err := os.Stat(p); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("%s: %s before: %v, want ENOENT", what, p, err)
		}
	}
	readNow := func(what, p, want string) {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("%s: %s at once: %q, %v; want %q", what, p, b, err, want)
		}
	}

	t.Run("view", func(t *testing.T) {
		absent("view", B("share", "v.txt"))
		mustWrite(t, A("share", "v.txt"), []byte("from alice"), 0o644)
		readNow("a write in alice's view", B("share", "v.txt"), "from alice")
	})

	t.Run("import", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "imp.txt")
		mustWrite(t, src, []byte("imported"), 0o600)
		absent("import", A("uploads", "imp.txt"))
		adminOK(t, "import", "--user", "alice", "--store", store, src)
		readNow("an import", A("uploads", "imp.txt"), "imported")
	})

	t.Run("trash restore", func(t *testing.T) {
		mustWrite(t, A("tr.txt"), []byte("kept"), 0o644)
		if err := os.Remove(A("tr.txt")); err != nil {
			t.Fatal(err)
		}
		absent("trash restore", A("tr.txt"))
		var list []struct {
			Entry, Path string
		}
		if err := json.Unmarshal([]byte(adminOK(t, "trash", "list", "--user", "alice", "--store", store, "--json")), &list); err != nil {
			t.Fatal(err)
		}
		entry := ""
		for _, e := range list {
			if e.Path == "tr.txt" {
				entry = e.Entry
			}
		}
		if entry == "" {
			t.Fatalf("trash list has no tr.txt: %+v", list)
		}
		adminOK(t, "trash", "restore", "--user", "alice", "--store", store, entry)
		readNow("a trash restore", A("tr.txt"), "kept")
	})

	t.Run("restore at", func(t *testing.T) {
		mustMkdir(t, B("share", "ra"), 0o755)
		mustWrite(t, B("share", "ra", "x"), []byte("v1"), 0o644)
		time.Sleep(20 * time.Millisecond)
		at := time.Now().UTC().Format(time.RFC3339Nano)
		time.Sleep(20 * time.Millisecond)
		mustWrite(t, B("share", "ra", "x"), []byte("version 2"), 0o644)
		readNow("before the restore", A("share", "ra", "x"), "version 2") // alice's kernel caches it
		adminOK(t, "restore", "--store", store, "--user", "bob", "--at", at, "share/ra")
		readNow("a restore to a time", A("share", "ra", "x"), "v1")
	})

	t.Run("session close keep", func(t *testing.T) {
		adminOK(t, "session", "open", "--user", "alice", "--id", "s1", "--store", store)
		scratch := filepath.Join(s.Root, "alice@s1")
		mustWrite(t, filepath.Join(scratch, "k.txt"), []byte("scratch"), 0o644)
		kept := A("sessions", "s1", "k.txt")
		readNow("an open session in the main view", kept, "scratch")
		if f, err := os.OpenFile(kept, os.O_WRONLY, 0); err == nil {
			f.Close()
			t.Fatalf("an open session's file is writable in the main view")
		}
		adminOK(t, "session", "close", "--user", "alice", "--store", store, "s1", "--keep")
		f, err := os.OpenFile(kept, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatalf("a session closed with --keep: %s not writable at once: %v", kept, err)
		}
		f.Close()
		readNow("a session closed with --keep", kept, "scratch")
	})

	t.Run("mode set", func(t *testing.T) {
		doc := B("groups", "team-alpha", "m.txt")
		mustWrite(t, A("groups", "team-alpha", "m.txt"), []byte("draft"), 0o644)
		if got := getXattr(t, doc, "user.shedfs.mode"); got != "group" {
			t.Fatalf("mode before: %q", got)
		}
		if f, err := os.OpenFile(doc, os.O_WRONLY, 0); err != nil {
			t.Fatalf("bob writes the group-mode file: %v", err)
		} else {
			f.Close()
		}
		adminOK(t, "mode", "set", "--user", "bob", "--store", store, "groups/team-alpha/m.txt", "--mode", "owner_ro")
		if got := getXattr(t, doc, "user.shedfs.mode"); got != "owner_ro" {
			t.Errorf("mode at once after mode set: %q, want owner_ro", got)
		}
		f, err := os.OpenFile(doc, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) {
			t.Errorf("bob writes an owner_ro file at once after mode set: %v, want EACCES or EPERM", err)
		}
	})

	t.Run("link page", func(t *testing.T) {
		p := A("output", "l.txt")
		mustWrite(t, p, []byte("one"), 0o644)
		u := getLink(t, p)
		if _, body := fetch(t, u); string(body) != "one" {
			t.Fatalf("link serves %q", body)
		}
		mustWrite(t, p, []byte("second"), 0o644)
		if _, body := fetch(t, u); !strings.HasPrefix(string(body), "second") || len(body) != len("second") {
			t.Errorf("a link after a write in the view: %q, want %q at once", body, "second")
		}
	})
	fsckOnline(t, s)
}
