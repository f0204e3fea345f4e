package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestSessionDiffApply: a session forked from a snapshot of proj/ is
// changed through its view (an edit, a delete, a rename, a new file and
// directory, a chmod, a binary file); session diff names each change,
// --patch gives the unified diff of the text files; apply --dry-run
// changes nothing, and apply --to proj makes alice's proj/ what the
// session has, what it replaced or removed in her trash; the snapshot
// is as it was.
func TestSessionDiffApply(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	A := func(e ...string) string { return s.In("alice", e...) }
	mustMkdir(t, A("proj"), 0o755)
	mustMkdir(t, A("proj", "sub"), 0o755)
	mustWrite(t, A("proj", "a.txt"), []byte("line one\nline two\nline three\n"), 0o644)
	mustWrite(t, A("proj", "b.txt"), []byte("to be removed\n"), 0o644)
	mustWrite(t, A("proj", "old.txt"), []byte("renamed\n"), 0o644)
	mustWrite(t, A("proj", "sub", "c.txt"), []byte("untouched\n"), 0o644)
	mustWrite(t, A("proj", "run.sh"), []byte("#!/bin/sh\n"), 0o644)
	adminOK(t, "snapshot", "create", "--store", store, "--user", "alice", "--path", "proj", "base")
	baseSums := treeSums(t, A("snapshots", "base"))
	s.sessionOpen(t, "alice", "w", "--from", "base")
	W := func(e ...string) string { return s.In("alice@w", e...) }

	mustWrite(t, W("a.txt"), []byte("line one\nLINE TWO\nline three\n"), 0o644)
	wantOK(t, "rm b.txt", os.Remove(W("b.txt")))
	wantOK(t, "mv old.txt new.txt", os.Rename(W("old.txt"), W("new.txt")))
	mustWrite(t, W("d.txt"), []byte("added\n"), 0o644)
	mustMkdir(t, W("newdir"), 0o750)
	mustWrite(t, W("newdir", "e.txt"), []byte("in a new directory\n"), 0o600)
	wantOK(t, "chmod run.sh", os.Chmod(W("run.sh"), 0o755))
	mustWrite(t, W("bin.dat"), []byte{0, 1, 2, 0, 3}, 0o644)

	d := snapshotJSON[snapDiff](t, "session", "diff", "--store", store, "--user", "alice", "w")
	paths := func(cs []snapChange) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.OldPath+">"+c.Path)
		}
		return out
	}
	for _, check := range []struct {
		what string
		got  []string
		want []string
	}{
		{"added", paths(d.Added), []string{">bin.dat", ">d.txt", ">newdir", ">newdir/e.txt"}},
		{"removed", paths(d.Removed), []string{">b.txt"}},
		{"modified", paths(d.Modified), []string{">a.txt"}},
		{"renamed", paths(d.Renamed), []string{"old.txt>new.txt"}},
		{"modes", paths(d.Modes), []string{">run.sh"}},
	} {
		if strings.Join(check.got, " ") != strings.Join(check.want, " ") {
			t.Errorf("session diff %s: %v, want %v", check.what, check.got, check.want)
		}
	}
	patch := adminOK(t, "session", "diff", "--store", store, "--user", "alice", "w", "--patch")
	for _, want := range []string{
		"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n line one\n-line two\n+LINE TWO\n line three\n",
		"--- a/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-to be removed\n",
		"--- /dev/null\n+++ b/newdir/e.txt\n",
		"Binary files /dev/null and b/bin.dat differ\n",
		"rename from old.txt\nrename to new.txt\n",
	} {
		if !strings.Contains(patch, want) {
			t.Errorf("session diff --patch lacks %q:\n%s", want, patch)
		}
	}

	before := treeSums(t, A("proj"))
	dry := adminOK(t, "session", "apply", "--store", store, "--user", "alice", "w", "--to", "proj", "--dry-run")
	if !strings.Contains(dry, "remove b.txt") || !strings.Contains(dry, "rename old.txt -> new.txt") {
		t.Errorf("apply --dry-run:\n%s", dry)
	}
	if got := treeSums(t, A("proj")); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("apply --dry-run changed proj/: %v", got)
	}
	adminOK(t, "session", "apply", "--store", store, "--user", "alice", "w", "--to", "proj")
	want := treeSums(t, W())
	got := treeSums(t, A("proj"))
	for p, sum := range want {
		if strings.HasPrefix(p, "snapshots/") || strings.HasPrefix(p, "uploads/") || strings.HasPrefix(p, "home/") || strings.HasPrefix(p, "trash/") || strings.HasPrefix(p, "output/") || strings.HasPrefix(p, "share/") || strings.HasPrefix(p, "groups/") {
			delete(want, p)
			continue
		}
		if got[p] != sum {
			t.Errorf("proj/%s after apply: %q, want %q", p, got[p], sum)
		}
	}
	if len(got) != len(want) {
		t.Errorf("proj/ after apply: %v, want %v", got, want)
	}
	if fi, err := os.Stat(A("proj", "newdir")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("proj/newdir after apply: %v %v", fi, err)
	}
	if trash := adminOK(t, "trash", "list", "--store", store, "--user", "alice"); !strings.Contains(trash, "b.txt") || !strings.Contains(trash, "a.txt") {
		t.Errorf("the trash lacks what apply removed or replaced:\n%s", trash)
	}
	if got := treeSums(t, A("snapshots", "base")); fmt.Sprint(got) != fmt.Sprint(baseSums) {
		t.Errorf("the snapshot changed: %v, want %v", got, baseSums)
	}
	adminOK(t, "session", "close", "--store", store, "--user", "alice", "w")
	if out := adminOK(t, "snapshot", "list", "--store", store, "--user", "alice"); strings.Contains(out, "start-w") {
		t.Errorf("the session's start snapshot outlived its close:\n%s", out)
	}
	s.Stop()
	fsckClean(t, store)
}

// TestSessionBase opens a session over a git checkout of the host
// (--base): git status in the session finds it clean; an edit, a delete
// and a rename show in git status and session diff --patch and nowhere
// in the checkout (its checksums the same after); a symlink to /etc is a
// symlink in the session, never followed by the copy; a relative or
// symlinked base is refused.
func TestSessionBase(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed")
	}
	base := filepath.Join(t.TempDir(), "checkout")
	mustMkdir(t, base, 0o755)
	mustMkdir(t, filepath.Join(base, "src"), 0o755)
	mustWrite(t, filepath.Join(base, "README"), []byte("hello\nworld\n"), 0o644)
	mustWrite(t, filepath.Join(base, "src", "main.go"), []byte("package main\n"), 0o644)
	mustWrite(t, filepath.Join(base, "old.txt"), []byte("old\n"), 0o644)
	if err := os.Symlink("/etc", filepath.Join(base, "etc")); err != nil {
		t.Fatal(err)
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
		}
		return string(out)
	}
	git(base, "init", "-q")
	git(base, "add", ".")
	git(base, "commit", "-q", "-m", "base")
	before := treeSums(t, base)

	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	for _, bad := range []string{"checkout", filepath.Join(base, "etc")} {
		if _, _, code := runCLI(t, "session", "open", "--store", store, "--user", "alice", "--id", "bad", "--base", bad); code == 0 {
			t.Errorf("session open --base %s succeeded", bad)
		}
	}
	s.sessionOpen(t, "alice", "b", "--base", base)
	W := func(e ...string) string { return s.In("alice@b", e...) }
	if out := git(W(), "status", "--porcelain"); out != "" {
		t.Errorf("git status in the session of a clean checkout:\n%s", out)
	}
	if target, err := os.Readlink(W("etc")); err != nil || target != "/etc" {
		t.Errorf("etc in the session: %q %v, want the symlink as it is", target, err)
	}

	mustWrite(t, W("README"), []byte("hello\nthere\n"), 0o644)
	wantOK(t, "rm src/main.go", os.Remove(W("src", "main.go")))
	wantOK(t, "mv old.txt new.txt", os.Rename(W("old.txt"), W("new.txt")))
	st := git(W(), "status", "--porcelain")
	for _, want := range []string{" M README", " D src/main.go", " D old.txt", "?? new.txt"} {
		if !strings.Contains(st, want) {
			t.Errorf("git status in the session lacks %q:\n%s", want, st)
		}
	}
	patch := adminOK(t, "session", "diff", "--store", store, "--user", "alice", "b", "--patch")
	for _, want := range []string{"-world\n+there\n", "--- a/src/main.go\n+++ /dev/null\n", "rename from old.txt\nrename to new.txt\n"} {
		if !strings.Contains(patch, want) {
			t.Errorf("session diff --patch lacks %q:\n%s", want, patch)
		}
	}
	if got := string(mustRead(t, W("snapshots", "start-b", "README"))); got != "hello\nworld\n" {
		t.Errorf("the session's start, by name in snapshots/: README reads %q", got)
	}
	if after := treeSums(t, base); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the checkout changed:\n%v\nwas\n%v", after, before)
	}
	if out := git(base, "status", "--porcelain"); out != "" {
		t.Errorf("git status of the checkout after the session's changes:\n%s", out)
	}
	adminOK(t, "session", "close", "--store", store, "--user", "alice", "b")
	s.Stop()
	fsckClean(t, store)
}
