package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shedfs/shedfs/daemon"
)

// instant returns a time for restore --at that no change shares: it
// sleeps a little before and after taking it.
func instant() string {
	time.Sleep(15 * time.Millisecond)
	at := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(15 * time.Millisecond)
	return at
}

// restoreAt runs shedfs restore --json (dry or not) and returns what it
// said it did.
func restoreAt(t *testing.T, store, user, at, p string, dry bool) daemon.RestoreAtResult {
	t.Helper()
	args := []string{"restore", "--json", "--store", store, "--user", user, "--at", at}
	if dry {
		args = append(args, "--dry-run")
	}
	out := adminOK(t, append(args, p)...)
	var res daemon.RestoreAtResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("restore --json: %v\n%s", err, out)
	}
	return res
}

// actionLines is a restore's actions, one line each, for comparing a
// dry run with the real run.
func actionLines(res daemon.RestoreAtResult) []string {
	out := []string{}
	for _, a := range res.Actions {
		out = append(out, strings.Join([]string{a.Action, a.From, a.Path}, " "))
	}
	return out
}

// restoreChecked runs a dry run and then the real restore, and fails the
// test unless both list the same changes.
func restoreChecked(t *testing.T, store, user, at, p string) daemon.RestoreAtResult {
	t.Helper()
	dry := restoreAt(t, store, user, at, p, true)
	real := restoreAt(t, store, user, at, p, false)
	if d, r := actionLines(dry), actionLines(real); !slices.Equal(d, r) {
		t.Errorf("restore --at %s %s: the dry run announced\n  %s\nthe real run did\n  %s", at, p,
			strings.Join(d, "\n  "), strings.Join(r, "\n  "))
	}
	return real
}

// treeOf lists the files and directories below dir: "d name/" for a
// directory, "f name content" for a file.
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".":
		case fi.IsDir():
			out = append(out, "d "+rel+"/")
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, "f "+rel+" "+string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// TestRestoreAtAfterRestore is issue 24's item 7: a restore to T1 after a
// directory was renamed at T0..T1 and removed, then a restore to T0,
// then to T1 again; each puts the tree as it was, and each dry run lists
// exactly what the real run does.
func TestRestoreAtAfterRestore(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", p...) }
	mustMkdir(t, A("p3"), 0o755)
	mustMkdir(t, A("p3", "docs"), 0o755)
	mustWrite(t, A("p3", "docs", "README"), []byte("r\n"), 0o644)
	t0 := instant()
	if err := os.Rename(A("p3", "docs"), A("p3", "documentation")); err != nil {
		t.Fatal(err)
	}
	t1 := instant()
	if out, code := tool(t, "rm", "-rf", A("p3", "documentation")); code != 0 {
		t.Fatalf("rm -rf: %s", out)
	}
	atT1 := []string{"d documentation/", "f documentation/README r\n"}
	atT0 := []string{"d docs/", "f docs/README r\n"}
	restoreChecked(t, s.Store, "alice", t1, "p3")
	if got := treeOf(t, A("p3")); !slices.Equal(got, atT1) {
		t.Errorf("after restore --at T1: %q, want %q", got, atT1)
	}
	restoreChecked(t, s.Store, "alice", t0, "p3")
	if got := treeOf(t, A("p3")); !slices.Equal(got, atT0) {
		t.Errorf("after restore --at T0: %q, want %q", got, atT0)
	}
	restoreChecked(t, s.Store, "alice", t1, "p3")
	if got := treeOf(t, A("p3")); !slices.Equal(got, atT1) {
		t.Errorf("after restore --at T1 again: %q, want %q", got, atT1)
	}
	// A restore to now changes nothing.
	if res := restoreChecked(t, s.Store, "alice", instant(), "p3"); len(res.Actions) != 0 {
		t.Errorf("restore to now: %q", actionLines(res))
	}
	fsckOnline(t, s)
}

// TestRestoreAtHardLink is issue 24's item 10: a version of a file with
// two names, made by an overwrite through one of them, is found by a
// restore of either name, and a restore of both puts them back as one
// file with two names.
func TestRestoreAtHardLink(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", p...) }
	mustMkdir(t, A("hl"), 0o755)
	mustWrite(t, A("hl", "hA"), []byte("linked\n"), 0o644)
	if err := os.Link(A("hl", "hA"), A("hl", "hB")); err != nil {
		t.Fatal(err)
	}
	at := instant()
	if out, code := tool(t, "sh", "-c", "echo new > "+A("hl", "hA")); code != 0 {
		t.Fatalf("echo new > hA: %s", out)
	}
	restoreChecked(t, s.Store, "alice", at, "hl/hA")
	if b := mustRead(t, A("hl", "hA")); string(b) != "linked\n" {
		t.Errorf("hA after restore --at of hA holds %q, want linked", b)
	}
	restoreChecked(t, s.Store, "alice", at, "hl/hB")
	if b := mustRead(t, A("hl", "hB")); string(b) != "linked\n" {
		t.Errorf("hB after restore --at of hB holds %q, want linked", b)
	}
	if inoOf(t, A("hl", "hA")) != inoOf(t, A("hl", "hB")) {
		t.Errorf("hA and hB are no longer one file after restoring both")
	}
	// And by the directory, after another overwrite through hB.
	if out, code := tool(t, "sh", "-c", "echo newer > "+A("hl", "hB")); code != 0 {
		t.Fatalf("echo newer > hB: %s", out)
	}
	restoreChecked(t, s.Store, "alice", at, "hl")
	want := []string{"f hA linked\n", "f hB linked\n"}
	if got := treeOf(t, A("hl")); !slices.Equal(got, want) {
		t.Errorf("hl after restore --at: %q, want %q", got, want)
	}
	if inoOf(t, A("hl", "hA")) != inoOf(t, A("hl", "hB")) {
		t.Errorf("hA and hB are not one file after restoring hl")
	}
	fsckOnline(t, s)
}

// TestRestoreAtInterrupted is the second half of issue 24's item 7: a
// large restore killed with SIGKILL half way; after the restart a dry
// run announces exactly the changes the real run then makes, and the
// tree is as it was.
func TestRestoreAtInterrupted(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	proj := s.In("alice", "proj")
	makeKeptTree(t, proj, 1500)
	if err := os.Rename(filepath.Join(proj, "d1"), filepath.Join(proj, "d1x")); err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(t.TempDir(), "ref")
	if out, code := tool(t, "cp", "-a", proj, ref); code != 0 {
		t.Fatalf("cp -a: %s", out)
	}
	at := instant()
	if err := os.Rename(filepath.Join(proj, "d1x"), filepath.Join(proj, "d1y")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(proj, "d0", "e0", "f000.txt"), []byte("overwritten\n"), 0o644)
	if out, code := tool(t, "rm", "-rf", filepath.Join(proj, "d2"), filepath.Join(proj, "d3")); code != 0 {
		t.Fatalf("rm -rf: %s", out)
	}
	restore := exec.Command(shedfsBin, "restore", "--store", store, "--user", "alice", "--at", at, "proj")
	restore.Env = childEnv(nil)
	if err := restore.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed as soon as the restore shows (or after a second at most):
	// how much it did by then does not matter, only what follows.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(proj, "d2")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	killServe(s)
	restore.Wait()
	fsckClean(t, store)
	s2 := startServe(t, store, "alice")
	res := restoreChecked(t, store, "alice", at, "proj")
	t.Logf("after the kill: %d changes left", len(res.Actions))
	if out, code := tool(t, "diff", "-r", "--no-dereference", ref, s2.In("alice", "proj")); code != 0 {
		t.Errorf("diff -r after the interrupted restore and another: %s", truncate([]byte(out), 2000))
	}
	if res := restoreAt(t, store, "alice", at, "proj", true); len(res.Actions) != 0 {
		t.Errorf("a third restore would still change %d things: %q", len(res.Actions), actionLines(res)[:min(5, len(res.Actions))])
	}
	fsckOnline(t, s2)
}

// TestRestoreAtSwap: files that took each other's names, and a file
// that took the name of a directory, go back: the plan breaks the cycle
// through the trash and the dry run still lists exactly what is done.
func TestRestoreAtSwap(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", append([]string{"sw"}, p...)...) }
	mustMkdir(t, A(), 0o755)
	mustWrite(t, A("a"), []byte("A\n"), 0o644)
	mustWrite(t, A("b"), []byte("B\n"), 0o600)
	mustMkdir(t, A("x"), 0o755)
	mustWrite(t, A("x", "f"), []byte("F\n"), 0o644)
	at := instant()
	for _, mv := range [][2]string{{"a", "t"}, {"b", "a"}, {"t", "b"}, {"x/f", "y"}} {
		if err := os.Rename(A(mv[0]), A(mv[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(A("x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(A("y"), A("x")); err != nil {
		t.Fatal(err)
	}
	restoreChecked(t, s.Store, "alice", at, "sw")
	want := []string{"f a A\n", "f b B\n", "d x/", "f x/f F\n"}
	if got := treeOf(t, A()); !slices.Equal(got, want) {
		t.Errorf("after restore --at: %q, want %q", got, want)
	}
	if fi, err := os.Stat(A("b")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("b: %v, %v; want mode 0600 (the same file back)", fi.Mode(), err)
	}
	fsckOnline(t, s)
}
