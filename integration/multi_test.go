package integration

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// startEtcdServe starts `shedfs serve` on the etcd store s as one host
// would: its own mount root and admin socket, the store's --meta and
// --blobs shared with every other daemon. It waits for the views of users
// and the admin socket.
func startEtcdServe(t *testing.T, s *etcdStore, users ...string) (*serveDaemon, string) {
	t.Helper()
	root := newMountpoint(t)
	sock := filepath.Join(t.TempDir(), "admin.sock")
	t.Cleanup(func() {
		for _, m := range mounts() {
			if strings.HasPrefix(m.point, root+"/") {
				abortAndDetach(m)
			}
		}
	})
	args := append([]string{"serve", "--admin-socket", sock}, s.args...)
	v := launchView(t, root, nil, append(args, "--mount-root"))
	d := &serveDaemon{View: v, Root: root}
	for _, u := range users {
		d.waitView(u)
	}
	deadline := time.Now().Add(mountTimeout)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) || d.exited() {
			t.Fatalf("shedfs serve: no admin socket %s\nstderr:\n%s", sock, d.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return d, sock
}

// within polls cond until it holds or limit passes, and says how long it
// took.
func within(limit time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > limit {
			return time.Since(start), false
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEtcdTwoDaemons runs two `shedfs serve` daemons on one etcd store, as
// two hosts: alice works on one, bob on the other. A name, a mode and a
// file's content changed on one are seen on the other (names and modes at
// once, content at the next open); an inode one host holds open survives
// an unlink on the other; 8 writers spread over both never pass the
// group's quota; kill -9 of one leaves the other serving, and once its
// lease has expired its orphan is reclaimed, the lock it held is free on
// the other, and fsck is clean.
func TestEtcdTwoDaemons(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdTeam(t, c)
	const limit = 2 << 20
	s.cli(t, "quota", "set", "group:team-alpha", "--bytes", "2MiB")
	s.cli(t, "trash", "retention", "0") // a removed file goes, or waits for its last handle
	a, _ := startEtcdServe(t, s, "alice", "bob")
	b, sockB := startEtcdServe(t, s, "alice", "bob")
	ga := func(elem ...string) string {
		return a.In("alice", append([]string{"groups", "team-alpha"}, elem...)...)
	}
	gb := func(elem ...string) string { return b.In("bob", append([]string{"groups", "team-alpha"}, elem...)...) }

	// Names: created on A, seen on B though B's kernel had looked the
	// name up in vain just before (a negative entry).
	var lat []time.Duration
	for i := range 20 {
		name := fmt.Sprintf("n%02d", i)
		if _, err := os.Lstat(gb(name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s on B before it was made: %v", name, err)
		}
		mustWrite(t, ga(name), []byte(name), 0o644)
		took, ok := within(2*time.Second, func() bool { _, err := os.Lstat(gb(name)); return err == nil })
		if !ok {
			t.Fatalf("%s made on A: not seen on B after %v", name, took)
		}
		lat = append(lat, took)
	}
	slices.Sort(lat)
	t.Logf("a create on A seen by a stat on B after: p50 %v, max %v", lat[len(lat)/2], lat[len(lat)-1])

	// Content, close to open: B read v1, A rewrites, B's next open reads v2.
	mustWrite(t, ga("plan"), []byte("v1"), 0o644)
	if _, ok := within(2*time.Second, func() bool { got, _ := os.ReadFile(gb("plan")); return string(got) == "v1" }); !ok {
		t.Fatal("plan v1 from A not read on B")
	}
	mustWrite(t, ga("plan"), []byte("version 2"), 0o644)
	if took, ok := within(2*time.Second, func() bool { got, _ := os.ReadFile(gb("plan")); return string(got) == "version 2" }); !ok {
		t.Fatal("plan rewritten on A: B still reads the old content")
	} else {
		t.Logf("a rewrite on A read by an open on B after %v", took)
	}

	// A rename and a mode change on B, seen on A; alice's private home
	// too, with views of her on both hosts.
	wantOK(t, "rename on B", os.Rename(gb("plan"), gb("plan2")))
	if _, ok := within(2*time.Second, func() bool { _, err := os.Lstat(ga("plan2")); return err == nil }); !ok {
		t.Error("rename on B not seen on A")
	}
	mustWrite(t, a.In("alice", "notes"), []byte("mine"), 0o644)
	if _, ok := within(2*time.Second, func() bool { got, _ := os.ReadFile(b.In("alice", "notes")); return string(got) == "mine" }); !ok {
		t.Fatal("alice's notes from A not seen in her view on B")
	}
	wantOK(t, "chmod on B", os.Chmod(b.In("alice", "notes"), 0o600))
	if _, ok := within(2*time.Second, func() bool {
		fi, err := os.Stat(a.In("alice", "notes"))
		return err == nil && fi.Mode().Perm() == 0o600
	}); !ok {
		t.Error("chmod 600 on B not seen on A")
	}

	// Unlinked while open on another host: bob holds it on B, alice
	// removes it on A; bob still reads it.
	held := bytes.Repeat([]byte("held"), 1000)
	mustWrite(t, ga("held"), held, 0o644)
	var fd *os.File
	if _, ok := within(2*time.Second, func() bool {
		// The name can reach B before the size A's close stored (the
		// change feed brings them apart): open once B has both.
		f, err := os.Open(gb("held"))
		if err != nil {
			return false
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(held)) {
			f.Close()
			return false
		}
		fd = f
		return true
	}); !ok {
		t.Fatal("held from A not opened on B with its content")
	}
	defer fd.Close()
	wantOK(t, "rm on A of a file open on B", os.Remove(ga("held")))
	buf := make([]byte, len(held)+1)
	if n, err := fd.ReadAt(buf, 0); n != len(held) || !bytes.Equal(buf[:n], held) {
		t.Errorf("read on B of a file removed on A while open: %d bytes, %v", n, err)
	}

	// 8 writers, 4 on each host, fill the group: the sum never passes
	// its limit.
	mustMkdir(t, ga("w"), 0o755)
	if _, ok := within(2*time.Second, func() bool { _, err := os.Stat(gb("w")); return err == nil }); !ok {
		t.Fatal("w from A not seen on B")
	}
	chunk := bytes.Repeat([]byte("q"), 64<<10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked int64
	var odd []string
	for w := range 8 {
		dir := ga("w")
		if w%2 == 1 {
			dir = gb("w")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("f%d", w)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				mu.Lock()
				odd = append(odd, err.Error())
				mu.Unlock()
				return
			}
			defer f.Close()
			for {
				n, err := f.Write(chunk)
				mu.Lock()
				acked += int64(n)
				if err != nil && !errors.Is(err, syscall.EDQUOT) {
					odd = append(odd, err.Error())
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, o := range odd {
		t.Errorf("writer: %s", o)
	}
	used := int64(21 * 4096) // n00..n19 and plan2, a 4 KiB charge each
	if acked+used > limit {
		t.Errorf("8 writers on two hosts wrote %d bytes acknowledged past %d already used: over the 2 MiB group quota", acked, used)
	}
	if acked < limit/2 {
		t.Errorf("8 writers on two hosts wrote only %d bytes of a 2 MiB quota", acked)
	}
	t.Logf("8 writers on two hosts: %d bytes acknowledged under a %d byte quota", acked, limit)

	// kill -9 of B: A keeps serving; B's lease expires, its open marker
	// with it, and A reclaims the file B held; fsck is clean.
	// ... and a lock taken on B (in alice's home: the group is full),
	// which stops a lock on A until B's lease expires.
	mustWrite(t, a.In("alice", "locked"), []byte("x"), 0o644)
	if _, ok := within(2*time.Second, func() bool { _, err := os.Stat(b.In("alice", "locked")); return err == nil }); !ok {
		t.Fatal("locked from A not seen on B")
	}
	holder := startLocker(t, "alice's writer on B", "flock", true, false, b.In("alice", "locked"))
	holder.expect("locked", 5*time.Second)
	wantErrno(t, "a lock on A of a file locked on B", tryLock(t, "flock", true, a.In("alice", "locked")), unix.EAGAIN)
	blobDir := filepath.Dir(s.args[3])
	before := len(blobFiles(t, blobDir)) // held's among them
	b.Kill()                             // with bob's handle on held still open, and his lock
	fd.Close()
	for _, m := range mounts() {
		if strings.HasPrefix(m.point, b.Root+"/") {
			abortAndDetach(m)
		}
	}
	mustWrite(t, a.In("alice", "after-kill"), []byte("still here"), 0o644) // the group is full
	os.Remove(sockB)
	// held's blob goes (and after-kill's came): A reclaimed the orphan
	// once B's open marker expired with its lease.
	took, ok := within(25*time.Second, func() bool {
		time.Sleep(100 * time.Millisecond)
		return len(blobFiles(t, blobDir)) == before
	})
	if !ok {
		t.Errorf("held, open on B when it was killed, not reclaimed %v after", took)
	} else {
		t.Logf("held reclaimed by A %v after kill -9 of B (its lease expired)", took.Round(100*time.Millisecond))
	}
	if err := tryLock(t, "flock", true, a.In("alice", "locked")); err != nil {
		t.Errorf("alice's lock on A once B's lease expired: %v", err)
	}
	out, errOut, code := runCLI(t, append([]string{"fsck", "--dry-run"}, s.args...)...)
	if code != 0 || !hasCleanLine(out+errOut) {
		t.Errorf("fsck --dry-run after B was killed: exit %d\n%s%s", code, out, errOut)
		ents, _ := os.ReadDir(ga("w"))
		for _, e := range ents {
			fi, _ := e.Info()
			t.Logf("w/%s: %d bytes", e.Name(), fi.Size())
		}
	}
	if got := mustRead(t, a.In("alice", "after-kill")); string(got) != "still here" {
		t.Errorf("after-kill on A: %q", got)
	}
	a.Stop()
}
