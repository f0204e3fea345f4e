package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// takeoverRounds is how many takeovers TestTakeover makes in a row.
const takeoverRounds = 10

// takeoverTransport is the transport the daemons of the takeover tests
// serve over: the one that can be handed over, whatever the default
// picks while another test turns FUSE over io_uring on.
var takeoverTransport = []string{"--transport", "dev"}

// TestTakeover hands the views of a running `shedfs serve` to a new one
// (serve --takeover) ten times in a row, once to a new one killed with
// SIGKILL during the takeover and once to one that fails (both times the
// old one restarts in place), while the view is busy: a file kept
// open is written every 10 ms, another is flock'ed, tar extracts a tree
// in a loop, and a bubblewrap sandbox with the view bind-mounted lists
// and reads it. No write may fail, the lock must stay held (a competitor
// gets EAGAIN), every tar must complete, the sandbox never sees an error,
// and a file unlinked while open stays usable, in a session's view too.
func TestTakeover(t *testing.T) {
	requireFUSE(t)
	requireBwrap(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--uid", containerUID, "--gid", containerUID, "--store", store)
	s := startServeWith(t, store, takeoverTransport, "alice")
	view := s.In("alice")
	tarball := takeoverTarball(t)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	// firstErr is the first error of the processes in the view.
	var errMu sync.Mutex
	var firstErr error
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	failed := func() error {
		errMu.Lock()
		defer errMu.Unlock()
		return firstErr
	}

	// The writer keeps its file open throughout.
	logFile, err := os.OpenFile(filepath.Join(view, "log.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var written, slowest atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			start := time.Now()
			if _, err := fmt.Fprintf(logFile, "%d\n", i); err != nil {
				fail(fmt.Errorf("write %d to the file kept open: %w", i, err))
				return
			}
			if d := int64(time.Since(start)); d > slowest.Load() {
				slowest.Store(d)
			}
			written.Store(int64(i + 1))
			time.Sleep(10 * time.Millisecond)
		}
	}()

	// The lock holder, and a competitor that must keep failing.
	lockPath := filepath.Join(view, "lock")
	holder, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("flock: %v", err)
	}
	competitorBlocked := func(when string) {
		t.Helper()
		f, err := os.Open(lockPath)
		if err != nil {
			t.Fatalf("%s: open the locked file: %v", when, err)
		}
		defer f.Close()
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != unix.EWOULDBLOCK {
			t.Fatalf("%s: a competitor's flock: %v, want EAGAIN: the lock was lost", when, err)
		}
	}

	// A session's view is handed over as well, with a file open in it.
	s.sessionOpen(t, "alice", "s1")
	scratch, err := os.OpenFile(filepath.Join(s.In("alice@s1"), "scratch.txt"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer scratch.Close()
	if _, err := scratch.WriteString("session "); err != nil {
		t.Fatal(err)
	}

	// A file unlinked while open stays readable and writable.
	orphan, err := os.OpenFile(filepath.Join(view, "orphan"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer orphan.Close()
	if _, err := orphan.WriteString("before "); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(view, "orphan")); err != nil {
		t.Fatal(err)
	}

	// While a competitor waits for the lock (flock without -n), a
	// takeover is refused and the daemon goes on serving.
	waiter := exec.Command("flock", "-x", lockPath, "-c", "true")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	// Only once its call waits in the kernel for the daemon's answer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", waiter.Process.Pid))
		if strings.Contains(string(wchan), "request_wait_answer") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flock does not wait for the lock (in %q)", wchan)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if out := runCLITakeover(t, store, s.Root); !strings.Contains(out, "wait for a lock") {
		t.Fatalf("a takeover while a lock call waited: %s", out)
	}
	waiter.Process.Kill()
	waiter.Wait()
	if s.exited() {
		t.Fatalf("the daemon exited after refusing a takeover\nstderr:\n%s", s.Stderr())
	}

	// tar extracts in a loop.
	var tars atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			dir := filepath.Join(view, "x", strconv.Itoa(i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				fail(fmt.Errorf("mkdir for tar %d: %w", i, err))
				return
			}
			if out, err := exec.Command("tar", "-xf", tarball, "-C", dir).CombinedOutput(); err != nil {
				fail(fmt.Errorf("tar %d: %v: %s", i, err, out))
				return
			}
			tars.Add(1)
		}
	}()

	// The sandbox lists and reads the view until told to stop; any error
	// it sees is in its output.
	sandboxOut := make(chan string, 1)
	go func() {
		script := `while [ ! -e /workspace/stop ]; do
ls /workspace >/dev/null || echo "ls failed"
cat /workspace/log.txt >/dev/null || echo "cat failed"
sleep 0.02
done
echo done`
		cmd := exec.Command("bwrap",
			"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
			"--die-with-parent", "--new-session",
			"--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
			"--bind", view, "/workspace",
			"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LC_ALL", "C",
			"setpriv", "--reuid", containerUID, "--regid", containerUID, "--clear-groups", "--",
			"sh", "-c", script)
		out, err := cmd.CombinedOutput()
		if err != nil {
			out = append(out, []byte("sandbox: "+err.Error())...)
		}
		sandboxOut <- string(out)
	}()

	// Let them all run a little before the first takeover.
	time.Sleep(300 * time.Millisecond)
	cur := s.View
	for round := 1; round <= takeoverRounds; round++ {
		cur = takeOver(t, store, s.Root, cur)
		competitorBlocked(fmt.Sprintf("after takeover %d", round))
		if err := failed(); err != nil {
			t.Fatalf("after takeover %d: %v", round, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cur = killDuringTakeover(t, store, s.Root, cur)
	competitorBlocked("after the killed takeover")
	// A new daemon that fails after the views were handed to it (its
	// views cannot be served over io_uring, or the kernel has none) has
	// the old one restart in place too.
	serving := strings.Count(cur.Stderr(), "msg=serving")
	if out := runCLITakeover(t, store, s.Root, "--transport", "uring"); !strings.Contains(out, "uring") {
		t.Fatalf("serve --takeover --transport uring: %s", out)
	}
	waitLog(t, cur, "msg=serving", serving+1)
	competitorBlocked("after the failed takeover")
	time.Sleep(300 * time.Millisecond)

	if _, err := orphan.WriteString("after"); err != nil {
		t.Errorf("write to the unlinked file: %v", err)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", orphan.Fd())); err != nil || string(b) != "before after" {
		t.Errorf("the unlinked file reads %q, %v", b, err)
	}
	if _, err := scratch.WriteString("kept"); err != nil {
		t.Errorf("write in the session's view: %v", err)
	}
	if err := scratch.Close(); err != nil {
		t.Errorf("close in the session's view: %v", err)
	}
	if got := string(mustRead(t, filepath.Join(s.In("alice@s1"), "scratch.txt"))); got != "session kept" {
		t.Errorf("the session's file reads %q", got)
	}
	if err := orphan.Close(); err != nil {
		t.Errorf("close the unlinked file: %v", err)
	}
	stop()
	wg.Wait()
	if err := failed(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(view, "stop"), nil, 0o644)
	select {
	case out := <-sandboxOut:
		if out != "done\n" {
			t.Errorf("the sandbox saw errors:\n%s", out)
		}
	case <-time.After(30 * time.Second):
		t.Error("the sandbox did not end")
	}
	if err := logFile.Close(); err != nil {
		t.Errorf("close the file kept open: %v", err)
	}
	holder.Close()
	// Every write is there, in order.
	sc := bufio.NewScanner(strings.NewReader(string(mustRead(t, filepath.Join(view, "log.txt")))))
	n := int64(0)
	for sc.Scan() {
		if sc.Text() != strconv.FormatInt(n, 10) {
			t.Fatalf("log.txt line %d is %q", n, sc.Text())
		}
		n++
	}
	if n != written.Load() {
		t.Errorf("log.txt has %d lines, %d were written", n, written.Load())
	}
	t.Logf("%d writes (the slowest took %v: the longest pause), %d tar extractions across %d takeovers, a killed one and a failed one",
		n, time.Duration(slowest.Load()).Round(time.Millisecond), tars.Load(), takeoverRounds)
	if tars.Load() == 0 {
		t.Error("no tar extraction completed")
	}
	cur.Stop()
}

// takeoverTarball makes a tar of a small tree outside the view.
func takeoverTarball(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	for d := range 4 {
		if err := os.MkdirAll(filepath.Join(src, "tree", strconv.Itoa(d)), 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 8 {
			mustWrite(t, filepath.Join(src, "tree", strconv.Itoa(d), strconv.Itoa(f)), []byte(strings.Repeat("x", 1000*f+1)), 0o644)
		}
	}
	tarball := filepath.Join(t.TempDir(), "tree.tar")
	if out, err := exec.Command("tar", "-cf", tarball, "-C", src, "tree").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	return tarball
}

// runCLITakeover runs `serve --takeover` to its end and returns its
// stderr: a refused takeover exits at once.
func runCLITakeover(t *testing.T, store, root string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"serve", "--store", store, "--takeover"}, extra...)
	out, err := exec.CommandContext(ctx, shedfsBin, append(args, "--mount-root", root)...).CombinedOutput()
	if err == nil {
		t.Fatalf("serve --takeover succeeded while it should have been refused:\n%s", out)
	}
	return string(out)
}

// startTakeover starts `serve --takeover` on store and root.
func startTakeover(t *testing.T, store, root string) *View {
	v := launchView(t, root, nil, append(append([]string{"serve", "--store", store, "--takeover"}, takeoverTransport...), "--mount-root"))
	v.Store = store
	return v
}

// takeOver has a new daemon take over from cur, and returns it once cur
// has exited and the new one serves.
func takeOver(t *testing.T, store, root string, cur *View) *View {
	t.Helper()
	next := startTakeover(t, store, root)
	if !cur.waitExit(30 * time.Second) {
		t.Fatalf("the old daemon did not exit after the takeover\nstderr:\n%s", cur.Stderr())
	}
	if code := exitCode(cur.err); code != 0 {
		t.Fatalf("the old daemon exited with %v\nstderr:\n%s", cur.err, cur.Stderr())
	}
	// Serving, its takeover socket listening.
	waitLog(t, next, "msg=serving", 1)
	cur.mu.Lock()
	cur.stopped = true
	cur.mu.Unlock()
	return next
}

// killDuringTakeover starts a takeover and kills the new daemon with
// SIGKILL once the old one has stopped serving and before the new one is
// ready; the old one must serve again (restarted in place). A new daemon
// that was ready before it could be stopped is let run, as a takeover,
// and the next one killed.
func killDuringTakeover(t *testing.T, store, root string, cur *View) *View {
	t.Helper()
	for range 5 {
		handing := strings.Count(cur.Stderr(), "handing every view")
		serving := strings.Count(cur.Stderr(), "msg=serving")
		served := strings.Count(cur.Stderr(), "the new daemon serves every view")
		next := startTakeover(t, store, root)
		deadline := time.Now().Add(30 * time.Second)
		for strings.Count(cur.Stderr(), "handing every view") == handing {
			if time.Now().After(deadline) {
				t.Fatalf("no takeover began\nstderr:\n%s", cur.Stderr())
			}
			time.Sleep(time.Millisecond)
		}
		next.cmd.Process.Signal(syscall.SIGSTOP)
		if strings.Count(cur.Stderr(), "the new daemon serves every view") > served || cur.exited() {
			next.cmd.Process.Signal(syscall.SIGCONT)
			t.Log("the new daemon was ready before it could be killed: counted as a takeover")
			if !cur.waitExit(30 * time.Second) {
				t.Fatal("the old daemon did not exit")
			}
			waitLog(t, next, "msg=serving", 1)
			cur.mu.Lock()
			cur.stopped = true
			cur.mu.Unlock()
			cur = next
			continue
		}
		next.Kill()
		// The old daemon restarts in place and adopts its views again.
		waitLog(t, cur, "msg=serving", serving+1)
		if cur.exited() {
			t.Fatalf("the old daemon exited\nstderr:\n%s", cur.Stderr())
		}
		return cur
	}
	t.Fatal("no takeover could be interrupted in five attempts")
	return nil
}

// waitLog waits until v's stderr says what n times.
func waitLog(t *testing.T, v *View, what string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(v.Stderr(), what) < n {
		if v.exited() || time.Now().After(deadline) {
			t.Fatalf("daemon did not log %q (%d times)\nstderr:\n%s", what, n, v.Stderr())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTakeoverHeldState hands two views (alice's and bob's) over three
// times while processes hold in them what TestTakeover does not: a
// POSIX record lock (F_SETLK) on a byte range in alice's view and an OFD
// lock in bob's, each held by its own process; a shell whose working
// directory is a subdirectory of bob's view; and a file of alice's view
// mmap'ed shared and written through the mapping. After every takeover a
// competitor still gets EAGAIN on the locked range and the lock on
// another range; at the end the shell lists, creates a file relative to
// its cwd and prints it, and msync writes the mapping to the file.
func TestTakeoverHeldState(t *testing.T) {
	requireFUSE(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	adminOK(t, "user", "add", "bob", "--store", store)
	s := startServeWith(t, store, takeoverTransport, "alice", "bob")

	// The record locks, each held by its own process.
	records := []struct{ kind, path string }{
		{"posix", s.In("alice", "records")},
		{"ofd", s.In("bob", "records")},
	}
	var holders []*locker
	for _, r := range records {
		mustWrite(t, r.path, make([]byte, 1000), 0o644)
		l := startLocker(t, r.kind+" holder", r.kind, true, false, r.path, "100", "100")
		l.expect("locked", 10*time.Second)
		holders = append(holders, l)
	}
	recordsHeld := func(when string) {
		t.Helper()
		for _, r := range records {
			for _, kind := range []string{"posix", "ofd"} {
				if err := tryRange(t, kind, true, r.path, 150, 10); err != unix.EAGAIN {
					t.Fatalf("%s: a competitor's %s lock on the range a %s lock holds: %v, want EAGAIN", when, kind, r.kind, err)
				}
				if err := tryRange(t, kind, true, r.path, 200, 100); err != nil {
					t.Fatalf("%s: a competitor's %s lock beside the range a %s lock holds: %v", when, kind, r.kind, err)
				}
			}
		}
	}
	recordsHeld("before the takeovers")

	// A shell in a subdirectory of bob's view, waiting for its commands.
	sub := s.In("bob", "work", "deep")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(sub, "present"), []byte("x"), 0o644)
	shell := exec.Command("sh", "-c", `cd work/deep && echo ready && read go && ls && echo made >made && pwd -P && cat made`)
	shell.Dir = s.In("bob")
	shellIn, err := shell.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer shellIn.Close()
	shellOut, err := shell.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	shell.Stderr = shell.Stdout
	shell.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	defer shell.Process.Kill()
	shellLines := bufio.NewScanner(shellOut)
	if !shellLines.Scan() || shellLines.Text() != "ready" {
		t.Fatalf("the shell did not cd into %s: %q", sub, shellLines.Text())
	}

	// A file mapped shared, written through the mapping.
	mapped, err := os.OpenFile(s.In("alice", "mapped"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	const pageSize = 4096
	if err := mapped.Truncate(2 * pageSize); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(mapped.Fd()), 0, 2*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	copy(mem, "before the takeovers")
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		t.Fatalf("msync before the takeovers: %v", err)
	}
	// Dirty, not yet written back, when the first takeover comes.
	copy(mem[pageSize:], "dirty across a takeover")

	cur := s.View
	for round := 1; round <= 3; round++ {
		cur = takeOver(t, store, s.Root, cur)
		recordsHeld(fmt.Sprintf("after takeover %d", round))
		copy(mem[pageSize+100*round:], fmt.Sprintf("round %d", round))
		if round == 2 {
			if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
				t.Fatalf("msync after takeover %d: %v", round, err)
			}
		}
	}

	// The shell goes on where it was.
	if _, err := io.WriteString(shellIn, "go\n"); err != nil {
		t.Fatal(err)
	}
	var said []string
	for shellLines.Scan() {
		said = append(said, shellLines.Text())
	}
	if err := shell.Wait(); err != nil {
		t.Errorf("the shell in %s: %v, said %q", sub, err, said)
	}
	if want := []string{"present", sub, "made"}; !slices.Equal(said, want) {
		t.Errorf("the shell in %s said %q after the takeovers, want %q", sub, said, want)
	}
	if got := string(mustRead(t, filepath.Join(sub, "made"))); got != "made\n" {
		t.Errorf("the file the shell made reads %q", got)
	}

	// What was written through the mapping is in the file.
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		t.Errorf("msync after the takeovers: %v", err)
	}
	got, err := os.ReadFile(s.In("alice", "mapped"))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 2*pageSize)
	copy(want, "before the takeovers")
	copy(want[pageSize:], "dirty across a takeover")
	for round := 1; round <= 3; round++ {
		copy(want[pageSize+100*round:], fmt.Sprintf("round %d", round))
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the mapped file reads %q..., want %q...", bytes.TrimRight(got[pageSize:], "\x00"), bytes.TrimRight(want[pageSize:], "\x00"))
	}
	recordsHeld("at the end")
	for _, l := range holders {
		l.release()
	}
	if err := unix.Munmap(mem); err != nil {
		t.Error(err)
	}
	if err := mapped.Close(); err != nil {
		t.Errorf("close the mapped file: %v", err)
	}
	cur.Stop()
}

// TestTakeoverFailsPartWay makes a takeover fail on the second of two
// views: a request of bob's view is still being served when the old
// daemon stops reading it (its file's blob is a symlink into the view of
// a third daemon, stopped with SIGSTOP, so that opening it waits), and
// stopping the view times out after alice's was handed over. The old
// daemon restarts in place: every view must be served again, files kept
// open in both views stay usable. Only the caller of the request under
// way is never answered: it waits until the view's connection ends.
func TestTakeoverFailsPartWay(t *testing.T) {
	requireFUSE(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	adminOK(t, "user", "add", "bob", "--store", store)
	s := startServeWith(t, store, takeoverTransport, "alice", "bob")
	other := newStore(t)
	adminOK(t, "user", "add", "carol", "--store", other)
	c := startServe(t, other, "carol")
	mustWrite(t, c.In("carol", "target"), []byte("carol's"), 0o644)

	// Files kept open in both views.
	kept := map[string]*os.File{}
	for _, u := range []string{"alice", "bob"} {
		f, err := os.OpenFile(s.In(u, "kept"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("before "); err != nil {
			t.Fatal(err)
		}
		kept[u] = f
	}

	// bob's file whose blob is carol's file.
	slow := s.In("bob", "slow")
	mustWrite(t, slow, []byte("bob's"), 0o644)
	var st unix.Stat_t
	if err := unix.Stat(slow, &st); err != nil {
		t.Fatal(err)
	}
	var blob string
	filepath.WalkDir(filepath.Join(store, "blobs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == strconv.FormatUint(st.Ino, 10) {
			blob = p
		}
		return nil
	})
	if blob == "" {
		t.Fatalf("no blob of inode %d under %s", st.Ino, filepath.Join(store, "blobs"))
	}
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(c.In("carol", "target"), blob); err != nil {
		t.Fatal(err)
	}
	// The third daemon stops; the open of bob's file waits for it.
	c.cmd.Process.Signal(syscall.SIGSTOP)
	resumed := false
	resume := func() {
		if !resumed {
			c.cmd.Process.Signal(syscall.SIGCONT)
			resumed = true
		}
	}
	defer resume()
	reader := exec.Command("cat", slow)
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	defer reader.Process.Kill()
	time.Sleep(500 * time.Millisecond)
	if wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", reader.Process.Pid)); !strings.Contains(string(wchan), "request_wait_answer") {
		t.Fatalf("cat %s does not wait for the daemon (in %q)", slow, wchan)
	}

	serving := strings.Count(s.Stderr(), "msg=serving")
	out := runCLITakeover(t, store, s.Root)
	t.Logf("the new daemon said:\n%s", out)
	waitLog(t, s.View, "takeover failed", 1)
	resume()
	waitLog(t, s.View, "msg=serving", serving+1)
	if s.exited() {
		t.Fatalf("the old daemon exited\nstderr:\n%s", s.Stderr())
	}
	for _, u := range []string{"alice", "bob"} {
		// A view nobody serves would leave the write waiting forever.
		done := make(chan error, 1)
		go func() {
			_, err := kept[u].WriteString("after")
			if cerr := kept[u].Close(); err == nil {
				err = cerr
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("write to and close the file kept open in %s's view after the failed takeover: %v", u, err)
				continue
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("a write to the file kept open in %s's view waits after the failed takeover: the view is not served\nstderr:\n%s", u, s.Stderr())
		}
		if got, err := os.ReadFile(s.In(u, "kept")); err != nil || string(got) != "before after" {
			t.Errorf("the file kept open in %s's view reads %q, %v", u, got, err)
		}
	}
	if _, err := os.ReadDir(s.In("bob")); err != nil {
		t.Errorf("list bob's view after the failed takeover: %v", err)
	}
	// The request that was being served is never answered: its caller
	// waits, even once killed, until the view's connection ends.
	reader.Process.Kill()
	exited := make(chan struct{})
	go func() {
		reader.Wait()
		close(exited)
	}()
	select {
	case <-exited:
		t.Log("the caller of the request under way ended: it was answered before the restart")
	case <-time.After(time.Second):
		m, ok := findMount(s.In("bob"))
		if !ok {
			t.Fatal("bob's view is not mounted")
		}
		abortAndDetach(m)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("cat %s, killed, does not end once the view's connection is aborted", slow)
		}
	}
	s.Stop()
	c.Stop()
}

// TestTakeoverSnapshots hands over a view whose kernel holds entries of
// snapshots/ (which have no store inode: the view numbers them): a shell
// whose working directory is a directory of a snapshot, and a file there
// looked up. After two takeovers they still are what they were: the
// shell lists its directory and reads the file, and writing there is
// still refused (EROFS).
func TestTakeoverSnapshots(t *testing.T) {
	requireFUSE(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServeWith(t, store, takeoverTransport, "alice")
	if err := os.MkdirAll(s.In("alice", "proj", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s.In("alice", "proj", "sub", "f.txt"), []byte("frozen"), 0o644)
	adminOK(t, "snapshot", "create", "--store", store, "--user", "alice", "--path", "proj", "s1")
	mustWrite(t, s.In("alice", "proj", "sub", "f.txt"), []byte("changed"), 0o644)

	// A file of the snapshot kept open across the takeovers: it reads on,
	// and a second open after them reads too (with FUSE passthrough the
	// kernel kept the old daemon's backing file and refused it with EIO).
	kept, err := os.Open(s.In("alice", "snapshots", "s1", "sub", "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	if got, err := io.ReadAll(kept); err != nil || string(got) != "frozen" {
		t.Fatalf("the snapshot's file reads %q, %v", got, err)
	}
	// fstat of the open file shows the snapshot entry, as stat does.
	byPath, err1 := os.Stat(kept.Name())
	byFd, err2 := kept.Stat()
	if err1 != nil || err2 != nil || byPath.Mode() != byFd.Mode() || !byPath.ModTime().Equal(byFd.ModTime()) ||
		byPath.Sys().(*syscall.Stat_t).Uid != byFd.Sys().(*syscall.Stat_t).Uid || byPath.Sys().(*syscall.Stat_t).Ino != byFd.Sys().(*syscall.Stat_t).Ino {
		t.Errorf("fstat of a snapshot's open file gives %v %v, stat of its path %v %v (%v, %v)", byFd.Mode(), byFd.Sys(), byPath.Mode(), byPath.Sys(), err1, err2)
	}
	shell := exec.Command("sh", "-c", `cd snapshots/s1/sub && echo ready && read go && ls && cat f.txt && echo && (echo x >g.txt) 2>&1`)
	shell.Dir = s.In("alice")
	shellIn, err := shell.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer shellIn.Close()
	shellOut, err := shell.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	shell.Stderr = shell.Stdout
	shell.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	defer shell.Process.Kill()
	lines := bufio.NewScanner(shellOut)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the shell did not cd into the snapshot: %q", lines.Text())
	}
	cur := s.View
	for range 2 {
		cur = takeOver(t, store, s.Root, cur)
	}
	if n, err := kept.ReadAt(make([]byte, 6), 0); err != nil || n != 6 {
		t.Errorf("the snapshot's file kept open reads %d bytes after the takeovers: %v", n, err)
	}
	for i := range 3 {
		if got, err := os.ReadFile(s.In("alice", "snapshots", "s1", "sub", "f.txt")); err != nil || string(got) != "frozen" {
			t.Errorf("open %d of the snapshot's file after the takeovers reads %q, %v", i+1, got, err)
		}
	}
	io.WriteString(shellIn, "go\n")
	var said []string
	for lines.Scan() {
		said = append(said, lines.Text())
	}
	shell.Wait()
	if len(said) != 3 || said[0] != "f.txt" || said[1] != "frozen" || !strings.Contains(said[2], "Read-only") {
		t.Errorf("the shell in the snapshot said %q after the takeovers, want f.txt, frozen and a read-only refusal", said)
	}
	kept.Close() // the view is in use while it is open: the stop would wait for it
	cur.Stop()
}
