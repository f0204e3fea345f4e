package integration

import (
	"bytes"
	"errors"
	"os"
	"strings"
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

// TestPosixACLNotADenial: setting a POSIX ACL answers ENOTSUP, as any
// filesystem mounted without ACLs does, and tools such as sed -i (which
// copies the file's ACL to its new copy) expect it and go on. It is not
// the refusal of a rule: not counted in shedfs_denials_total, not in the
// audit trail (issue 27: every sed -i recorded a denial, noise that could
// trip ShedfsDenialSpike). A real refusal next to it still is.
func TestPosixACLNotADenial(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v, addr := startObservedView(t, store)
	before := scrape(t, addr)
	mustWrite(t, v.Path("f"), []byte("a\n"), 0o644)
	mustWrite(t, v.Path("share", "g"), []byte("a\n"), 0o644)
	for _, p := range []string{v.Path("f"), v.Path("share", "g")} {
		if out, code := tool(t, "sed", "-i", "s/a/b/", p); code != 0 {
			t.Errorf("sed -i %s: exit %d %s", p, code, out)
		}
		if got := string(mustRead(t, p)); got != "b\n" {
			t.Errorf("%s after sed -i: %q", p, got)
		}
	}
	// The minimal ACL of mode 0644, as sed writes it (u::rw- g::r-- o::r--).
	acl := []byte("\x02\x00\x00\x00\x01\x00\x06\x00\xff\xff\xff\xff\x04\x00\x04\x00\xff\xff\xff\xff\x20\x00\x04\x00\xff\xff\xff\xff")
	mustMkdir(t, v.Path("d"), 0o755)
	wantErrno(t, "setxattr system.posix_acl_access", unix.Setxattr(v.Path("f"), "system.posix_acl_access", acl, 0), syscall.EOPNOTSUPP)
	wantErrno(t, "setxattr system.posix_acl_default", unix.Setxattr(v.Path("d"), "system.posix_acl_default", acl, 0), syscall.EOPNOTSUPP)
	// The marker: a refusal of the namespace rule, counted and audited.
	wantErrno(t, "setxattr security.shedfs", unix.Setxattr(v.Path("f"), "security.shedfs", []byte("1"), 0), syscall.EOPNOTSUPP)
	checkAudit(t, store, []auditWant{{"alice", "private:alice", "setattr", "/f", "ENOTSUP", "xattr_namespace"}})
	if recs := auditDenied(t, store); len(recs) != 1 {
		t.Errorf("%d denials in the audit trail, want only the marker: %+v", len(recs), recs)
	}
	after := scrape(t, addr)
	delta(t, before, after, 1, "shedfs_denials_total", "reason=xattr_namespace")
	var total float64
	for _, r := range after.labelValues("shedfs_denials_total", "reason") {
		total += after.value(t, "shedfs_denials_total", "reason="+r) - before.value(t, "shedfs_denials_total", "reason="+r)
	}
	if total != 1 {
		t.Errorf("shedfs_denials_total grew by %v in all, want 1 (the marker)", total)
	}
	v.Stop()
}

// TestAuditRightAfterRefusal: `shedfs audit --denied` run at once after a
// refusal shows it, with no wait and no retry: the command asks the daemon
// to flush its recorder's batch first (issue 27: it printed nothing, not
// even a header, for up to the batch interval).
func TestAuditRightAfterRefusal(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice")
	waitAdmin(t, store)
	for i := range 5 {
		name := "nope" + string(rune('0'+i))
		wantErrno(t, "mknod a device", unix.Mknod(v.Path(name), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))), syscall.EPERM)
		recs := auditDenied(t, store)
		if len(recs) != i+1 || recs[i].Path != "/"+name || recs[i].Rule != "device_node" {
			t.Fatalf("audit --denied right after refusal %d: %+v", i+1, recs)
		}
	}
	out := adminOK(t, "audit", "--store", store, "--user", "nobody")
	if !strings.HasPrefix(out, "TIME") || strings.Count(out, "\n") != 1 {
		t.Errorf("audit with no match: %q, want the header alone", out)
	}
	v.Stop()
}
