package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type forkInfo struct {
	ID     string `json:"id"`
	From   string `json:"from"`
	Fork   string `json:"fork"`
	Usage  struct{ Bytes int64 }
	Forked struct {
		Entries int   `json:"entries"`
		Bytes   int64 `json:"bytes"`
		Took    int64 `json:"took_ns"`
	} `json:"forked"`
}

// treeSums is the sha256 of every regular file below dir, by path, and
// the target of every symlink.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode().IsRegular():
			out[rel] = hexSum(mustRead(t, p)) + " " + fi.Mode().Perm().String()
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "-> " + target
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// TestSessionFork forks a session through a running daemon, once as it
// is (--fork) and once from a snapshot of it (--from): the forks show
// the same tree (content, modes, hard links, symlinks) through their own
// views at once, are instant for a 64 MiB file and charged as copies;
// writes in a fork, in the source and through an in-place write leave
// the others as they were; fsck is clean after.
func TestSessionFork(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--quota", "1G", "--store", store)
	s := startServe(t, store, "alice")
	s.sessionOpen(t, "alice", "src")
	S := func(e ...string) string { return s.In("alice@src", e...) }
	mustMkdir(t, S("proj"), 0o755)
	mustWrite(t, S("proj", "a.txt"), []byte("alpha\n"), 0o644)
	mustWrite(t, S("proj", "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	if err := os.Link(S("proj", "a.txt"), S("proj", "a.link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("proj/a.txt", S("latest")); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	mustWrite(t, S("proj", "big.bin"), big, 0o644)
	want := treeSums(t, S("proj"))
	adminOK(t, "snapshot", "create", "--store", store, "--user", "alice", "--session", "src", "base")

	open := func(id string, extra ...string) forkInfo {
		args := append([]string{"session", "open", "--store", store, "--user", "alice", "--id", id, "--json"}, extra...)
		var info forkInfo
		if err := json.Unmarshal([]byte(adminOK(t, args...)), &info); err != nil {
			t.Fatal(err)
		}
		s.waitView("alice@" + id)
		return info
	}
	f1 := open("f1", "--fork", "src")
	f2 := open("f2", "--from", "base")
	for _, f := range []forkInfo{f1, f2} {
		if f.Forked.Entries != 7 || f.Forked.Bytes != 64<<20+6+10 {
			t.Errorf("fork %s: %+v", f.ID, f.Forked)
		}
		if took := time.Duration(f.Forked.Took); took > 2*time.Second {
			t.Errorf("fork %s of 64 MiB took %v: not independent of bytes", f.ID, took)
		}
		if f.Usage.Bytes < 64<<20 {
			t.Errorf("fork %s charged %d bytes, want the copy's %d at least", f.ID, f.Usage.Bytes, 64<<20)
		}
	}
	F1 := func(e ...string) string { return s.In("alice@f1", e...) }
	F2 := func(e ...string) string { return s.In("alice@f2", e...) }
	for _, dir := range []string{F1("proj"), F2("proj")} {
		got := treeSums(t, dir)
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", dir, got, want)
		}
		for p, sum := range want {
			if got[p] != sum {
				t.Errorf("%s/%s: %q, want %q", dir, p, got[p], sum)
			}
		}
		if inoOf(t, filepath.Join(dir, "a.txt")) != inoOf(t, filepath.Join(dir, "a.link")) {
			t.Errorf("%s: a.link is not a hard link of a.txt", dir)
		}
	}
	if target, err := os.Readlink(F1("latest")); err != nil || target != "proj/a.txt" {
		t.Errorf("f1 latest -> %q %v", target, err)
	}

	// Writes on each side, through two views at once, stay there.
	mustWrite(t, F1("proj", "a.txt"), []byte("changed in f1\n"), 0o644)
	w, err := os.OpenFile(S("proj", "big.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("SOURCE"), 32<<20); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := os.Truncate(F2("proj", "big.bin"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if got := string(mustRead(t, S("proj", "a.txt"))); got != "alpha\n" {
		t.Errorf("src a.txt reads %q after a write in f1", got)
	}
	if got := string(mustRead(t, F2("proj", "a.link"))); got != "alpha\n" {
		t.Errorf("f2 a.link reads %q after a write in f1", got)
	}
	if got := string(mustRead(t, F1("proj", "a.link"))); got != "changed in f1\n" {
		t.Errorf("f1 a.link reads %q: the hard link does not follow", got)
	}
	if got := mustRead(t, F1("proj", "big.bin")); hexSum(got) != hexSum(big) {
		t.Error("f1 big.bin changed by a write in src")
	}
	if got := mustRead(t, S("snapshots", "base", "proj", "big.bin")); hexSum(got) != hexSum(big) {
		t.Error("the snapshot's big.bin changed")
	}
	if got := mustRead(t, S("proj", "big.bin")); len(got) != 64<<20 || string(got[32<<20:32<<20+6]) != "SOURCE" {
		t.Error("src big.bin lost its own write or was cut by f2's truncate")
	}
	for _, id := range []string{"f1", "f2", "src"} {
		adminOK(t, "session", "close", "--store", store, "--user", "alice", id)
	}
	adminOK(t, "snapshot", "delete", "--store", store, "--user", "alice", "base")
	s.Stop()
	fsckClean(t, store)
}
