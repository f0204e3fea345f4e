//go:build linux

package fuseuring

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// enableForTest turns the module parameter on for the test and restores
// it after. Without the parameter (an old kernel) or without root the test
// skips, loudly under CI=true.
func enableForTest(t *testing.T) {
	t.Helper()
	old, err := os.ReadFile(ParamPath)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE over io_uring not testable here: %v", err)
		}
		t.Skipf("FUSE over io_uring not testable here: %v", err)
	}
	if err := os.WriteFile(ParamPath, []byte("Y"), 0); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot turn on %s: %v", ParamPath, err)
		}
		t.Skipf("cannot turn on %s: %v", ParamPath, err)
	}
	restore := func() { os.WriteFile(ParamPath, old[:1], 0) }
	t.Cleanup(restore)
	restoreParam.Store(&restore)
}

// restoreParam puts the module parameter back; the watchdog calls it
// too, as a hung test may never reach its cleanups.
var restoreParam atomic.Pointer[func()]

// TestServeLoopback mounts go-fuse's loopback file system with the
// transport and checks that the kernel's requests come through the rings.
func TestServeLoopback(t *testing.T) {
	enableForTest(t)
	dir, mnt := t.TempDir(), t.TempDir()
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := &fs.Options{MountOptions: fuse.MountOptions{MaxWrite: 1 << 20, DirectMount: true}}
	var served, dev atomic.Int64
	var tr *Transport
	var trErr error
	raw := Wrap(fs.NewNodeFS(root, opts), &opts.MountOptions, Options{MaxWrite: 1 << 20, Served: func() { served.Add(1) }, Dev: func() { dev.Add(1) }}, func(t *Transport, err error) { tr, trErr = t, err })
	server, err := fuse.NewServer(raw, mnt, &opts.MountOptions)
	if err != nil {
		t.Fatal(err)
	}
	go server.Serve()
	defer server.Unmount()
	watchdog(t, mnt)
	if err := server.WaitMount(); err != nil {
		t.Fatal(err)
	}
	if trErr != nil {
		t.Fatal(trErr)
	}
	p := filepath.Join(mnt, "a")
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if err := os.WriteFile(p, big, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || len(got) != len(big) || string(got) != string(big) {
		t.Fatalf("read back %d bytes, err %v", len(got), err)
	}
	if err := os.Rename(p, p+"2"); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(mnt)
	if err != nil || len(ents) != 1 || ents[0].Name() != "a2" {
		t.Fatalf("readdir %v %v", ents, err)
	}
	if err := os.Remove(p + "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat after remove: %v", err)
	}
	if served.Load() < 10 {
		t.Fatalf("only %d requests over io_uring", served.Load())
	}
	// Only forgets (and what came before the rings) use /dev/fuse.
	if d := dev.Load(); d > served.Load()/2 {
		t.Errorf("%d requests over /dev/fuse against %d over the rings", d, served.Load())
	}
	t.Logf("%d requests over %d rings, %d over /dev/fuse", served.Load(), tr.Queues(), dev.Load())
	if err := server.Unmount(); err != nil {
		t.Fatal(err)
	}
	tr.Wait()
}

// watchdog aborts the mount's FUSE connection if the test is still
// running after a while, so that a hang in the transport fails the test
// instead of leaving a stuck mount.
func watchdog(t *testing.T, mnt string) {
	// From mountinfo, not stat: a stat of a mount whose kernel holds
	// every request (the hang this guards against) would hang too.
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	minor := -1
	for _, line := range strings.Split(string(info), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == mnt {
			if _, m, ok := strings.Cut(f[2], ":"); ok {
				minor, _ = strconv.Atoi(m)
			}
		}
	}
	if minor < 0 {
		t.Fatalf("%s not in mountinfo", mnt)
	}
	abort := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", minor)
	tm := time.AfterFunc(20*time.Second, func() {
		buf := make([]byte, 1<<20)
		fmt.Fprintf(os.Stderr, "hung; aborting the connection\n%s", buf[:runtime.Stack(buf, true)])
		t.Error("hung")
		if r := restoreParam.Load(); r != nil {
			(*r)()
		}
		os.WriteFile(abort, []byte("1"), 0)
		unix.Unmount(mnt, unix.MNT_DETACH)
	})
	t.Cleanup(func() { tm.Stop() })
}

// TestFallBackToDev: rings that cannot start after INIT accepted io_uring
// (here: a queue depth io_uring refuses) leave the mount working over
// /dev/fuse instead of holding every request for rings that never come.
func TestFallBackToDev(t *testing.T) {
	enableForTest(t)
	dir, mnt := t.TempDir(), t.TempDir()
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := &fs.Options{MountOptions: fuse.MountOptions{MaxWrite: 1 << 20, DirectMount: true}}
	var trErr error
	var dev atomic.Int64
	raw := Wrap(fs.NewNodeFS(root, opts), &opts.MountOptions, Options{Depth: 1 << 20, MaxWrite: 1 << 20, Dev: func() { dev.Add(1) }}, func(_ *Transport, err error) { trErr = err })
	server, err := fuse.NewServer(raw, mnt, &opts.MountOptions)
	if err != nil {
		t.Fatal(err)
	}
	go server.Serve()
	defer server.Unmount()
	watchdog(t, mnt)
	if err := server.WaitMount(); err != nil {
		t.Fatal(err)
	}
	if trErr == nil {
		t.Fatal("rings of depth 1<<20 started")
	}
	if err := os.WriteFile(filepath.Join(mnt, "a"), []byte("x"), 0o644); err != nil {
		t.Fatalf("write over /dev/fuse after the fallback: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "x" {
		t.Fatalf("read back %q %v", b, err)
	}
	if dev.Load() < 3 {
		t.Errorf("%d requests counted over /dev/fuse", dev.Load())
	}
}
