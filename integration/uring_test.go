package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const uringParam = "/sys/module/fuse/parameters/enable_uring"

// enableURing turns FUSE over io_uring on for the test (the daemon never
// does it itself) and restores the parameter afterwards. A kernel without
// the parameter skips the test, or fails it under CI=true.
func enableURing(t *testing.T) {
	t.Helper()
	old, err := os.ReadFile(uringParam)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this kernel has no FUSE over io_uring (%v) (CI=true: failing instead of skipping)", err)
		}
		t.Skipf("this kernel has no FUSE over io_uring: %v", err)
	}
	if err := os.WriteFile(uringParam, []byte("Y"), 0); err != nil {
		t.Fatalf("turn on %s: %v", uringParam, err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(uringParam, bytes.TrimSpace(old), 0); err != nil {
			t.Errorf("restore %s: %v", uringParam, err)
		}
	})
}

// TestURingTransportOff: --transport uring with the kernel's switch off
// fails with one line naming the switch, and does not turn it on.
func TestURingTransportOff(t *testing.T) {
	requireFUSE(t)
	old, err := os.ReadFile(uringParam)
	if err != nil {
		t.Skipf("no %s: %v", uringParam, err)
	}
	if strings.TrimSpace(string(old)) == "Y" {
		t.Skipf("%s is on", uringParam)
	}
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	v := launchView(t, newMountpoint(t), nil, []string{"mount", "--store", store, "--user", "alice", "--transport", "uring"})
	code, mounted := v.waitExitOrMount(mountTimeout)
	if mounted || code == 0 {
		t.Fatalf("mount --transport uring with the switch off: mounted %v, exit %d", mounted, code)
	}
	msg := strings.TrimSpace(v.Stderr())
	if !strings.Contains(msg, uringParam) || strings.Count(msg, "\n") != 0 || !strings.HasPrefix(msg, "shedfs: ") {
		t.Errorf("stderr %q: want one line naming %s", msg, uringParam)
	}
	if now, _ := os.ReadFile(uringParam); !bytes.Equal(now, old) {
		t.Errorf("%s changed from %q to %q", uringParam, old, now)
	}
}

// TestURingTransport serves a view over FUSE io_uring and works through the
// kernel: create, write, read, stat, rename, readdir, unlink, a large
// write; a blocked lock wait ends with EINTR on a signal; the requests
// went through the rings (the metric); status says the transport; and
// kill -9 of the daemon leaves no stuck mount.
func TestURingTransport(t *testing.T) {
	requireFUSE(t)
	enableURing(t)
	store := newStore(t)
	setupTeam(t, store)
	addr := freeAddr(t)
	s := startServeWith(t, store, []string{"--transport", "uring", "--metrics", addr}, "alice", "bob")

	dir := s.In("alice", "home")
	if _, err := os.Stat(dir); err != nil {
		dir = s.In("alice")
	}
	p := filepath.Join(dir, "f")
	mustWrite(t, p, []byte("hello"), 0o644)
	if b, err := os.ReadFile(p); err != nil || string(b) != "hello" {
		t.Fatalf("read back %q, %v", b, err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16+3)
	mustWrite(t, p+".big", big, 0o644)
	if b, err := os.ReadFile(p + ".big"); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("large file read back %d bytes (want %d), %v", len(b), len(big), err)
	}
	if fi, err := os.Stat(p + ".big"); err != nil || fi.Size() != int64(len(big)) {
		t.Fatalf("stat of the large file: %v %v", fi, err)
	}
	wantOK(t, "rename", os.Rename(p, p+".2"))
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !strings.Contains(strings.Join(names, " "), "f.2") || strings.Contains(" "+strings.Join(names, " ")+" ", " f ") {
		t.Errorf("readdir after rename: %v", names)
	}
	wantOK(t, "unlink", os.Remove(p+".2"))
	if _, err := os.Stat(p + ".2"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat after unlink: %v", err)
	}

	// A lock wait interrupted by a signal: EINTR, over the ring.
	A := s.In("alice", "groups", "team-alpha", "intr")
	mustWrite(t, A, []byte("x"), 0o644)
	holder := startLocker(t, "alice's writer", "posix", true, false, A)
	holder.expect("locked", 5*time.Second)
	out, _ := tool(t, "perl", "-e", perlLockIntr, s.In("bob", "groups", "team-alpha", "intr"), "posix")
	if strings.TrimSpace(out) != "EINTR" {
		t.Errorf("bob's interrupted wait over io_uring: %q, want EINTR", out)
	}

	fams := scrape(t, addr)
	uring := fams.value(t, "shedfs_fuse_transport_requests_total", "transport=uring")
	dev := fams.value(t, "shedfs_fuse_transport_requests_total", "transport=dev")
	if uring < 20 || dev > uring/2 {
		t.Errorf("%v requests over io_uring and %v over /dev/fuse, want the workload's over io_uring", uring, dev)
	}
	if n := fams.value(t, "shedfs_fuse_uring_views"); n < 2 {
		t.Errorf("%v views over io_uring, want 2", n)
	}
	if out := adminOK(t, "status", "--store", store); !strings.Contains(out, "io_uring") {
		t.Errorf("status does not say io_uring:\n%s", out)
	}

	// A view that goes takes its rings along: no ring is leaked.
	pid := s.cmd.Process.Pid
	before := ringFDs(t, pid)
	if before == 0 || before%3 != 0 {
		t.Fatalf("%d io_uring descriptors for 3 views", before)
	}
	adminOK(t, "user", "remove", "carol", "--force", "--store", store)
	within2s(t, "carol's rings closed", func() bool { return ringFDs(t, pid) == before/3*2 })

	// kill -9: the kernel ends the rings with the connection. The
	// daemon is gone at once (Kill fails the test if it lingers), its
	// mounts answer an error instead of hanging a caller, and umount -l
	// takes them away.
	s.Kill()
	for _, m := range mounts() {
		if !strings.HasPrefix(m.point, s.Root+"/") {
			continue
		}
		done := make(chan error, 1)
		go func() { _, err := os.Stat(filepath.Join(m.point, "x")); done <- err }()
		select {
		case err := <-done:
			// ENOTCONN, or ECONNABORTED once the harness aborted it.
			if !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
				t.Errorf("stat under %s after kill -9: %v, want ENOTCONN", m.point, err)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("stat under %s hangs after kill -9", m.point)
			abortConnection(m.minor)
		}
		lazyUnmount(m.point)
	}
	for _, m := range mounts() {
		if strings.HasPrefix(m.point, s.Root+"/") {
			t.Errorf("%s still mounted after umount -l", m.point)
		}
	}
}

// ringFDs counts the io_uring instances process pid holds.
func ringFDs(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == "anon_inode:[io_uring]" {
			n++
		}
	}
	return n
}
