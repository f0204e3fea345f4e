package integration

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Every byte a tenant can make the daemon store is charged or refused:
// fallocate modes that would store blocks past a file's size, and
// extended attributes. The full-disk behaviour of the daemon is in
// fulldisk_test.go.

// TestFallocateKeepSize: preallocating past the end of a file
// (FALLOC_FL_KEEP_SIZE) would store blocks that no quota sees, so it is
// refused with EOPNOTSUPP; the modes whose blocks stay within the charged
// size work, KEEP_SIZE within it included.
func TestFallocateKeepSize(t *testing.T) {
	t.Parallel()
	v := quotaView(t, []string{"quota", "set", "user:alice", "--bytes", "1MiB"})
	before := usageOf(t, v.Store, "user:alice")

	mustWrite(t, v.Path("f"), nil, 0o644)
	out, err := runToolErr("fallocate", "-n", "-l", "200M", v.Path("f"))
	wantSaid(t, "fallocate -n -l 200M with a 1 MiB quota", out, exitCode(err), "unsupported")
	f, err := os.OpenFile(v.Path("g"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	wantErrno(t, "fallocate(KEEP_SIZE) 200 MiB", unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 200<<20), unix.EOPNOTSUPP)
	wantErrno(t, "fallocate(ZERO_RANGE|KEEP_SIZE)", unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20), unix.EOPNOTSUPP)
	wantErrno(t, "fallocate(INSERT_RANGE)", unix.Fallocate(fd, unix.FALLOC_FL_INSERT_RANGE, 0, 4096), unix.EOPNOTSUPP)
	for _, name := range []string{"f", "g"} {
		if size := sizeOf(t, v.Path(name)); size != 0 {
			t.Errorf("%s: size %d after a refused fallocate", name, size)
		}
	}
	if got := usageOf(t, v.Store, "user:alice"); got.Bytes != before.Bytes {
		t.Errorf("usage %d bytes after refused fallocates, want %d", got.Bytes, before.Bytes)
	}

	// Allocating within the quota, then punching a hole, work; the size
	// and the charge follow.
	wantOK(t, "fallocate(0) 256 KiB", unix.Fallocate(fd, 0, 0, 256<<10))
	wantOK(t, "fallocate(PUNCH_HOLE|KEEP_SIZE)", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 64<<10))
	wantOK(t, "fallocate(KEEP_SIZE) within the size", unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 128<<10))
	wantErrno(t, "fallocate(KEEP_SIZE) past the size", unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 128<<10, 256<<10), unix.EOPNOTSUPP)
	wantOK(t, "fallocate(ZERO_RANGE) extending", unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, 256<<10, 64<<10))
	wantErrno(t, "fallocate(0) past the quota", unix.Fallocate(fd, 0, 0, 2<<20), unix.EDQUOT)
	f.Close()
	if size := sizeOf(t, v.Path("g")); size != 320<<10 {
		t.Errorf("size %d, want %d", size, 320<<10)
	}
	got := usageOf(t, v.Store, "user:alice")
	if want := privateOf(t, v.Dir); got != want || got.Bytes > 1<<20 {
		t.Errorf("usage %+v, view holds %+v (limit 1 MiB)", got, want)
	}
	var st unix.Stat_t
	if err := unix.Stat(blobPath(t, v.Store, "g", v.Path("g")), &st); err == nil && st.Blocks*512 > 1<<20 {
		t.Errorf("the host stores %d bytes for a 1 MiB quota", st.Blocks*512)
	}
	v.Stop()
	fsckClean(t, v.Store)
}

// blobPath is the host file that holds the contents of view file p.
func blobPath(t *testing.T, store, name, p string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	for _, b := range blobFiles(t, store) {
		if strings.HasSuffix(b, fmt.Sprintf("/%d", st.Ino)) {
			return b
		}
	}
	t.Fatalf("no blob for %s (inode %d)", name, st.Ino)
	return ""
}

// TestXattrCharged: extended attributes are charged to the holder, names
// and values, and one inode holds at most 64 KiB of them (ENOSPC, as ext4
// answers), so listxattr never overflows.
func TestXattrCharged(t *testing.T) {
	t.Parallel()
	v := quotaView(t, []string{"quota", "set", "user:alice", "--bytes", "1MiB"})
	before := usageOf(t, v.Store, "user:alice")

	// 60 KiB values, one per file, as many as a 1 MiB quota takes: the
	// quota stops them long before 500.
	val := make([]byte, 60<<10)
	stored := 0
	var last error
	for i := range 500 {
		p := v.Path(fmt.Sprintf("x%03d", i))
		mustWrite(t, p, nil, 0o644)
		if last = unix.Setxattr(p, "user.blob", val, 0); last != nil {
			break
		}
		stored++
	}
	if !errors.Is(last, unix.EDQUOT) {
		t.Fatalf("after %d values of 60 KiB with a 1 MiB quota: %v, want EDQUOT", stored, last)
	}
	if stored == 0 || stored > 17 {
		t.Errorf("%d values of 60 KiB stored under a 1 MiB quota", stored)
	}
	got := usageOf(t, v.Store, "user:alice")
	if got.Bytes > 1<<20 || got.Bytes < before.Bytes+int64(stored)*(60<<10) {
		t.Errorf("usage %d bytes after %d xattrs of 60 KiB (before %d, limit 1 MiB)", got.Bytes, stored, before.Bytes)
	}
	// Removing them gives the bytes back.
	for i := range stored {
		wantOK(t, "removexattr", unix.Removexattr(v.Path(fmt.Sprintf("x%03d", i)), "user.blob"))
	}
	if got := usageOf(t, v.Store, "user:alice"); got.Bytes != before.Bytes {
		t.Errorf("usage %d bytes after removing every xattr, want %d", got.Bytes, before.Bytes)
	}

	// One inode: 64 KiB in all, names included.
	p := v.Path("many")
	mustWrite(t, p, nil, 0o644)
	wantErrno(t, "setxattr of a 64 KiB value", unix.Setxattr(p, "user.max", make([]byte, 64<<10), 0), unix.ENOSPC)
	n := 0
	for ; n < 5000; n++ {
		if last = unix.Setxattr(p, fmt.Sprintf("user.attr%05d", n), []byte("v"), 0); last != nil {
			break
		}
	}
	if !errors.Is(last, unix.ENOSPC) || n > 64<<10/16 {
		t.Errorf("after %d small xattrs on one file: %v, want ENOSPC before %d", n, last, 64<<10/16)
	}
	sz, err := unix.Listxattr(p, nil)
	if err != nil {
		t.Fatalf("listxattr of a full inode: %v", err)
	}
	buf := make([]byte, sz)
	if _, err := unix.Listxattr(p, buf); err != nil {
		t.Fatalf("listxattr of a full inode: %v", err)
	}
	if names := strings.Count(string(buf), "\x00"); names != n {
		t.Errorf("listxattr lists %d names, %d were set", names, n)
	}
	// Deleting the file gives everything back.
	wantOK(t, "unlink", os.Remove(p))
	for i := range stored {
		os.Remove(v.Path(fmt.Sprintf("x%03d", i)))
	}
	os.Remove(v.Path(fmt.Sprintf("x%03d", stored)))
	wantUsageSoon(t, v.Store, "user:alice", before, "after deleting the files with xattrs")
	v.Stop()
	fsckClean(t, v.Store)
}
