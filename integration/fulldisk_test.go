package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/metadata"
)

// smallDisk makes a filesystem of size bytes for one test: an ext4 image
// on a loop device, mounted on a fresh directory and unmounted when the
// test ends, whatever happens (views registered later are stopped
// before it). It skips, or fails with CI=true, where that cannot be done.
func smallDisk(t *testing.T, size int64) string {
	t.Helper()
	requireFUSE(t)
	skip := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: failing instead of skipping)", msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		skip("a small disk needs mkfs.ext4 (e2fsprogs): %v", err)
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "disk")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v\n%s", img, err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		skip("cannot mount a loop device here: %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v; detaching it", mnt, err)
			_ = unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	return mnt
}

// syncDisk writes back everything cached for the filesystem at dir
// (syncfs).
func syncDisk(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		t.Fatalf("syncfs %s: %v", dir, err)
	}
}

// TestFullDisk puts a store on a 64 MiB disk and fills it from a view:
// data and creates fail with ENOSPC, the daemon stays up and serves reads,
// listings and deletes, a failed create leaves nothing behind, deleting
// frees space for writes again, a host process filling the rest of the
// disk takes the reserve but not the daemon, and every command opens the
// full store.
func TestFullDisk(t *testing.T) {
	disk := smallDisk(t, 64<<20)
	store := filepath.Join(disk, "store")
	adminOK(t, "init", "--store", store)
	adminOK(t, "user", "add", "alice", "--store", store)
	v := startView(t, store, "alice")
	waitAdmin(t, store)
	alive := func(when string) {
		t.Helper()
		if v.exited() {
			t.Fatalf("%s: the daemon died: %v\nstderr:\n%s", when, v.err, v.Stderr())
		}
	}
	keep := bytes.Repeat([]byte("keep"), 25<<10)
	mustWrite(t, v.Path("keep"), keep, 0o644)
	mustMkdir(t, v.Path("d"), 0o755)
	for i := range 2000 {
		mustWrite(t, v.Path("d", fmt.Sprintf("s%05d", i)), []byte("small"), 0o644)
	}

	// Data until the disk is full.
	out, err := runToolErr("dd", "if=/dev/zero", "of="+v.Path("big"), "bs=1M", "count=200")
	wantSaid(t, "dd 200 MiB onto a 64 MiB disk", out, exitCode(err), "No space left on device")
	alive("after dd")
	// Creates until the disk is full, and many more: each refused, none
	// leaving an entry behind.
	// A create is two steps: the open may pass and the write then meet
	// the full disk, which leaves an empty file as on any filesystem;
	// the listing below counts it.
	n := 2000
	createUntilFull := func() {
		t.Helper()
		var last error
		for ; n < 20000; n++ {
			p := v.Path("d", fmt.Sprintf("s%05d", n))
			if last = os.WriteFile(p, []byte("small"), 0o644); last != nil {
				if _, err := os.Lstat(p); err == nil {
					n++
				}
				break
			}
		}
		wantErrno(t, "create on a full disk", last, unix.ENOSPC)
	}
	createUntilFull()
	// ext4 reserves blocks for the worst case of what it has not yet
	// allocated (delayed allocation) and gives back the rest as its
	// writeback allocates: free space grows by hundreds of KiB over the
	// next seconds, and creates pass again (up to 61 of the 300 below
	// did). Let it settle, and fill what it gave back.
	syncDisk(t, disk)
	createUntilFull()
	// The edge may still move a little, so a create may pass now and then.
	refused := 0
	for i := range 300 {
		p := v.Path("d", fmt.Sprintf("more%03d", i))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			refused++
			wantErrno(t, "another create on a full disk", err, unix.ENOSPC)
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a failed create left %s behind: %v", p, err)
			}
			continue
		}
		n++
		if _, err := f.Write([]byte("x")); err != nil {
			wantErrno(t, "a write on a full disk", err, unix.ENOSPC)
		}
		f.Close()
	}
	if refused < 250 {
		t.Errorf("only %d of 300 more creates refused on a full disk", refused)
	}
	// Each of these may meet an edge ext4 has just moved; what passed is
	// undone, the space it found filled, and it must then be refused.
	refusedOnFullDisk := func(what string, op func() error, undo func() error) {
		t.Helper()
		for try := 0; ; try++ {
			err := op()
			if err == nil && try < 3 {
				wantOK(t, "undo "+what, undo())
				createUntilFull()
				continue
			}
			wantErrno(t, what+" on a full disk", err, unix.ENOSPC)
			return
		}
	}
	refusedOnFullDisk("mkdir",
		func() error { return os.Mkdir(v.Path("newdir"), 0o755) },
		func() error { return os.Remove(v.Path("newdir")) })
	refusedOnFullDisk("symlink",
		func() error { return os.Symlink("keep", v.Path("link")) },
		func() error { return os.Remove(v.Path("link")) })
	// Larger than a create's charge: the guard admits by size, and the
	// free space can stop within a create's 4 KiB of the mark, where a
	// small value still rightly fits.
	wantErrno(t, "setxattr on a full disk", unix.Setxattr(v.Path("keep"), "user.x", make([]byte, 32<<10), 0), unix.ENOSPC)
	wantErrno(t, "append on a full disk", appendTo(v.Path("keep"), make([]byte, 1<<20)), unix.ENOSPC)
	alive("after the creates")

	// Reads, listings and the admin commands still work.
	if got := mustRead(t, v.Path("keep")); !bytes.Equal(got, keep) {
		t.Error("keep: contents changed on a full disk")
	}
	if des, err := os.ReadDir(v.Path("d")); err != nil || len(des) != n {
		t.Errorf("listing on a full disk: %d entries, %v; want %d", len(des), err, n)
	}
	for _, args := range [][]string{{"status"}, {"quota", "show"}} {
		if out, errOut, code := runCLI(t, append(args, "--store", store)...); code != 0 {
			t.Errorf("shedfs %s on a full disk: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}

	// Deleting frees space, and writes work again.
	wantOK(t, "rm big", os.Remove(v.Path("big")))
	for i := range 1000 {
		wantOK(t, "rm small", os.Remove(v.Path("d", fmt.Sprintf("s%05d", i))))
	}
	writesAgain(t, v.Path("after"))
	alive("after the deletes")

	// Something else fills the disk: the reserve goes so that the daemon
	// keeps room for its metadata; deletes still work; once the space is
	// back, so are writes and the reserve.
	reserve := filepath.Join(store, "reserve")
	if _, err := os.Stat(reserve); err != nil {
		t.Fatalf("no reserve on a disk with room: %v", err)
	}
	filler := filepath.Join(disk, "filler")
	out, err = runToolErr("dd", "if=/dev/zero", "of="+filler, "bs=1M", "count=200")
	wantSaid(t, "dd from the host onto the full disk", out, exitCode(err), "No space left on device")
	waitFor(t, "the reserve to go", func() bool {
		_, err := os.Stat(reserve)
		return errors.Is(err, os.ErrNotExist)
	})
	wantErrno(t, "create with the disk full from outside", os.WriteFile(v.Path("x"), []byte("x"), 0o644), unix.ENOSPC)
	wantOK(t, "rm with the disk full from outside", os.Remove(v.Path("after")))
	mustRead(t, v.Path("keep"))
	alive("after the host filled the disk")
	wantOK(t, "rm filler", os.Remove(filler))
	writesAgain(t, v.Path("after2"))
	waitFor(t, "the reserve to come back", func() bool {
		_, err := os.Stat(reserve)
		return err == nil
	})

	// Full once more, then every command opens the stopped store.
	out, err = runToolErr("dd", "if=/dev/zero", "of="+v.Path("big2"), "bs=1M", "count=200")
	wantSaid(t, "dd onto the disk again", out, exitCode(err), "No space left on device")
	alive("at the end")
	v.Stop()
	for _, args := range [][]string{{"status"}, {"quota", "show"}, {"fsck"}} {
		if out, errOut, code := runCLI(t, append(args, "--store", store)...); code != 0 {
			t.Errorf("shedfs %s on a full store: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	fsckClean(t, store)
	// Filled to the last block from outside: the reading commands still
	// open it (read-only if need be).
	out, err = runToolErr("dd", "if=/dev/zero", "of="+filler, "bs=1M", "count=200")
	wantSaid(t, "dd from the host onto the stopped store's disk", out, exitCode(err), "No space left on device")
	for _, args := range [][]string{{"status"}, {"quota", "show"}, {"user", "list"}} {
		if out, errOut, code := runCLI(t, append(args, "--store", store)...); code != 0 {
			t.Errorf("shedfs %s on a disk filled to the last block: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	wantOK(t, "rm filler", os.Remove(filler))
	v2 := startView(t, store, "alice")
	if got := mustRead(t, v2.Path("keep")); !bytes.Equal(got, keep) {
		t.Error("keep: contents changed after a restart on a full disk")
	}
	wantOK(t, "rm after a restart on a full disk", os.Remove(v2.Path("big2")))
	writesAgain(t, v2.Path("after3"))
	v2.Stop()
}

// writesAgain waits until a 1 MiB file can be written at p: the space
// deletes free comes back once their blobs go (a moment after the
// unlink) and the daemon measures the disk again.
func writesAgain(t *testing.T, p string) {
	t.Helper()
	data := make([]byte, 1<<20)
	var err error
	waitFor(t, "writes to work again", func() bool {
		err = os.WriteFile(p, data, 0o644)
		return err == nil
	})
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fullDiskCommitsEnv makes the test binary the child of
// TestCommitsOnDiskFilledFromOutside: it names the small disk to use.
const fullDiskCommitsEnv = "SHEDFS_TEST_FULL_DISK_COMMITS"

// TestCommitsOnDiskFilledFromOutside opens a metadata store on a small
// disk, lets a host process fill the disk to its last block, and commits
// 1 MiB of records (a quarter of a memtable, so badger starts no new log
// and flushes no table). Badger writes its memtable log through a memory
// map of a sparse file, and a page without a block behind it kills the
// process with SIGBUS; the store allocates the log's blocks when it opens
// it, so these commits need none. The store runs in a child process: the
// failure is a dead process.
func TestCommitsOnDiskFilledFromOutside(t *testing.T) {
	disk := smallDisk(t, 48<<20)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fullDiskCommitsEnv+"="+disk)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("commits on a disk filled from outside: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "disk full, records committed") {
		t.Fatalf("the child did not fill the disk and commit:\n%s", out)
	}
}

// fullDiskCommitsMain is the child of TestCommitsOnDiskFilledFromOutside.
func fullDiskCommitsMain(disk string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		return 1
	}
	st, err := metadata.Open(filepath.Join(disk, "meta"), metadata.Options{})
	if err != nil {
		return fail("open: %v", err)
	}
	filler := filepath.Join(disk, "filler")
	if err := fillDisk(filler); err != nil {
		return fail("fill the disk: %v", err)
	}
	records := make([]metadata.AuditRecord, 0, 100)
	for i := range 5000 { // about 1 MiB in the log
		records = append(records, metadata.AuditRecord{
			Time: time.Now(), User: "alice", Op: "write", Result: "ok",
			Path: fmt.Sprintf("/a/path/long/enough/to/fill/a/page/soon/%0100d", i),
		})
		if len(records) == cap(records) {
			if err := st.AppendAudit(records); err != nil {
				return fail("append: %v", err)
			}
			records = records[:0]
		}
	}
	fmt.Println("disk full, records committed")
	// Closing flushes the memtable to a table, which needs blocks.
	if err := os.Remove(filler); err != nil {
		return fail("remove the filler: %v", err)
	}
	if err := st.Close(); err != nil {
		return fail("close: %v", err)
	}
	return 0
}

// fillDisk takes every free block of the disk of path into the file path,
// as a host process filling the disk would: fallocate in ever smaller
// pieces until not even one block is left. (statfs still reports a few
// hundred blocks free then: ext4 keeps them for its own extent changes,
// and gives them to no file, root's or not.)
func fillDisk(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var off int64
	for size := int64(64 << 20); size >= 4096; {
		err := unix.Fallocate(int(f.Fd()), 0, off, size)
		switch {
		case err == nil:
			off += size
		case errors.Is(err, unix.ENOSPC):
			size /= 2
		default:
			return fmt.Errorf("fallocate %s: %w", path, err)
		}
	}
	return nil
}
