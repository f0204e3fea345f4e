package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// trashNames lists dir (inside a view's trash/) with the names of one
// original file: those starting with base + "@", in time order.
func trashNames(t *testing.T, dir, base string) []string {
	t.Helper()
	var out []string
	for _, n := range listNames(t, dir) {
		if strings.HasPrefix(n, base+"@") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// TestTrashVersions: three overwrites of one group file by ">" and by
// "sed -i" each keep the previous content, readable in trash/ of every
// member's view; carol, outside the group, sees none of it.
func TestTrashVersions(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", append([]string{"groups", "team-alpha"}, p...)...) }
	mustWrite(t, A("f"), []byte("v1\n"), 0o644)
	for _, v := range []string{"v2", "v3", "v4"} {
		if out, code := tool(t, "sh", "-c", "echo "+v+" > "+A("f")); code != 0 {
			t.Fatalf("echo %s > f: %s", v, out)
		}
	}
	trashDir := s.In("bob", "trash", "groups", "team-alpha")
	got := trashNames(t, trashDir, "f")
	if len(got) != 3 {
		t.Fatalf("bob's trash lists %v, want 3 versions of f", got)
	}
	for i, want := range []string{"v1\n", "v2\n", "v3\n"} {
		if b := mustRead(t, filepath.Join(trashDir, got[i])); string(b) != want {
			t.Errorf("version %d (%s) holds %q, want %q", i, got[i], b, want)
		}
	}
	if out, code := tool(t, "diff", filepath.Join(trashDir, got[2]), s.In("alice", "trash", "groups", "team-alpha", got[2])); code != 0 {
		t.Errorf("diff of one version in two views: %s", out)
	}
	if b := mustRead(t, A("f")); string(b) != "v4\n" {
		t.Errorf("f holds %q", b)
	}
	// sed -i writes a new file and renames it over f: the old one goes.
	for _, v := range []string{"v5", "v6", "v7"} {
		if out, code := tool(t, "sed", "-i", "s/v[0-9]/"+v+"/", A("f")); code != 0 {
			t.Fatalf("sed -i: %s", out)
		}
	}
	got = trashNames(t, trashDir, "f")
	if len(got) != 6 {
		t.Fatalf("after sed -i, trash lists %v, want 6 versions", got)
	}
	for i, want := range []string{"v4\n", "v5\n", "v6\n"} {
		if b := mustRead(t, filepath.Join(trashDir, got[3+i])); string(b) != want {
			t.Errorf("sed version %d holds %q, want %q", i, b, want)
		}
	}
	if out, code := tool(t, "ls", "-l", trashDir); code != 0 || !strings.Contains(out, "f@") {
		t.Errorf("ls -l trash: %s", out)
	}
	// Nothing can be written or created in trash/.
	wantErrno(t, "bob: write a kept file", openWrite(filepath.Join(trashDir, got[0]), os.O_WRONLY), syscall.EACCES)
	wantErrno(t, "bob: truncate a kept file", os.Truncate(filepath.Join(trashDir, got[0]), 0), syscall.EACCES)
	wantErrno(t, "bob: create in trash", openWrite(filepath.Join(trashDir, "new"), os.O_CREATE|os.O_EXCL), syscall.EACCES)
	wantErrno(t, "bob: mkdir in trash", os.Mkdir(s.In("bob", "trash", "x"), 0o755), syscall.EACCES)
	bobF := s.In("bob", "groups", "team-alpha", "f")
	wantErrno(t, "bob: mv into trash", os.Rename(bobF, filepath.Join(trashDir, "f")), syscall.EACCES)
	// The kernel itself refuses to link an inode without links (ENOENT);
	// the daemon would refuse too.
	if err := os.Link(filepath.Join(trashDir, got[0]), bobF+"2"); err == nil {
		t.Error("bob: link of a kept file back succeeded")
	}
	// carol is not in team-alpha: her trash has none of it.
	if _, err := os.Stat(s.In("carol", "trash", "groups")); !os.IsNotExist(err) {
		t.Errorf("carol: stat trash/groups: %v, want not found", err)
	}
	if got := listNames(t, s.In("carol", "trash")); len(got) != 0 {
		t.Errorf("carol's trash lists %v", got)
	}
}

// TestTrashRestoreAndPurge: mv out of trash/ restores a removed file (the
// name it replaces goes to the trash in turn), across zones it is EXDEV,
// rm purges; an owner-mode file deleted by its owner can be restored and
// purged by the owner only.
func TestTrashRestoreAndPurge(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	B := func(p ...string) string { return s.In("bob", append([]string{"share"}, p...)...) }
	mustMkdir(t, B("reports"), 0o755)
	mustWrite(t, B("reports", "q3.csv"), []byte("a,b\n1,2\n"), 0o644)
	if err := os.Remove(B("reports", "q3.csv")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(B("reports", "q3.csv")); !os.IsNotExist(err) {
		t.Fatalf("q3.csv still there: %v", err)
	}
	td := s.In("bob", "trash", "share", "reports")
	kept := trashNames(t, td, "q3.csv")
	if len(kept) != 1 {
		t.Fatalf("trash lists %v", kept)
	}
	// Across zones: EXDEV (mv would copy, which trash/ refuses).
	wantErrno(t, "bob: rename trash/share/... to his private tree", os.Rename(filepath.Join(td, kept[0]), s.In("bob", "q3.csv")), syscall.EXDEV)
	mustWrite(t, B("reports", "q3.csv"), []byte("new\n"), 0o644)
	if out, code := tool(t, "mv", filepath.Join(td, kept[0]), B("reports", "q3.csv")); code != 0 {
		t.Fatalf("mv out of trash: %s", out)
	}
	if b := mustRead(t, s.In("alice", "share", "reports", "q3.csv")); string(b) != "a,b\n1,2\n" {
		t.Errorf("restored q3.csv holds %q", b)
	}
	kept = trashNames(t, td, "q3.csv")
	if len(kept) != 1 {
		t.Fatalf("after restore, trash lists %v, want the replaced file", kept)
	}
	if b := mustRead(t, filepath.Join(td, kept[0])); string(b) != "new\n" {
		t.Errorf("replaced file holds %q", b)
	}
	if out, code := tool(t, "rm", filepath.Join(td, kept[0])); code != 0 {
		t.Fatalf("rm in trash: %s", out)
	}
	if got := trashNames(t, td, "q3.csv"); len(got) != 0 {
		t.Errorf("after purge, trash lists %v", got)
	}

	// An owner-mode file deleted by its owner: only the owner restores it.
	mustWrite(t, B("mine"), []byte("bob's\n"), 0o644)
	if err := unix.Setxattr(B("mine"), "user.shedfs.mode", []byte("owner"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(B("mine")); err != nil {
		t.Fatal(err)
	}
	kept = trashNames(t, s.In("alice", "trash", "share"), "mine")
	if len(kept) != 1 {
		t.Fatalf("alice's trash lists %v", kept)
	}
	wantErrno(t, "alice: restore bob's owner file", os.Rename(s.In("alice", "trash", "share", kept[0]), s.In("alice", "share", "mine")), syscall.EPERM)
	wantErrno(t, "alice: purge bob's owner file", os.Remove(s.In("alice", "trash", "share", kept[0])), syscall.EPERM)
	wantOK(t, "bob: restore his owner file", os.Rename(s.In("bob", "trash", "share", kept[0]), B("mine")))
	if b := mustRead(t, s.In("carol", "share", "mine")); string(b) != "bob's\n" {
		t.Errorf("restored mine holds %q", b)
	}
}
