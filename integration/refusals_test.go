package integration

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRefusalsAudited makes every refusal that used to be decided inside
// fusefs — a device node, an xattr namespace, a write open meeting
// passthrough readers, an inode quota — and checks that each is the
// documented errno, counted in shedfs_denials_total under its rule and
// written to the audit trail.
func TestRefusalsAudited(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v, addr := startObservedView(t, store)
	before := scrape(t, addr)

	wantErrno(t, "mknod char device", unix.Mknod(v.Path("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))), syscall.EPERM)
	wantErrno(t, "mknod block device", unix.Mknod(v.Path("share", "sda"), unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0))), syscall.EPERM)
	if _, err := os.Lstat(v.Path("null")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("refused device node left an entry: %v", err)
	}
	wantOK(t, "mkfifo", unix.Mkfifo(v.Path("fifo"), 0o644))
	mustWrite(t, v.Path("f"), []byte("x"), 0o644)
	wantErrno(t, "setxattr security.shedfs", unix.Setxattr(v.Path("f"), "security.shedfs", []byte("1"), 0), syscall.EOPNOTSUPP)
	if _, err := unix.Getxattr(v.Path("f"), "security.shedfs", nil); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("getxattr security.shedfs: %v, want ENODATA", err)
	}
	wantOK(t, "setxattr trusted.x", unix.Setxattr(v.Path("f"), "trusted.x", []byte("1"), 0))

	// A reader of an owner_ro file reads in passthrough; once the owner
	// sets the mode back, a write open meets that reader.
	pt := v.Path("share", "pt")
	mustWrite(t, pt, bytes.Repeat([]byte("shared"), 64<<10), 0o644)
	wantOK(t, "set owner_ro", unix.Setxattr(pt, "user.shedfs.mode", []byte("owner_ro"), 0))
	r, err := os.Open(pt)
	if err != nil {
		t.Fatalf("open owner_ro file for reading: %v", err)
	}
	defer r.Close()
	wantOK(t, "set mode group", unix.Setxattr(pt, "user.shedfs.mode", []byte("group"), 0))
	wantErrno(t, "open for writing while a passthrough reader is open", openWrite(pt, 0), syscall.ETXTBSY)
	mid := scrape(t, addr)
	delta(t, before, mid, 1, "shedfs_denials_total", "reason=passthrough_readers")
	r.Close()
	// The kernel sends the release after close returns.
	within2s(t, "open for writing after the reader closed", func() bool { return openWrite(pt, 0) == nil })

	adminOK(t, "quota", "set", "user:alice", "--inodes", "1", "--store", store)
	wantErrno(t, "create past the inode quota", os.WriteFile(v.Path("over"), nil, 0o644), syscall.EDQUOT)

	after := scrape(t, addr)
	delta(t, before, after, 2, "shedfs_denials_total", "reason=device_node")
	delta(t, before, after, 1, "shedfs_denials_total", "reason=xattr_namespace")
	delta(t, before, after, 1, "shedfs_denials_total", "reason=quota_inodes")
	checkAudit(t, store, []auditWant{
		{"alice", "private:alice", "create", "/null", "EPERM", "device_node"},
		{"alice", "share", "create", "/share/sda", "EPERM", "device_node"},
		{"alice", "private:alice", "setattr", "/f", "ENOTSUP", "xattr_namespace"},
		{"alice", "share", "write", "/share/pt", "ETXTBSY", "passthrough_readers"},
		{"alice", "private:alice", "create", "/over", "EDQUOT", "quota_inodes"},
	})
	v.Stop()
}
