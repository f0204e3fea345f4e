package integration

import (
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The FLUSH of close(2) holds a written file's size, times and digest in
// the daemon, and the kernel's later RELEASE persists them in one commit
// (docs/design.md, "The callback path"; docs/performance.md, "One commit per file"). These tests keep a
// second descriptor open, so that the first close is a FLUSH whose
// RELEASE cannot persist anything yet.

// commits is the store's commit counter as the daemon at addr exports it.
func commits(t *testing.T, addr string) float64 {
	t.Helper()
	return scrape(t, addr).value(t, "shedfs_store_commits_total")
}

// TestCloseOneCommit: create, write, a tar-like futimens and fchmod on the
// open file, and close(2) cost one commit (the create) by the time close
// returns; the release of the last descriptor adds the one that stores
// them. Main's code committed at the flush, the fchmod and the futimens
// as well (4 by the first close).
func TestCloseOneCommit(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v, addr := startObservedView(t, store, "--no-audit")
	c0 := commits(t, addr)
	f, err := os.OpenFile(v.Path("f"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello, world\n")); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	ts := []syscall.Timespec{{Nsec: unix.UTIME_OMIT}, syscall.NsecToTimespec(mtime.UnixNano())}
	if err := utimensFd(f, ts); err != nil {
		t.Fatalf("futimens: %v", err)
	}
	if err := f.Chmod(0o644); err != nil {
		t.Fatal(err)
	}
	keep, err := os.Open(v.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := commits(t, addr) - c0; got != 1 {
		t.Errorf("commits by create+write+futimens+fchmod+close with the file still open: %v, want 1 (the create)", got)
	}
	st, err := os.Stat(v.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 13 || !st.ModTime().Equal(mtime) || st.Mode().Perm() != 0o644 {
		t.Errorf("stat after close: size %d, mtime %v, mode %v; want 13, %v, 0644", st.Size(), st.ModTime(), st.Mode().Perm(), mtime)
	}
	keep.Close()
	deadline := time.Now().Add(3 * time.Second)
	for commits(t, addr)-c0 < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if got := commits(t, addr) - c0; got != 2 {
		t.Errorf("commits once released: %v, want 2 (the create, the release)", got)
	}
	// What the release stored is what the views saw.
	v.Stop()
	v2 := startView(t, store, "alice")
	st, err = os.Stat(v2.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 13 || !st.ModTime().Equal(mtime) || st.Mode().Perm() != 0o644 {
		t.Errorf("stat after a restart: size %d, mtime %v, mode %v; want 13, %v, 0644", st.Size(), st.ModTime(), st.Mode().Perm(), mtime)
	}
	if got := string(mustRead(t, v2.Path("f"))); got != "hello, world\n" {
		t.Errorf("content after a restart: %q", got)
	}
}

// TestCloseSeenByOtherViews: right after close(2), with the file still
// open (no release yet), another view's stat shows the new size, mtime
// and mode, as the writer's does; so do both once it is released.
func TestCloseSeenByOtherViews(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A, B := s.In("alice", "share", "f"), s.In("bob", "share", "f")
	mustWrite(t, A, []byte("1"), 0o644)
	if _, err := os.Stat(B); err != nil { // bob's kernel holds it now
		t.Fatal(err)
	}
	f, err := os.OpenFile(A, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	keep, err := os.Open(A)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	data := make([]byte, 10000)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2011, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(A, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o640); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	same := func(what, path string) {
		t.Helper()
		atOnce(t, what, func() bool {
			st, err := os.Stat(path)
			return err == nil && st.Size() == 10000 && st.ModTime().Equal(mtime) && st.Mode().Perm() == 0o640
		})
	}
	same("alice's stat after close", A)
	same("bob's stat after alice's close", B)
	keep.Close()
	time.Sleep(100 * time.Millisecond)
	same("alice's stat after the release", A)
	same("bob's stat after the release", B)
}

// TestCloseHeldCrash: a file fsync'd then closed keeps its size through
// kill -9, and so does a file closed but not released (still open) at
// the crash, whose record the crash recovery repairs from its blob as
// it does for any file open at a crash; fsck finds the store clean.
func TestCloseHeldCrash(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice")
	f, err := os.Create(v.Path("synced"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync: %v", err)
	}
	keep1, err := os.Open(v.Path("synced"))
	if err != nil {
		t.Fatal(err)
	}
	defer keep1.Close()
	f.Close()
	g, err := os.Create(v.Path("held"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Write(make([]byte, 7000)); err != nil {
		t.Fatal(err)
	}
	keep2, err := os.Open(v.Path("held"))
	if err != nil {
		t.Fatal(err)
	}
	defer keep2.Close()
	g.Close()
	syncDir(t, v.Dir)
	v.Kill()
	keep1.Close()
	keep2.Close()

	v2 := startView(t, store, "alice")
	for name, want := range map[string]int64{"synced": 5000, "held": 7000} {
		st, err := os.Stat(v2.Path(name))
		if err != nil {
			t.Errorf("%s after kill -9: %v", name, err)
			continue
		}
		if st.Size() != want {
			t.Errorf("%s after kill -9: size %d, want %d", name, st.Size(), want)
		}
	}
	v2.Stop()
	fsckClean(t, store)
}

// utimensFd is futimens(2), which tar calls on the file it extracts
// before closing it.
func utimensFd(f *os.File, ts []syscall.Timespec) error {
	_, _, e := syscall.Syscall6(syscall.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
