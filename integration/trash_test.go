package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/daemon"
)

// trashNames lists dir (inside a view's trash/) with the names of one
// original file: those starting with base + "@" (every kept file when
// base is empty), in time order. A directory of trash/ exists while it
// holds kept files: one that is gone (its last kept file restored or
// purged) holds none.
func trashNames(t *testing.T, dir, base string) []string {
	t.Helper()
	// A directory of trash/ goes with the last file kept in it, so it may
	// go between a stat and the listing: gone is empty.
	des, err := os.ReadDir(dir)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	var out []string
	for _, de := range des {
		n := de.Name()
		if base == "" && strings.Contains(n, "@") || base != "" && strings.HasPrefix(n, base+"@") {
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
	// A shorter content, written through a descriptor opened before.
	long, err := os.OpenFile(A("long"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Close()
	if _, err := long.WriteAt([]byte("a long first content\n"), 0); err != nil {
		t.Fatal(err)
	}
	if out, code := tool(t, "sh", "-c", "echo short > "+A("long")); code != 0 {
		t.Fatalf("echo short > long: %s", out)
	}
	if b := mustRead(t, A("long")); string(b) != "short\n" {
		t.Errorf("long holds %q after a shorter overwrite", b)
	}
	if fi, err := long.Stat(); err != nil || fi.Size() != 6 {
		t.Errorf("fstat of the old descriptor: %v, %v", fi.Size(), err)
	}
	if kept := trashNames(t, s.In("alice", "trash", "groups", "team-alpha"), "long"); len(kept) != 1 ||
		string(mustRead(t, s.In("alice", "trash", "groups", "team-alpha", kept[0]))) != "a long first content\n" {
		t.Errorf("the long content is not kept: %v", kept)
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

// makeKeptTree writes a small tree of files (nested directories, a symlink)
// under dir.
func makeKeptTree(t *testing.T, dir string, files int) {
	t.Helper()
	for i := 0; i < files; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%4), fmt.Sprintf("e%d", i%3))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(sub, fmt.Sprintf("f%03d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), i+1)), 0o644)
	}
	if err := os.Symlink("d0/e0/f000.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
}

// trashList runs shedfs trash list --json.
func trashList(t *testing.T, args ...string) []daemon.TrashEntry {
	t.Helper()
	out := adminOK(t, append([]string{"trash", "list", "--json"}, args...)...)
	var list []daemon.TrashEntry
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("trash list --json: %v\n%s", err, out)
	}
	return list
}

// TestTrashRmRfRestore: bob's rm -rf of a tree in share/ keeps every
// file; shedfs trash restore puts the tree back byte for byte, parent
// directories made as needed, and alice's view sees it at once.
func TestTrashRmRfRestore(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	proj := s.In("bob", "share", "proj")
	makeKeptTree(t, proj, 40)
	ref := filepath.Join(t.TempDir(), "ref")
	if out, code := tool(t, "cp", "-a", proj, ref); code != 0 {
		t.Fatalf("cp -a: %s", out)
	}
	if out, code := tool(t, "rm", "-rf", proj); code != 0 {
		t.Fatalf("rm -rf: %s", out)
	}
	list := trashList(t, "--store", s.Store, "--user", "bob", "--path", "share/proj")
	if len(list) != 41 {
		t.Fatalf("trash list shows %d entries, want 41", len(list))
	}
	args := []string{"trash", "restore", "--store", s.Store, "--user", "bob"}
	for _, e := range list {
		if e.By != "bob" || e.Why != "unlink" || e.Holder != "share" {
			t.Errorf("entry %+v", e)
		}
		args = append(args, e.Entry)
	}
	adminOK(t, args...)
	if out, code := tool(t, "diff", "-r", "--no-dereference", ref, s.In("alice", "share", "proj")); code != 0 {
		t.Errorf("diff -r after restore: %s", out)
	}
	if got := trashList(t, "--store", s.Store, "--user", "bob"); len(got) != 0 {
		t.Errorf("trash after restore: %d entries", len(got))
	}
	fsckOnline(t, s)
}

// fsckOnline checks the store of a running serve daemon, stopping it.
func fsckOnline(t *testing.T, s *serveDaemon) {
	t.Helper()
	s.Stop()
	fsckClean(t, s.Store)
}

// TestTrashEviction: with alice's quota full of her own trash, writes go
// on succeeding while trash lasts, the oldest kept files going first; df
// shows the trash as free.
func TestTrashEviction(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	setupTeam(t, store)
	adminOK(t, "quota", "set", "user:alice", "--bytes", "1MiB", "--store", store)
	s := startServe(t, store, "alice", "bob", "carol")
	A := func(p ...string) string { return s.In("alice", p...) }
	chunk := make([]byte, 300<<10)
	for _, name := range []string{"a", "b", "c"} {
		mustWrite(t, A(name), chunk, 0o644)
		if err := os.Remove(A(name)); err != nil {
			t.Fatal(err)
		}
	}
	if got := trashNames(t, s.In("alice", "trash"), ""); len(got) != 3 {
		t.Fatalf("trash holds %v", got)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(A(), &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bavail) * st.Bsize; free < 900<<10 {
		t.Errorf("df shows %d bytes free with only trash charged, want the trash counted as free", free)
	}
	// 600 KiB more needs two of the three kept files: a and b go.
	mustWrite(t, A("big"), make([]byte, 600<<10), 0o644)
	got := trashNames(t, s.In("alice", "trash"), "")
	if len(got) != 1 || !strings.HasPrefix(got[0], "c@") {
		t.Fatalf("after the big write, trash holds %v, want c only", got)
	}
	// Each eviction is in the audit trail, by the daemon.
	waitTrail(t, store, 5*time.Second, "two trash_evict records of alice's zone", func(recs []trailRecord) bool {
		n := 0
		for _, r := range recs {
			if r.Op == "trash_evict" && r.User == "-" && r.Zone == "private:alice" {
				n++
			}
		}
		return n == 2
	}, "--op", "trash_evict")
	// Past what the trash can give: EDQUOT as before.
	err := os.WriteFile(A("huge"), make([]byte, 600<<10), 0o644)
	wantErrno(t, "alice: write past quota and trash", err, syscall.EDQUOT)
	out := adminOK(t, "quota", "show", "user:alice", "--store", store)
	t.Logf("quota show:\n%s", out)
}

// TestTrashRetention: kept files older than the retention go.
func TestTrashRetention(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	adminOK(t, "trash", "retention", "2s", "--store", s.Store)
	mustWrite(t, s.In("alice", "old"), []byte("x"), 0o644)
	if err := os.Remove(s.In("alice", "old")); err != nil {
		t.Fatal(err)
	}
	if got := trashNames(t, s.In("alice", "trash"), "old"); len(got) != 1 {
		t.Fatalf("trash holds %v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(trashNames(t, s.In("alice", "trash"), "old")) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("kept file still there 10 s after a 2 s retention")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Retention 0 turns the trash off: a removed file goes at once.
	adminOK(t, "trash", "retention", "0", "--store", s.Store)
	mustWrite(t, s.In("alice", "gone"), []byte("x"), 0o644)
	if err := os.Remove(s.In("alice", "gone")); err != nil {
		t.Fatal(err)
	}
	if got := trashNames(t, s.In("alice", "trash"), "gone"); len(got) != 0 {
		t.Errorf("trash off, yet it holds %v", got)
	}
	fsckOnline(t, s)
}

// TestTrashCrashDuringRmRf kills the daemon with SIGKILL in the middle of
// an rm -rf: after fsck the store is clean, and every file is either
// still in place or in the trash, none lost.
func TestTrashCrashDuringRmRf(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice")
	makeKeptTree(t, v.Path("tree"), 400)
	var want []string
	filepath.WalkDir(v.Path("tree"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(v.Path(), p)
			want = append(want, rel)
		}
		return nil
	})
	unix.Sync()
	// fsync of the view root makes every change so far durable.
	if f, err := os.Open(v.Path()); err == nil {
		f.Sync()
		f.Close()
	}
	rm := exec.Command("rm", "-rf", v.Path("tree"))
	if err := rm.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	v.Kill()
	rm.Wait()
	out, errOut, code := runCLI(t, "fsck", "--store", store)
	if code != 0 {
		t.Fatalf("fsck after the crash: exit %d\n%s%s", code, out, errOut)
	}
	fsckClean(t, store)
	list := trashList(t, "--store", store, "--user", "alice")
	inTrash := map[string]bool{}
	for _, e := range list {
		inTrash[e.Path] = true
	}
	v2 := startView(t, store, "alice")
	lost := 0
	for _, p := range want {
		if _, err := os.Lstat(v2.Path(p)); err == nil || inTrash[p] {
			continue
		}
		lost++
		if lost < 5 {
			t.Errorf("%s is neither in place nor in the trash", p)
		}
	}
	t.Logf("%d files: %d kept in the trash, %d lost", len(want), len(list), lost)
	if lost > 0 {
		t.Errorf("%d files lost", lost)
	}
}

// TestRestoreAt: after bob's rm -rf of a tree in share/ and other changes
// (a file overwritten, one made, one renamed, a directory moved), shedfs
// restore --at puts the tree back as it was, byte for byte; --dry-run
// first lists the changes and makes none; the restore itself can be
// undone (what it replaced is in the trash).
func TestRestoreAt(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	proj := s.In("bob", "share", "proj")
	makeKeptTree(t, proj, 24)
	ref := filepath.Join(t.TempDir(), "ref")
	if out, code := tool(t, "cp", "-a", proj, ref); code != 0 {
		t.Fatalf("cp -a: %s", out)
	}
	time.Sleep(20 * time.Millisecond)
	at := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(20 * time.Millisecond)
	mustWrite(t, filepath.Join(proj, "d0", "e0", "f000.txt"), []byte("overwritten\n"), 0o644)
	mustWrite(t, filepath.Join(proj, "new.txt"), []byte("new\n"), 0o644)
	if err := os.Rename(filepath.Join(proj, "d1", "e1", "f001.txt"), filepath.Join(proj, "moved.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(proj, "d2"), filepath.Join(proj, "d2x")); err != nil {
		t.Fatal(err)
	}
	if out, code := tool(t, "rm", "-rf", proj); code != 0 {
		t.Fatalf("rm -rf: %s", out)
	}
	dry := adminOK(t, "restore", "--store", s.Store, "--user", "bob", "--at", at, "--dry-run", "share/proj")
	if !strings.Contains(dry, "would restore share/proj/d0/e0/f000.txt") {
		t.Errorf("dry run:\n%s", dry)
	}
	if _, err := os.Stat(proj); !os.IsNotExist(err) {
		t.Fatalf("dry run changed the view: %v", err)
	}
	out := adminOK(t, "restore", "--store", s.Store, "--user", "bob", "--at", at, "share/proj")
	t.Logf("restore:\n%s", out)
	if out, code := tool(t, "diff", "-r", "--no-dereference", ref, s.In("alice", "share", "proj")); code != 0 {
		t.Errorf("diff -r after restore --at: %s", out)
	}
	// What came back from the trash is audited as such (issue 27: the op
	// was admin_restore_restore).
	waitTrail(t, s.Store, 5*time.Second, "admin_restore_from_trash records, no admin_restore_restore", func(recs []trailRecord) bool {
		from := 0
		for _, r := range recs {
			switch r.Op {
			case "admin_restore_restore":
				return false
			case "admin_restore_from_trash":
				from++
			}
		}
		return from > 0
	})
	fsckOnline(t, s)
}

// noTrashStore makes a store with user and the trash off, for tests of
// what a delete frees at once (an unlinked file open meanwhile becomes an
// orphan, reclaimed at its last close or by fsck).
func noTrashStore(t *testing.T, user string) string {
	t.Helper()
	store := newStore(t)
	adminOK(t, "user", "add", user, "--store", store)
	adminOK(t, "trash", "retention", "0", "--store", store)
	return store
}

// TestTrashSeenAtOnce: trash/ never serves a stale answer — a name looked
// up as missing is found as soon as a delete keeps it (no negative entry
// kept for an hour), and a member removed from a group no longer sees the
// group's kept files, though nothing in the trash changed.
func TestTrashSeenAtOnce(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", p...) }
	if _, err := os.Stat(A("trash", "zq")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("trash/zq before: %v", err)
	}
	mustMkdir(t, A("zq"), 0o755)
	mustWrite(t, A("zq", "file"), []byte("1\n"), 0o644)
	if out, code := tool(t, "rm", "-rf", A("zq")); code != 0 {
		t.Fatalf("rm -rf: %s", out)
	}
	if names := trashNames(t, A("trash", "zq"), "file"); len(names) != 1 {
		t.Errorf("trash/zq after rm -rf lists %v, want file at once", names)
	}

	B := func(p ...string) string { return s.In("bob", p...) }
	mustWrite(t, B("groups", "team-alpha", "g.txt"), []byte("team\n"), 0o644)
	if err := os.Remove(B("groups", "team-alpha", "g.txt")); err != nil {
		t.Fatal(err)
	}
	if names := trashNames(t, B("trash", "groups", "team-alpha"), "g.txt"); len(names) != 1 {
		t.Fatalf("bob's trash/groups/team-alpha lists %v", names)
	}
	adminOK(t, "group", "remove-member", "team-alpha", "bob", "--store", s.Store)
	if _, err := os.Stat(B("trash", "groups", "team-alpha")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("bob's trash/groups/team-alpha after his removal from the group: %v, want ENOENT at once", err)
	}
	if names := listNames(t, B("trash")); slices.Contains(names, "groups") {
		if g := listNames(t, B("trash", "groups")); slices.Contains(g, "team-alpha") {
			t.Errorf("bob's trash/groups still lists team-alpha: %v", g)
		}
	}
	fsckOnline(t, s)
}

// TestTruncateAtInodeLimit: a truncate with no inode left for the
// version, and nothing in the trash to evict, goes on without keeping the
// previous content, and the audit trail says so (version_not_kept); with
// a kept file to evict, the version is kept as ever.
func TestTruncateAtInodeLimit(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	setupTeam(t, store)
	s := startServe(t, store, "alice")
	A := func(p ...string) string { return s.In("alice", p...) }
	mustWrite(t, A("f"), []byte("first content\n"), 0o644)
	mustWrite(t, A("old"), []byte("old\n"), 0o644)
	if err := os.Remove(A("old")); err != nil {
		t.Fatal(err)
	}
	atLimit := func() {
		t.Helper()
		var q []struct {
			Used struct{ Inodes int64 } `json:"used"`
		}
		if err := json.Unmarshal([]byte(adminOK(t, "quota", "show", "user:alice", "--json", "--store", store)), &q); err != nil || len(q) != 1 {
			t.Fatalf("quota show: %v %+v", err, q)
		}
		adminOK(t, "quota", "set", "user:alice", "--inodes", fmt.Sprint(q[0].Used.Inodes), "--store", store)
	}
	atLimit()
	// The kept "old" goes for the version of f.
	mustWrite(t, A("f"), []byte("second\n"), 0o644)
	if got := trashNames(t, A("trash"), "f"); len(got) != 1 {
		t.Errorf("after the first overwrite at the limit, trash holds %v, want f's version", got)
	}
	// Now the only kept file is f's own version, evicted for the next.
	mustWrite(t, A("f"), []byte("third\n"), 0o644)
	if got := trashNames(t, A("trash"), "f"); len(got) != 1 {
		t.Errorf("after the second overwrite, trash holds %v, want one version of f", got)
	}
	// An empty trash at the limit: nothing to evict for the version.
	for _, n := range trashNames(t, A("trash"), "f") {
		if err := os.Remove(filepath.Join(A("trash"), n)); err != nil {
			t.Fatal(err)
		}
	}
	atLimit()
	mustWrite(t, A("f"), []byte("fourth\n"), 0o644)
	if got := mustRead(t, A("f")); string(got) != "fourth\n" {
		t.Errorf("f holds %q", got)
	}
	waitTrail(t, store, 5*time.Second, "a version_not_kept record of f", func(recs []trailRecord) bool {
		for _, r := range recs {
			if r.Op == "version_not_kept" && r.User == "alice" && r.Path == "/f" {
				return true
			}
		}
		return false
	}, "--op", "version_not_kept")
}
