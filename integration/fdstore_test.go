package integration

import (
	"bufio"
	"fmt"
	"net"
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

// fakeSystemd plays systemd for one Type=notify service with
// FileDescriptorStoreMax= set, as far as the file descriptor store goes
// (sd_notify(3), sd_listen_fds(3)): it reads the notify socket with the
// sender's credentials, accepts messages from the main process only,
// keeps the descriptors of "FDSTORE=1" messages under their FDNAME (and
// closes those sent without it), drops them on "FDSTOREREMOVE=1" and
// when they poll POLLERR or POLLHUP, and starts the service with them
// from descriptor 3 on, LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID set to
// the new process's pid.
type fakeSystemd struct {
	t    *testing.T
	path string
	conn *net.UnixConn
	// mainPid is the service's main process.
	mainPid atomic.Int64
	ready   chan struct{}

	mu      sync.Mutex
	store   []storedFd
	refused []string // messages from other processes
}

type storedFd struct {
	name string
	fd   int
}

func newFakeSystemd(t *testing.T) *fakeSystemd {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) })
	if serr != nil {
		t.Fatal(serr)
	}
	m := &fakeSystemd{t: t, path: path, conn: conn, ready: make(chan struct{}, 4)}
	t.Cleanup(func() {
		conn.Close()
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, s := range m.store {
			unix.Close(s.fd)
		}
		m.store = nil
	})
	go m.serve()
	return m
}

// serve reads the notify socket until it is closed.
func (m *fakeSystemd) serve() {
	buf := make([]byte, 4096)
	// systemd's NOTIFY_FD_MAX is 768.
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred)+unix.CmsgSpace(4*768))
	for {
		n, oobn, _, _, err := m.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		var fds []int
		var pid int32 = -1
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
			if cred, err := unix.ParseUnixCredentials(&msgs[i]); err == nil {
				pid = cred.Pid
			}
		}
		m.handle(string(buf[:n]), pid, fds)
	}
}

// handle acts on one message.
func (m *fakeSystemd) handle(text string, pid int32, fds []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if int64(pid) != m.mainPid.Load() {
		// NotifyAccess=main.
		m.refused = append(m.refused, fmt.Sprintf("pid %d: %q", pid, text))
		closeFds(fds)
		return
	}
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			fields[k] = v
		}
	}
	switch {
	case fields["FDSTORE"] == "1":
		name := fields["FDNAME"]
		if name == "" {
			name = "stored"
		}
		for _, fd := range fds {
			m.store = append(m.store, storedFd{name: name, fd: fd})
		}
		fds = nil
	case fields["FDSTOREREMOVE"] == "1":
		m.store = slices.DeleteFunc(m.store, func(s storedFd) bool {
			if s.name == fields["FDNAME"] {
				unix.Close(s.fd)
				return true
			}
			return false
		})
	}
	closeFds(fds)
	if fields["READY"] == "1" {
		m.ready <- struct{}{}
	}
}

func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// stored returns the names in the store, after dropping the descriptors
// that poll POLLERR or POLLHUP as systemd does.
func (m *fakeSystemd) stored() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.store = slices.DeleteFunc(m.store, func(s storedFd) bool {
		pfd := []unix.PollFd{{Fd: int32(s.fd)}}
		if n, _ := unix.Poll(pfd, 0); n > 0 && pfd[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			unix.Close(s.fd)
			return true
		}
		return false
	})
	var names []string
	for _, s := range m.store {
		names = append(names, s.name)
	}
	return names
}

// start starts `shedfs serve args... --mount-root root` as the service's
// main process with the store's descriptors, and waits for READY=1.
func (m *fakeSystemd) start(root string, env []string, args ...string) *View {
	m.t.Helper()
	names := m.stored()
	m.mu.Lock()
	// Copies for the child: the store keeps its own.
	var files []*os.File
	for _, s := range m.store {
		dup, err := unix.FcntlInt(uintptr(s.fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			m.mu.Unlock()
			m.t.Fatal(err)
		}
		files = append(files, os.NewFile(uintptr(dup), s.name))
	}
	m.mu.Unlock()
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	// LISTEN_PID is the pid of the process that reads the variables:
	// the shell's, which exec keeps.
	full := append([]string{"-c", `LISTEN_PID=$$ exec "$0" "$@"`, shedfsBin, "serve"}, append(args, "--mount-root", root)...)
	cmd := exec.Command("sh", full...)
	env = append(env, "NOTIFY_SOCKET="+m.path)
	if len(files) > 0 {
		env = append(env, "LISTEN_FDS="+strconv.Itoa(len(files)), "LISTEN_FDNAMES="+strings.Join(names, ":"))
	}
	cmd.Env = childEnv(env)
	cmd.ExtraFiles = files
	// The main process from its first message on: no message comes
	// before the exec.
	m.mu.Lock()
	v := launchCmd(m.t, root, cmd)
	m.mainPid.Store(int64(v.cmd.Process.Pid))
	m.mu.Unlock()
	select {
	case <-m.ready:
	case <-v.done:
		m.t.Fatalf("serve exited before READY=1: %v\nstderr:\n%s", v.err, v.Stderr())
	case <-time.After(mountTimeout):
		m.t.Fatalf("no READY=1 within %v\nstderr:\n%s", mountTimeout, v.Stderr())
	}
	return v
}

// TestTakeoverFDStore restarts serve twice as `systemctl restart` does
// with the unit's RestartKillSignal= (SIGUSR1) and FileDescriptorStoreMax=,
// systemd played by fakeSystemd, while a file kept open in the view is
// written every 10 ms, another is flock'ed, and a process lists and
// reads the view in a loop: no write fails, the lock stays held (a
// competitor gets EAGAIN), nobody sees an error, the views stay mounted
// while no daemon runs, and each start empties the store. Then a
// restart the store has no room for (FDSTORE=1) drains the views as a
// stop does, and a plain SIGTERM stops with nothing parked.
func TestTakeoverFDStore(t *testing.T) {
	requireFUSE(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	adminOK(t, "user", "add", "bob", "--store", store)
	sd := newFakeSystemd(t)
	root := newMountpoint(t)
	// Before the fake closes what it keeps: a view left without a daemon
	// would hold the test's processes forever.
	t.Cleanup(func() {
		for _, m := range mounts() {
			if strings.HasPrefix(m.point, root+"/") {
				t.Errorf("%s still mounted after serve stopped", m.point)
				abortAndDetach(m)
			}
		}
	})
	args := append([]string{"--store", store}, takeoverTransport...)
	cur := sd.start(root, nil, args...)
	view := filepath.Join(root, "alice")
	if names := sd.stored(); len(names) > 0 {
		t.Fatalf("a first start left %q in the store", names)
	}

	// The processes in the views are children, not the test: the test
	// forks each new daemon, and a fork's exec closes (and so FLUSHes)
	// every file of the view the forking process holds, which would
	// wait for the very daemon it starts.
	stopFile := filepath.Join(t.TempDir(), "stop")
	writer := exec.Command("sh", "-c", `exec 3>>log.txt; i=0
while [ ! -e "$0" ]; do echo $i >&3 || { echo "write $i failed"; exit 1; }; i=$((i+1)); sleep 0.01; done
echo "wrote $i"`, stopFile)
	writer.Dir = view
	reader := exec.Command("sh", "-c", `while [ ! -e "$0" ]; do
ls alice >/dev/null || echo "ls failed"
cat alice/log.txt >/dev/null || echo "cat failed"
echo bob >bob/note || echo "write failed"
sleep 0.02
done
echo done`, stopFile)
	reader.Dir = root
	// The lock holder, and a competitor that must keep failing.
	lockPath := filepath.Join(view, "lock")
	mustWrite(t, lockPath, nil, 0o644)
	holder := exec.Command("flock", "-x", "-n", lockPath, "-c", "echo locked; exec sleep 1000")
	var outs []*syncBuffer
	for _, c := range []*exec.Cmd{writer, reader, holder} {
		out := &syncBuffer{}
		c.Stdout, c.Stderr = out, out
		// A group of its own: flock's child (sleep) goes with it.
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		outs = append(outs, out)
	}
	for deadline := time.Now().Add(10 * time.Second); outs[2].String() != "locked\n"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("flock: %q", outs[2].String())
		}
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
	failed := func() error {
		if o := outs[0].String() + outs[1].String(); o != "" {
			return fmt.Errorf("the processes in the views said %q", o)
		}
		return nil
	}

	time.Sleep(300 * time.Millisecond)
	want := []string{"shedfs-view-0", "shedfs-view-1", "shedfs-handover"}
	for round := 1; round <= 2; round++ {
		cur.Signal(syscall.SIGUSR1)
		if !cur.waitExit(30 * time.Second) {
			t.Fatalf("restart %d: serve did not exit on SIGUSR1\nstderr:\n%s", round, cur.Stderr())
		}
		if code := exitCode(cur.err); code != 0 {
			t.Fatalf("restart %d: serve exited with %v\nstderr:\n%s", round, cur.err, cur.Stderr())
		}
		cur.markStopped()
		if names := sd.stored(); !slices.Equal(names, want) {
			t.Fatalf("restart %d: the store holds %q, want %q\nstderr:\n%s", round, names, want, cur.Stderr())
		}
		// No daemon runs: the views are still mounted.
		for _, u := range []string{"alice", "bob"} {
			if _, ok := findMount(filepath.Join(root, u)); !ok {
				t.Fatalf("restart %d: %s's view was unmounted", round, u)
			}
		}
		cur = sd.start(root, nil, args...)
		if !strings.Contains(cur.Stderr(), "took over the views") {
			t.Fatalf("restart %d: the new daemon did not adopt the views\nstderr:\n%s", round, cur.Stderr())
		}
		if names := sd.stored(); len(names) > 0 {
			t.Fatalf("restart %d: the new daemon left %q in the store", round, names)
		}
		competitorBlocked(fmt.Sprintf("after restart %d", round))
		if err := failed(); err != nil {
			t.Fatalf("after restart %d: %v", round, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	mustWrite(t, stopFile, nil, 0o644)
	if err := writer.Wait(); err != nil {
		t.Errorf("the writer: %v: %s", err, outs[0].String())
	}
	if err := reader.Wait(); err != nil || outs[1].String() != "done\n" {
		t.Errorf("the reader: %v: %s", err, outs[1].String())
	}
	syscall.Kill(-holder.Process.Pid, syscall.SIGKILL)
	holder.Wait()
	var written int64
	fmt.Sscanf(outs[0].String(), "wrote %d", &written)
	sc := bufio.NewScanner(strings.NewReader(string(mustRead(t, filepath.Join(view, "log.txt")))))
	n := int64(0)
	for sc.Scan() {
		if sc.Text() != strconv.FormatInt(n, 10) {
			t.Fatalf("log.txt line %d is %q", n, sc.Text())
		}
		n++
	}
	if n != written || n == 0 {
		t.Errorf("log.txt has %d lines, %d were written", n, written)
	}
	t.Logf("%d writes every 10 ms across two restarts, none failed", n)

	// A store too small for two views and the handover: a restart
	// drains and unmounts, as a stop does.
	cur.Stop()
	cur = sd.start(root, []string{"FDSTORE=2"}, args...)
	cur.Signal(syscall.SIGUSR1)
	if !cur.waitExit(30 * time.Second) {
		t.Fatalf("serve did not exit on SIGUSR1 with a small store\nstderr:\n%s", cur.Stderr())
	}
	cur.markStopped()
	if !strings.Contains(cur.Stderr(), "cannot be parked") || exitCode(cur.err) != 0 {
		t.Errorf("a restart the store has no room for: %v\nstderr:\n%s", cur.err, cur.Stderr())
	}
	for _, u := range []string{"alice", "bob"} {
		if _, ok := findMount(filepath.Join(root, u)); ok {
			t.Errorf("%s's view still mounted after a restart that could not park it", u)
		}
	}
	if names := sd.stored(); len(names) > 0 {
		t.Errorf("the store holds %q after a restart that could not park", names)
	}
	sd.mu.Lock()
	if len(sd.refused) > 0 {
		t.Errorf("messages from processes other than the main one: %q", sd.refused)
	}
	sd.mu.Unlock()
}

// Signal sends sig to the daemon.
func (v *View) Signal(sig os.Signal) {
	if err := v.cmd.Process.Signal(sig); err != nil {
		v.t.Fatalf("signal %v: %v", sig, err)
	}
}

// markStopped records that the daemon ended as the test wanted, so that
// its cleanup does not stop it again.
func (v *View) markStopped() {
	v.mu.Lock()
	v.stopped = true
	v.mu.Unlock()
}
