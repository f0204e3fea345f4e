package integration

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// expectMountRefused runs `shedfs args... mnt` and checks that it exits
// non-zero with exactly one line on stderr, without mounting anything. It
// returns that stderr.
func expectMountRefused(t *testing.T, what, mnt string, env []string, args ...string) string {
	t.Helper()
	v := launchView(t, mnt, env, args)
	code, mounted := v.waitExitOrMount(mountTimeout)
	if mounted {
		t.Errorf("%s: shedfs mounted %s, want a refusal\nstderr:\n%s", what, mnt, v.Stderr())
		v.Stop()
		return v.Stderr()
	}
	if code == 0 {
		t.Errorf("%s: shedfs exited 0, want a non-zero exit\nstderr:\n%s", what, v.Stderr())
	}
	checkOneLine(t, what, v.Stderr())
	t.Logf("%s: exit %d: %s", what, code, strings.TrimSpace(v.Stderr()))
	return v.Stderr()
}

// TestLongNames checks that a 256-byte name is refused with ENAMETOOLONG by
// every call that creates a name, and that 255 bytes work.
func TestLongNames(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	src := v.Path("src")
	mustWrite(t, src, []byte("source"), 0o644)
	long := v.Path(strings.Repeat("x", 256))
	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, unix.ENAMETOOLONG) {
			t.Errorf("%s with a 256-byte name: %v, want ENAMETOOLONG", what, err)
		}
	}
	_, err := os.OpenFile(long, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	want("create", err)
	want("mkdir", os.Mkdir(long, 0o755))
	want("rename target", os.Rename(src, long))
	want("symlink", os.Symlink("src", long))
	want("link", os.Link(src, long))
	want("mkfifo", unix.Mkfifo(long, 0o644))
	_, err = os.Lstat(long)
	want("lstat", err)
	if got := string(mustRead(t, src)); got != "source" {
		t.Errorf("src after the refused rename: %q", got)
	}

	ok := strings.Repeat("y", 255)
	sub := v.Path("ok")
	mustMkdir(t, sub, 0o755)
	p := func(prefix string) string { return filepath.Join(sub, prefix+ok[len(prefix):]) }
	mustWrite(t, p("f"), []byte("f"), 0o644)
	if err := os.Mkdir(p("d"), 0o755); err != nil {
		t.Errorf("mkdir with a 255-byte name: %v", err)
	}
	if err := os.Symlink("src", p("s")); err != nil {
		t.Errorf("symlink with a 255-byte name: %v", err)
	}
	if err := os.Link(src, p("l")); err != nil {
		t.Errorf("link with a 255-byte name: %v", err)
	}
	if err := os.Rename(src, p("r")); err != nil {
		t.Errorf("rename to a 255-byte name: %v", err)
	}
	entries, err := os.ReadDir(sub)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range entries {
		got[e.Name()] = true
	}
	for _, prefix := range []string{"f", "d", "s", "l", "r"} {
		if name := filepath.Base(p(prefix)); !got[name] {
			t.Errorf("readdir does not list the 255-byte name starting with %q", prefix)
		}
	}
	if data, err := os.ReadFile(p("r")); err != nil || string(data) != "source" {
		t.Errorf("read the file renamed to a 255-byte name: %q, %v", data, err)
	}
	v.Stop()
	fsckClean(t, v.Store)
}

// TestXattrLimits checks that a value over 64 KiB is refused with E2BIG and
// leaves the other attributes of the file readable.
func TestXattrLimits(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	f := v.Path("f")
	mustWrite(t, f, []byte("data"), 0o644)
	if err := unix.Setxattr(f, "user.ok", []byte("value"), 0); err != nil {
		t.Fatalf("setxattr user.ok: %v", err)
	}
	big := bytes.Repeat([]byte("z"), 64<<10+1)
	if err := unix.Setxattr(f, "user.big", big, 0); !errors.Is(err, unix.E2BIG) {
		t.Errorf("setxattr of %d bytes: %v, want E2BIG", len(big), err)
	}
	buf := make([]byte, 128)
	if n, err := unix.Getxattr(f, "user.ok", buf); err != nil || string(buf[:n]) != "value" {
		t.Errorf("getxattr user.ok after the refused one: %q, %v", buf[:max(n, 0)], err)
	}
	if _, err := unix.Getxattr(f, "user.big", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("getxattr user.big after a refused set: %v, want ENODATA", err)
	}
	v.Stop()
	fsckClean(t, v.Store)
}

// TestMountStoreIsFile: a store path naming a regular file is refused.
func TestMountStoreIsFile(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	mustWrite(t, store, []byte("not a store\n"), 0o600)
	expectMountRefused(t, "store is a regular file", newMountpoint(t), nil,
		"mount", "--store", store, "--user", "alice")
	if got := string(mustRead(t, store)); got != "not a store\n" {
		t.Errorf("the file given as store was changed: %q", got)
	}
}

// TestNonEmptyMountpoint: mounting over a directory with files in it is
// refused and leaves the files alone.
func TestNonEmptyMountpoint(t *testing.T) {
	t.Parallel()
	mnt := newMountpoint(t)
	mustWrite(t, filepath.Join(mnt, "precious"), []byte("mine"), 0o644)
	expectMountRefused(t, "non-empty mountpoint", mnt, nil,
		"mount", "--store", newStore(t), "--user", "alice")
	if got := string(mustRead(t, filepath.Join(mnt, "precious"))); got != "mine" {
		t.Errorf("file in the mountpoint changed: %q", got)
	}
}

// TestStoreLocked: a second mount of a store a running daemon holds is
// refused, and the running view is unaffected.
func TestStoreLocked(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice")
	mustWrite(t, v.Path("f"), []byte("first"), 0o644)
	for _, user := range []string{"alice", "bob"} {
		expectMountRefused(t, "store locked, second mount as "+user, newMountpoint(t), nil,
			"mount", "--store", store, "--user", user)
	}
	if got := string(mustRead(t, v.Path("f"))); got != "first" {
		t.Errorf("first view after the refused mounts: %q", got)
	}
	mustWrite(t, v.Path("g"), []byte("second"), 0o644)
	v.Stop()
	fsckClean(t, store)
}

// TestCorruptStore overwrites the badger files of a store with garbage:
// mount and fsck each refuse with one line, and an intact store served at
// the same time is unaffected.
func TestCorruptStore(t *testing.T) {
	t.Parallel()
	good := newStore(t)
	gv := startView(t, good, "bob")
	mustWrite(t, gv.Path("before"), []byte("before"), 0o644)

	bad := newStore(t)
	bv := startView(t, bad, "alice")
	for i := 0; i < 20; i++ {
		mustWrite(t, bv.Path("f"+string(rune('a'+i))), randomBytes(int64(i), 1000), 0o644)
	}
	bv.Stop()
	n := 0
	err := filepath.WalkDir(filepath.Join(bad, "meta"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size := max(int(info.Size()), 4096)
		n++
		return os.WriteFile(p, randomBytes(int64(n)+100, size), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no files under %s/meta to corrupt", bad)
	}
	expectMountRefused(t, "mount of a corrupted store", newMountpoint(t), nil,
		"mount", "--store", bad, "--user", "alice")
	for _, args := range [][]string{{"fsck", "--store", bad, "--dry-run"}, {"fsck", "--store", bad}} {
		out, errOut, code := runCLI(t, args...)
		if code == 0 {
			t.Errorf("shedfs %s on a corrupted store: exit 0, want non-zero\nstdout:\n%s\nstderr:\n%s",
				strings.Join(args, " "), out, errOut)
		}
		checkOneLine(t, "shedfs "+strings.Join(args, " ")+" on a corrupted store", errOut)
		t.Logf("shedfs %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errOut))
	}

	if got := string(mustRead(t, gv.Path("before"))); got != "before" {
		t.Errorf("intact store after the corrupt one was tried: %q", got)
	}
	mustWrite(t, gv.Path("after"), []byte("after"), 0o644)
	gv.Stop()
	gv2 := startView(t, good, "bob")
	for _, name := range []string{"before", "after"} {
		if got := string(mustRead(t, gv2.Path(name))); got != name {
			t.Errorf("intact store, %s after remount: %q", name, got)
		}
	}
	gv2.Stop()
	fsckClean(t, good)
}
