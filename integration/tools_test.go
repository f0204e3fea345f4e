package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// goroot returns the GOROOT of the go command on PATH.
func goroot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestTarGoSrc untars the Go toolchain's whole src/ tree into a view and
// checks with diff -r that every file came through unchanged.
func TestTarGoSrc(t *testing.T) {
	t.Parallel()
	src := goroot(t)
	v := startView(t, newStore(t), "alice")
	start := time.Now()
	runTool(t, "", nil, "bash", "-o", "pipefail", "-c",
		`tar -C "$1" -cf - src | tar -C "$2" -xf -`, "bash", src, v.Dir)
	t.Logf("untar of %s/src into the view: %v", src, time.Since(start))
	start = time.Now()
	runTool(t, "", nil, "diff", "-r", filepath.Join(src, "src"), v.Path("src"))
	t.Logf("diff -r: %v", time.Since(start))
	v.Stop()
	fsckClean(t, v.Store)
}

// TestGit runs git init, add, commit, log, gc and fsck inside a view.
func TestGit(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	home := t.TempDir()
	env := []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"}
	repo := v.Path("repo")
	mustMkdir(t, repo, 0o755)
	git := func(args ...string) string {
		t.Helper()
		full := append([]string{"-c", "user.name=Shed Tester", "-c", "user.email=tester@example.com",
			"-c", "init.defaultBranch=main"}, args...)
		return runTool(t, repo, env, "git", full...)
	}
	git("init")
	mustWrite(t, filepath.Join(repo, "README"), []byte("hello\n"), 0o644)
	mustMkdir(t, filepath.Join(repo, "cmd"), 0o755)
	mustWrite(t, filepath.Join(repo, "cmd", "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	mustWrite(t, filepath.Join(repo, "run.sh"), []byte("#!/bin/sh\necho run\n"), 0o755)
	git("add", ".")
	git("commit", "-q", "-m", "first commit")

	mustWrite(t, filepath.Join(repo, "README"), []byte("hello\nworld\n"), 0o644)
	git("mv", "run.sh", "start.sh")
	git("commit", "-q", "-a", "-m", "second commit")

	log := git("log", "--format=%s")
	if want := "second commit\nfirst commit\n"; log != want {
		t.Errorf("git log: got %q, want %q", log, want)
	}
	if st := git("status", "--porcelain"); st != "" {
		t.Errorf("git status --porcelain after commit: %q, want nothing", st)
	}
	git("gc", "-q")
	git("fsck", "--full", "--strict")
	if out := git("show", "HEAD:start.sh"); out != "#!/bin/sh\necho run\n" {
		t.Errorf("git show HEAD:start.sh = %q", out)
	}
	if out := runTool(t, repo, env, filepath.Join(repo, "start.sh")); out != "run\n" {
		t.Errorf("executing start.sh from the view: %q", out)
	}
	v.Stop()
	fsckClean(t, v.Store)
}

// TestFifo makes a named pipe in a view and passes data through it between
// a writer goroutine and a reader, both opening it through the kernel.
func TestFifo(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	p := v.Path("fifo")
	if err := unix.Mkfifo(p, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatalf("lstat fifo: %v", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Fatalf("fifo has mode %#o, want a fifo", st.Mode)
	}
	msg := bytes.Repeat([]byte("through the pipe\n"), 10000) // more than a pipe buffer
	werr := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			werr <- err
			return
		}
		_, err = f.Write(msg)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		werr <- err
	}()
	type result struct {
		data []byte
		err  error
	}
	rres := make(chan result, 1)
	go func() {
		f, err := os.OpenFile(p, os.O_RDONLY, 0)
		if err != nil {
			rres <- result{err: err}
			return
		}
		defer f.Close()
		data, err := io.ReadAll(f)
		rres <- result{data, err}
	}()
	timeout := time.After(20 * time.Second)
	var got result
	for done := 0; done < 2; done++ {
		select {
		case err := <-werr:
			if err != nil {
				t.Errorf("writer: %v", err)
			}
		case got = <-rres:
			if got.err != nil {
				t.Errorf("reader: %v", got.err)
			}
		case <-timeout:
			// Unblock whichever side is stuck in open before failing.
			if fd, err := unix.Open(p, unix.O_RDWR|unix.O_NONBLOCK, 0); err == nil {
				unix.Close(fd)
			}
			t.Fatal("fifo transfer did not finish within 20s")
		}
	}
	if !bytes.Equal(got.data, msg) {
		t.Errorf("reader got %d bytes, want the %d written", len(got.data), len(msg))
	}
	if err := os.Remove(p); err != nil {
		t.Errorf("remove fifo: %v", err)
	}
	v.Stop()
	fsckClean(t, v.Store)
}

// TestUnlinkedOpenFile keeps a file open after unlinking it: it stays
// readable and writable through the descriptor with nlink 0, and once it
// is closed and the daemon stopped, its blob is gone from the store.
func TestUnlinkedOpenFile(t *testing.T) {
	t.Parallel()
	v := startView(t, noTrashStore(t, "alice"), "alice")
	mustWrite(t, v.Path("keep"), []byte("kept"), 0o644)
	p := v.Path("doomed")
	data := randomBytes(1, 1<<20)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatalf("unlink while open: %v", err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lstat after unlink: %v, want ENOENT", err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatalf("read through the fd after unlink: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("content read after unlink differs")
	}
	if _, err := f.WriteAt([]byte("more"), int64(len(data))); err != nil {
		t.Errorf("write through the fd after unlink: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatalf("fstat after unlink: %v", err)
	}
	if st.Nlink != 0 {
		t.Errorf("fstat after unlink: nlink %d, want 0", st.Nlink)
	}
	if st.Size != int64(len(data))+4 {
		t.Errorf("fstat after unlink: size %d, want %d", st.Size, len(data)+4)
	}
	if err := f.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	v.Stop()
	if blobs := blobFiles(t, v.Store); len(blobs) != 1 {
		t.Errorf("after closing the unlinked file and stopping: %d blobs %v, want 1 (only \"keep\")", len(blobs), blobs)
	}
	fsckClean(t, v.Store)
}

// TestUnlinkedOpenFileCrash kills the daemon while an unlinked file is
// still open: the next start reclaims the inode and its blob.
func TestUnlinkedOpenFileCrash(t *testing.T) {
	t.Parallel()
	store := noTrashStore(t, "alice")
	v := startView(t, store, "alice")
	keep, err := os.Create(v.Path("keep"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keep.Write([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := keep.Sync(); err != nil {
		t.Fatalf("fsync keep: %v", err)
	}
	keep.Close()
	f, err := os.Create(v.Path("doomed"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(randomBytes(2, 256<<10)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync doomed: %v", err)
	}
	if err := os.Remove(v.Path("doomed")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, v.Dir)
	v.Kill()
	f.Close()

	v2 := startView(t, store, "alice")
	if got := string(mustRead(t, v2.Path("keep"))); got != "kept" {
		t.Errorf("keep after crash: %q", got)
	}
	if _, err := os.Lstat(v2.Path("doomed")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("doomed after crash: %v, want ENOENT (its unlink was fsync'd)", err)
	}
	v2.Stop()
	if blobs := blobFiles(t, store); len(blobs) != 1 {
		t.Errorf("after restart: %d blobs %v, want 1 (only \"keep\"): the unlinked-open inode was not reclaimed", len(blobs), blobs)
	}
	fsckClean(t, store)
}

// syncDir fsyncs the directory dir.
func syncDir(t testing.TB, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync of directory %s: %v", dir, err)
	}
}

// randomBytes returns n pseudo-random bytes from seed.
func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// TestHardLinks checks link counts, shared content and the errors of link.
func TestHardLinks(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	a, b := v.Path("a"), v.Path("b")
	mustWrite(t, a, []byte("hello"), 0o640)
	if err := os.Link(a, b); err != nil {
		t.Fatalf("link: %v", err)
	}
	checkLinks := func(want uint64, paths ...string) {
		t.Helper()
		var ino uint64
		for i, p := range paths {
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				t.Errorf("lstat %s: %v", p, err)
				continue
			}
			if uint64(st.Nlink) != want {
				t.Errorf("%s: nlink %d, want %d", p, st.Nlink, want)
			}
			if i == 0 {
				ino = st.Ino
			} else if st.Ino != ino {
				t.Errorf("%s: inode %d, want %d (same as %s)", p, st.Ino, ino, paths[0])
			}
		}
	}
	checkLinks(2, a, b)
	f, err := os.OpenFile(b, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(" world")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := string(mustRead(t, a)); got != "hello world" {
		t.Errorf("write through b, read through a: %q", got)
	}
	d := v.Path("d")
	mustMkdir(t, d, 0o755)
	c := filepath.Join(d, "c")
	if err := os.Link(a, c); err != nil {
		t.Fatalf("link into subdirectory: %v", err)
	}
	checkLinks(3, a, b, c)
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	checkLinks(2, b, c)
	e := filepath.Join(d, "e")
	if err := os.Rename(b, e); err != nil {
		t.Fatal(err)
	}
	checkLinks(2, c, e)
	if got := string(mustRead(t, e)); got != "hello world" {
		t.Errorf("after unlink and rename: %q", got)
	}
	wantErr := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	wantErr("link to a directory", os.Link(d, v.Path("dirlink")), unix.EPERM)
	wantErr("link onto an existing name", os.Link(c, e), unix.EEXIST)
	wantErr("link of a missing file", os.Link(v.Path("missing"), v.Path("x")), unix.ENOENT)
	if err := os.Remove(c); err != nil {
		t.Fatal(err)
	}
	checkLinks(1, e)
	v.Stop()
	fsckClean(t, v.Store)
}

// TestSymlinks checks relative symlinks to files and directories, dangling
// links, chains and loops.
func TestSymlinks(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	mustWrite(t, v.Path("target"), []byte("content"), 0o644)
	mustMkdir(t, v.Path("dir"), 0o755)
	mustWrite(t, v.Path("dir", "inner"), []byte("inner"), 0o644)
	mustMkdir(t, v.Path("sub"), 0o755)
	for _, l := range []struct{ target, name string }{
		{"target", "l"}, {"dir", "ldir"}, {"../target", "sub/up"},
		{"l", "chain"}, {"nothere", "dangling"}, {"loop", "loop"},
	} {
		if err := os.Symlink(l.target, v.Path(l.name)); err != nil {
			t.Fatalf("symlink %s -> %s: %v", l.name, l.target, err)
		}
		got, err := os.Readlink(v.Path(l.name))
		if err != nil || got != l.target {
			t.Errorf("readlink %s: %q, %v; want %q", l.name, got, err, l.target)
		}
		var st unix.Stat_t
		if err := unix.Lstat(v.Path(l.name), &st); err != nil {
			t.Errorf("lstat %s: %v", l.name, err)
		} else if st.Mode&unix.S_IFMT != unix.S_IFLNK || st.Size != int64(len(l.target)) {
			t.Errorf("lstat %s: mode %#o size %d, want a symlink of size %d", l.name, st.Mode, st.Size, len(l.target))
		}
	}
	for name, want := range map[string]string{"l": "content", "sub/up": "content", "chain": "content", "ldir/inner": "inner"} {
		if got, err := os.ReadFile(v.Path(name)); err != nil || string(got) != want {
			t.Errorf("read through %s: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(v.Path("dangling")); !errors.Is(err, unix.ENOENT) {
		t.Errorf("stat dangling: %v, want ENOENT", err)
	}
	if _, err := os.Open(v.Path("loop")); !errors.Is(err, unix.ELOOP) {
		t.Errorf("open loop: %v, want ELOOP", err)
	}
	if err := os.Rename(v.Path("l"), v.Path("sub", "moved")); err != nil {
		t.Fatalf("rename symlink: %v", err)
	}
	if got, _ := os.Readlink(v.Path("sub", "moved")); got != "target" {
		t.Errorf("renamed symlink reads %q, want the unchanged target \"target\"", got)
	}
	if err := os.Remove(v.Path("sub", "moved")); err != nil {
		t.Fatal(err)
	}
	if got := string(mustRead(t, v.Path("target"))); got != "content" {
		t.Errorf("target after removing a link to it: %q", got)
	}
	v.Stop()
	fsckClean(t, v.Store)
}

// TestSymlinkPolicy checks the symlink policies through the kernel.
// in-zone: absolute targets and targets that climb out of the link's zone
// are refused with EPERM; ".." that stays inside the zone is fine.
// shared-in-zone, the default (issue 27): the same in share/, but any
// target in the user's own zones (private, output/). (Targets with ".."
// after a name, like "a/../x", are refused in shared zones: a sound,
// deliberate choice of the zones package, since a name may itself be a
// symlink.)
func TestSymlinkPolicy(t *testing.T) {
	t.Parallel()
	type link struct {
		link, target string
		ok           bool
	}
	shared := []link{
		{"share/l", "../p", false},           // from share into the private tree
		{"share/s/l", "../../output", false}, // from share into output
		{"share/l", "/etc/passwd", false},
		{"share/s/l", "../t", true},
	}
	inZone := append([]link{
		{"a/l", "/etc/passwd", false},
		{"l", "..", false},             // the private root's parent
		{"a/l", "../..", false},        // one level above the zone
		{"a/l", "a/../../../x", false}, // climbs out on the way
		{"output/l", "/usr/bin/python3", false},
		{"a/l", "..", true},
		{"a/l", "../x", true},
		{"a/l", "b/c", true},
	}, shared...)
	ownAny := append([]link{
		{"a/l", "/etc/passwd", true},
		{"l", "..", true},
		{"a/l", "../..", true},
		{"a/l", "a/../../../x", true},
		{"output/l", "/usr/bin/python3", true},
		{"output/l", "../a", true}, // from output into the private tree
		{"a/l", "b/c", true},
	}, shared...)
	for _, c := range []struct {
		name  string
		flags []string
		links []link
	}{
		{"in-zone", []string{"--symlinks", "in-zone"}, inZone},
		{"default", nil, ownAny},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := startView(t, newStore(t), "alice", c.flags...)
			mustMkdir(t, v.Path("a"), 0o755)
			mustMkdir(t, v.Path("share", "s"), 0o755)
			for _, l := range c.links {
				p := v.Path(l.link)
				err := os.Symlink(l.target, p)
				if l.ok && err != nil {
					t.Errorf("symlink %s -> %q: %v, want it made", l.link, l.target, err)
				}
				if l.ok && err == nil {
					if got, err := os.Readlink(p); err != nil || got != l.target {
						t.Errorf("readlink %s: %q %v, want %q", l.link, got, err, l.target)
					}
				}
				if !l.ok && !errors.Is(err, unix.EPERM) {
					t.Errorf("symlink %s -> %q (out of the zone): %v, want EPERM", l.link, l.target, err)
				}
				os.Remove(p)
			}
			v.Stop()
		})
	}
}

// TestCpA copies a tree with varied modes, owners, times, xattrs, symlinks
// and hard links into a view with cp -a, and back out again, and checks
// that every attribute survived both ways.
func TestCpA(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "tree")
	makeTree(t, src)
	want := scanTree(t, src)
	opts := treeOpts{owner: true, mtime: true, xattrs: want["file"].Xattrs != ""}
	if !opts.xattrs {
		t.Logf("the host filesystem under %s keeps no user xattrs: not comparing xattrs", src)
	}

	v := startView(t, newStore(t), "alice")
	in := v.Path("tree")
	runTool(t, "", nil, "cp", "-a", src, in)
	compareTrees(t, "cp -a into the view", want, scanTree(t, in), opts)

	out := filepath.Join(t.TempDir(), "tree")
	runTool(t, "", nil, "cp", "-a", in, out)
	compareTrees(t, "cp -a out of the view", want, scanTree(t, out), opts)
	v.Stop()
	fsckClean(t, v.Store)
}

// makeTree builds the source tree of TestCpA.
func makeTree(t testing.TB, root string) {
	t.Helper()
	mustMkdir(t, root, 0o755)
	p := func(s string) string { return filepath.Join(root, s) }
	mustWrite(t, p("file"), []byte("plain file\n"), 0o644)
	mustWrite(t, p("secret"), []byte("private\n"), 0o600)
	mustWrite(t, p("tool"), []byte("#!/bin/sh\n"), 0o755)
	mustWrite(t, p("readonly"), []byte("ro\n"), 0o444)
	mustWrite(t, p("empty"), nil, 0o644)
	mustWrite(t, p("big"), randomBytes(3, 300<<10), 0o644)
	mustWrite(t, p("suid"), []byte("s\n"), 0o755)
	mustMkdir(t, p("dir"), 0o750)
	mustMkdir(t, p("dir/deep"), 0o700)
	mustWrite(t, p("dir/deep/x"), []byte("x\n"), 0o640)
	mustMkdir(t, p("sticky"), 0o755)
	mustMkdir(t, p("setgid"), 0o755)
	if err := os.Link(p("file"), p("dir/hardlink")); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link": "file", "dir/up": "../tool", "dangling": "nowhere"} {
		if err := os.Symlink(target, p(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Setxattr(p("file"), "user.color", []byte("blue"), 0); err == nil {
		_ = unix.Setxattr(p("dir"), "user.note", []byte("a directory"), 0)
	}
	// Special bits and owners last: writes clear setuid.
	for name, mode := range map[string]os.FileMode{"suid": 0o755 | os.ModeSetuid, "sticky": 0o777 | os.ModeSticky, "setgid": 0o775 | os.ModeSetgid} {
		if err := os.Chmod(p(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	for name, id := range map[string][2]int{"secret": {1234, 5678}, "dir": {1000, 1000}, "dir/deep/x": {0, 5678}, "link": {4321, 4321}} {
		if err := os.Lchown(p(name), id[0], id[1]); err != nil {
			t.Fatal(err)
		}
	}
	// Distinct times with nanoseconds, deepest first so that setting a
	// file's time does not change its directory's afterwards.
	times := []string{"dir/deep/x", "dir/deep", "file", "secret", "tool", "big", "empty", "readonly", "suid", "dir/hardlink", "dir", "sticky", "setgid"}
	for i, name := range times {
		ts := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC).Add(time.Duration(i)*time.Hour + time.Duration(123456789+i))
		if err := os.Chtimes(p(name), ts, ts); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDd writes, reads back, overwrites in place and extends sparsely with
// dd.
func TestDd(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	tmp := t.TempDir()
	data := randomBytes(4, 6<<20)
	host := filepath.Join(tmp, "in")
	mustWrite(t, host, data, 0o644)
	big := v.Path("big")
	runTool(t, "", nil, "dd", "if="+host, "of="+big, "bs=1M", "conv=fsync", "status=none")
	back := filepath.Join(tmp, "back")
	runTool(t, "", nil, "dd", "if="+big, "of="+back, "bs=64k", "status=none")
	if !bytes.Equal(mustRead(t, back), data) {
		t.Errorf("dd round trip through the view changed the content")
	}
	// Overwrite 3 blocks of 4 KiB at block 10 without truncating.
	runTool(t, "", nil, "dd", "if=/dev/zero", "of="+big, "bs=4096", "seek=10", "count=3", "conv=notrunc", "status=none")
	want := append([]byte{}, data...)
	clear(want[10*4096 : 13*4096])
	if got := mustRead(t, big); !bytes.Equal(got, want) {
		t.Errorf("after an in-place dd overwrite: content differs (len %d, want %d)", len(got), len(want))
	}
	// A file with a 4 MiB hole followed by 1 MiB of data.
	sparse := v.Path("sparse")
	runTool(t, "", nil, "dd", "if="+host, "of="+sparse, "bs=1M", "seek=4", "count=1", "status=none")
	got := mustRead(t, sparse)
	if len(got) != 5<<20 {
		t.Fatalf("sparse file has %d bytes, want %d", len(got), 5<<20)
	}
	if !bytes.Equal(got[:4<<20], make([]byte, 4<<20)) || !bytes.Equal(got[4<<20:], data[:1<<20]) {
		t.Errorf("sparse file content differs")
	}
	v.Stop()
	fsckClean(t, v.Store)
}

// TestStatfs checks statfs(2) and df on a view.
func TestStatfs(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	mustWrite(t, v.Path("f"), randomBytes(5, 1<<20), 0o644)
	for _, dir := range []string{v.Dir, v.Path("share"), v.Path("output")} {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Errorf("statfs %s: %v", dir, err)
			continue
		}
		const fuseSuperMagic = 0x65735546
		if st.Type != fuseSuperMagic {
			t.Errorf("statfs %s: type %#x, want FUSE %#x", dir, st.Type, fuseSuperMagic)
		}
		if st.Bsize <= 0 {
			t.Errorf("statfs %s: bsize %d", dir, st.Bsize)
		}
		if st.Namelen != 255 {
			t.Errorf("statfs %s: namelen %d, want 255", dir, st.Namelen)
		}
		if st.Bfree > st.Blocks || st.Bavail > st.Blocks || st.Ffree > st.Files {
			t.Errorf("statfs %s: free exceeds total: %+v", dir, st)
		}
	}
	out := runTool(t, "", nil, "df", "-P", v.Dir)
	if !strings.Contains(out, v.Dir) {
		t.Errorf("df -P %s does not mention the mountpoint:\n%s", v.Dir, out)
	}
	runTool(t, "", nil, "df", "-i", v.Dir)
	v.Stop()
}

// TestOpenOrders opens one file for reading and for writing in both orders
// (reader first, writer first): the reader always sees what the writer
// wrote, whatever the daemon decides about passthrough for the inode.
func TestOpenOrders(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	for _, readerFirst := range []bool{true, false} {
		name := "writer-first"
		if readerFirst {
			name = "reader-first"
		}
		p := v.Path(name)
		mustWrite(t, p, []byte("initial content"), 0o644)
		var r, w *os.File
		var err error
		open := func(write bool) {
			if write {
				w, err = os.OpenFile(p, os.O_WRONLY, 0)
			} else {
				r, err = os.Open(p)
			}
			if err != nil {
				t.Fatalf("%s: open: %v", name, err)
			}
		}
		open(!readerFirst)
		open(readerFirst)
		buf := make([]byte, 64)
		if n, err := r.ReadAt(buf, 0); string(buf[:n]) != "initial content" {
			t.Errorf("%s: first read %q, %v", name, buf[:n], err)
		}
		if _, err := w.WriteAt([]byte("CHANGED"), 0); err != nil {
			t.Fatalf("%s: write: %v", name, err)
		}
		if n, err := r.ReadAt(buf, 0); string(buf[:n]) != "CHANGED content" {
			t.Errorf("%s: read after the write through the other fd: %q, %v", name, buf[:n], err)
		}
		if _, err := w.WriteAt(bytes.Repeat([]byte("+"), 100), 15); err != nil {
			t.Fatal(err)
		}
		if err := w.Truncate(10); err != nil {
			t.Fatalf("%s: ftruncate: %v", name, err)
		}
		if fi, err := r.Stat(); err != nil || fi.Size() != 10 {
			t.Errorf("%s: reader's fstat after ftruncate: %v, %v; want size 10", name, fi, err)
		}
		if n, err := r.ReadAt(buf, 0); string(buf[:n]) != "CHANGED co" || !errors.Is(err, io.EOF) {
			t.Errorf("%s: read after ftruncate: %q, %v", name, buf[:n], err)
		}
		r.Close()
		w.Close()
		if got := string(mustRead(t, p)); got != "CHANGED co" {
			t.Errorf("%s: after close: %q", name, got)
		}
	}
	v.Stop()
	fsckClean(t, v.Store)
}

// TestOpenReplacedRace opens a file while another goroutine keeps renaming
// fresh files over its name: whichever inode an open gets, fstat on that
// descriptor must work (the replaced inode lives on while the kernel holds
// it), and the content is always one of the complete versions.
func TestOpenReplacedRace(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	p, tmp := v.Path("target"), v.Path("target.tmp")
	mustWrite(t, p, []byte("version-0000"), 0o644)
	const iterations = 1000
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 1; i < iterations && !t.Failed(); i++ {
			if err := os.WriteFile(tmp, []byte(fmt.Sprintf("version-%04d", i)), 0o644); err != nil {
				t.Errorf("shuffler: write: %v", err)
				return
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Errorf("shuffler: rename: %v", err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 64)
		for i := 0; i < iterations && !t.Failed(); i++ {
			fd, err := unix.Open(p, unix.O_RDONLY, 0)
			if err != nil {
				t.Errorf("opener: open: %v", err)
				return
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				t.Errorf("opener: fstat of an open descriptor, iteration %d: %v", i, err)
			}
			n, err := unix.Pread(fd, buf, 0)
			unix.Close(fd)
			if err != nil || n != 12 || !strings.HasPrefix(string(buf[:n]), "version-") {
				t.Errorf("opener: read %q, %v; want a complete version", buf[:max(n, 0)], err)
			}
			if t.Failed() {
				return
			}
		}
	}()
	wg.Wait()
	v.Stop()
	fsckClean(t, v.Store)
}
