package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// File locks through several views: each view is its own mount, so only
// the daemon can make a lock taken in alice's view stop bob's. Holders and
// waiters are child processes (the test binary run as lockerMain), one per
// lock, so that each is its own lock owner and can be killed.

// lockerEnv makes the test binary a locker child instead of running tests.
const lockerEnv = "SHEDFS_IT_LOCKER"

// lockKinds are the three lock interfaces: flock(2), fcntl POSIX record
// locks and fcntl OFD locks.
var lockKinds = []string{"flock", "posix", "ofd"}

// lockerMain is the locker child: `KIND r|w try|wait PATH [START LEN]`
// opens PATH, takes the lock (F_SETLK/F_SETLKW, F_OFD_SETLK/F_OFD_SETLKW,
// flock with or without LOCK_NB) on the whole file or the given bytes,
// prints "locked" or the errno name, and holds the lock until its stdin
// closes.
func lockerMain(args []string) int {
	if len(args) != 4 && len(args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: KIND r|w try|wait PATH [START LEN]")
		return 2
	}
	kind, typ, mode, path := args[0], args[1], args[2], args[3]
	var start, n int64
	if len(args) == 6 {
		start, _ = strconv.ParseInt(args[4], 10, 64)
		n, _ = strconv.ParseInt(args[5], 10, 64)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	fmt.Println("opened")
	err = takeLock(int(f.Fd()), kind, typ == "w", mode == "wait", start, n)
	if err != nil {
		fmt.Println(errnoName(err))
		return 1
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// takeLock takes a lock of kind on fd: for fcntl kinds on n bytes from
// start (n = 0: to the end of the file), for flock on the whole file.
func takeLock(fd int, kind string, write, wait bool, start, n int64) error {
	if kind == "flock" {
		how := unix.LOCK_SH
		if write {
			how = unix.LOCK_EX
		}
		if !wait {
			how |= unix.LOCK_NB
		}
		return unix.Flock(fd, how)
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: start, Len: n}
	if write {
		lk.Type = unix.F_WRLCK
	}
	return unix.FcntlFlock(uintptr(fd), fcntlCmd(kind, wait), &lk)
}

// fcntlCmd is the fcntl command that sets a lock of kind.
func fcntlCmd(kind string, wait bool) int {
	switch {
	case kind == "ofd" && wait:
		return unix.F_OFD_SETLKW
	case kind == "ofd":
		return unix.F_OFD_SETLK
	case wait:
		return unix.F_SETLKW
	}
	return unix.F_SETLK
}

func errnoName(err error) string {
	var e unix.Errno
	if asErrno(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// locker is one running locker child.
type locker struct {
	t     *testing.T
	what  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
}

// startLocker starts a locker child taking a lock of kind on path (extra:
// START LEN) and waits until it has the file open.
func startLocker(t *testing.T, what, kind string, write, wait bool, path string, extra ...string) *locker {
	t.Helper()
	typ, mode := "r", "try"
	if write {
		typ = "w"
	}
	if wait {
		mode = "wait"
	}
	cmd := exec.Command(os.Args[0], append([]string{kind, typ, mode, path}, extra...)...)
	cmd.Env = append(os.Environ(), lockerEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start locker: %v", what, err)
	}
	l := &locker{t: t, what: what, cmd: cmd, stdin: stdin, lines: make(chan string, 4), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		close(l.lines)
	}()
	go func() {
		cmd.Wait()
		close(l.done)
	}()
	t.Cleanup(l.kill)
	if got := l.next(10 * time.Second); got != "opened" {
		t.Fatalf("%s: locker says %q, want opened", what, got)
	}
	return l
}

// next returns the child's next line, "" if it ends or says nothing
// within d.
func (l *locker) next(d time.Duration) string {
	select {
	case s, ok := <-l.lines:
		if ok {
			return s
		}
	case <-time.After(d):
	}
	return ""
}

// expect fails the test unless the child says want within d.
func (l *locker) expect(want string, d time.Duration) {
	l.t.Helper()
	if got := l.next(d); got != want {
		l.t.Fatalf("%s: locker says %q within %v, want %q", l.what, got, d, want)
	}
}

// waiting fails the test if the child says anything within a while: it is
// still blocked on its lock.
func (l *locker) waiting() {
	l.t.Helper()
	if got := l.next(300 * time.Millisecond); got != "" {
		l.t.Fatalf("%s: locker says %q, want it still waiting for the lock", l.what, got)
	}
}

// release closes the child's stdin: it exits, closing the file.
func (l *locker) release() {
	l.stdin.Close()
	l.wait()
}

// kill ends the child with SIGKILL, wherever it is.
func (l *locker) kill() {
	l.cmd.Process.Kill()
	l.wait()
}

func (l *locker) wait() {
	l.t.Helper()
	select {
	case <-l.done:
	case <-time.After(10 * time.Second):
		l.t.Errorf("%s: locker still running 10s after it was told to end", l.what)
	}
}

// tryLock takes a non-blocking whole-file lock of kind on path in this
// process and returns its error; a lock it gets is released at once.
func tryLock(t *testing.T, kind string, write bool, path string) error {
	t.Helper()
	return tryRange(t, kind, write, path, 0, 0)
}

// tryRange is tryLock on n bytes from start.
func tryRange(t *testing.T, kind string, write bool, path string, start, n int64) error {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return takeLock(int(f.Fd()), kind, write, false, start, n)
}

// statusLocks returns the locks `shedfs status --json` lists.
func statusLocks(t *testing.T, store string) []lockInfo {
	t.Helper()
	var st struct {
		Locks []lockInfo `json:"locks"`
	}
	out := adminOK(t, "status", "--json", "--store", store)
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st.Locks
}

type lockInfo struct {
	User  string `json:"user"`
	Path  string `json:"path"`
	Ino   uint64 `json:"ino"`
	Kind  string `json:"kind"`
	Type  string `json:"type"`
	Start uint64 `json:"start"`
	Len   uint64 `json:"len"`
	PID   int    `json:"pid"`
}

// TestLocksAcrossViews: for flock, POSIX and OFD locks, a lock alice holds
// in her view on a group file stops bob's in his: a non-blocking attempt
// fails with EAGAIN, a blocking one waits until alice's process lets go,
// whether it closes the file or is killed; shared locks coexist; status
// lists the holder.
func TestLocksAcrossViews(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	for _, kind := range lockKinds {
		t.Run(kind, func(t *testing.T) {
			name := "lock-" + kind
			mustWrite(t, s.In("alice", "groups", "team-alpha", name), []byte("x"), 0o644)
			A := s.In("alice", "groups", "team-alpha", name)
			B := s.In("bob", "groups", "team-alpha", name)

			holder := startLocker(t, "alice's writer", kind, true, false, A)
			holder.expect("locked", 5*time.Second)
			wantErrno(t, "bob's non-blocking write lock", tryLock(t, kind, true, B), unix.EAGAIN)
			wantErrno(t, "bob's non-blocking read lock", tryLock(t, kind, false, B), unix.EAGAIN)

			ls := statusLocks(t, s.Store)
			want := lockInfo{User: "alice", Path: "/groups/team-alpha/" + name, Kind: kind, Type: "write", PID: holder.cmd.Process.Pid}
			if kind == "ofd" {
				want.Kind = "posix" // FUSE does not tell OFD from POSIX locks
			}
			if len(ls) != 1 || ls[0].User != want.User || ls[0].Path != want.Path || ls[0].Kind != want.Kind ||
				ls[0].Type != want.Type || ls[0].PID != want.PID || ls[0].Start != 0 || ls[0].Len != 0 {
				t.Errorf("status locks = %+v, want one like %+v", ls, want)
			}

			// A blocking attempt waits until the holder closes.
			waiter := startLocker(t, "bob's waiting writer", kind, true, true, B)
			waiter.waiting()
			holder.release()
			waiter.expect("locked", 5*time.Second)

			// Now bob holds it; alice waits, and gets it when bob's
			// process is killed.
			waiter2 := startLocker(t, "alice's waiting reader", kind, false, true, A)
			waiter2.waiting()
			waiter.kill()
			waiter2.expect("locked", 5*time.Second)

			// Shared locks coexist across views; a writer still waits.
			reader := startLocker(t, "bob's reader", kind, false, false, B)
			reader.expect("locked", 5*time.Second)
			writer := startLocker(t, "bob's waiting writer", kind, true, true, B)
			writer.waiting()
			waiter2.release()
			writer.waiting()
			reader.release()
			writer.expect("locked", 5*time.Second)
			writer.release()

			if ls := statusLocks(t, s.Store); len(ls) != 0 {
				t.Errorf("locks left after every holder ended: %+v", ls)
			}
			if err := tryLock(t, kind, true, A); err != nil {
				t.Errorf("alice's write lock once everyone let go: %v", err)
			}
		})
	}
}

// TestLocksRanges: POSIX and OFD byte-range locks taken in two views
// conflict only where they overlap, and F_GETLK and F_OFD_GETLK in bob's
// view report alice's lock with her process's pid.
func TestLocksRanges(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	for _, kind := range []string{"posix", "ofd"} {
		t.Run(kind, func(t *testing.T) {
			A := s.In("alice", "groups", "team-alpha", "ranges-"+kind)
			B := s.In("bob", "groups", "team-alpha", "ranges-"+kind)
			mustWrite(t, A, make([]byte, 100), 0o644)
			holder := startLocker(t, "alice's bytes 10-19", kind, true, false, A, "10", "10")
			holder.expect("locked", 5*time.Second)

			wantOK(t, "bob locks bytes 0-9", tryRange(t, kind, true, B, 0, 10))
			wantOK(t, "bob locks bytes 20-29", tryRange(t, kind, true, B, 20, 10))
			wantErrno(t, "bob locks bytes 15-24", tryRange(t, kind, true, B, 15, 10), unix.EAGAIN)
			wantErrno(t, "bob read-locks byte 19", tryRange(t, kind, false, B, 19, 1), unix.EAGAIN)
			wantErrno(t, "bob locks from 5 to the end", tryRange(t, kind, true, B, 5, 0), unix.EAGAIN)

			for _, cmd := range []int{unix.F_GETLK, unix.F_OFD_GETLK} {
				f, err := os.OpenFile(B, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 0}
				err = unix.FcntlFlock(f.Fd(), cmd, &lk)
				f.Close()
				if err != nil || lk.Type != unix.F_WRLCK || lk.Start != 10 || lk.Len != 10 {
					t.Errorf("getlk %d in bob's view: %v, %+v; want alice's write lock on 10-19", cmd, err, lk)
				}
				if cmd == unix.F_GETLK && kind == "posix" && int(lk.Pid) != holder.cmd.Process.Pid {
					t.Errorf("F_GETLK names pid %d, want alice's process %d", lk.Pid, holder.cmd.Process.Pid)
				}
			}
			holder.release()
			// The kernel sends the RELEASE that drops an OFD lock
			// asynchronously after the last close, so the lock may
			// outlive the process by a moment; a POSIX lock goes with
			// the synchronous FLUSH of its close.
			err := tryRange(t, kind, true, B, 15, 10)
			for deadline := time.Now().Add(5 * time.Second); kind == "ofd" && err == unix.EAGAIN && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				err = tryRange(t, kind, true, B, 15, 10)
			}
			wantOK(t, "bob locks bytes 15-24 after alice's process ended", err)
		})
	}
}

// TestLocksOwners: who owns a lock is what Linux says, through a view too.
// Two descriptors of one process share its POSIX locks (they never
// conflict, and closing either releases them), while flock and OFD locks
// belong to the open file description: a second open of the same file in
// the same process conflicts with them, and closing another descriptor
// leaves them. Bob's process checks what is held.
func TestLocksOwners(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	open2 := func(path string) (*os.File, *os.File) {
		t.Helper()
		f1, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		f2, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f1, f2
	}
	for _, kind := range lockKinds {
		t.Run(kind, func(t *testing.T) {
			A := s.In("alice", "groups", "team-alpha", "owners-"+kind)
			B := s.In("bob", "groups", "team-alpha", "owners-"+kind)
			mustWrite(t, A, []byte("x"), 0o644)
			f1, f2 := open2(A)
			defer f1.Close()
			wantOK(t, "write lock through the first descriptor", takeLock(int(f1.Fd()), kind, true, false, 0, 0))
			err := takeLock(int(f2.Fd()), kind, false, false, 0, 0)
			if kind == "posix" {
				// POSIX locks belong to the process: the read lock
				// replaces its write lock (the test posixtest's
				// FcntlFlockLocksFile gets wrong; see skipPosix).
				wantOK(t, "read lock through the second descriptor of the same process", err)
			} else {
				wantErrno(t, "read lock through a second open file description", err, unix.EAGAIN)
			}
			checker := startLocker(t, "bob's writer", kind, true, false, B)
			checker.expect("EAGAIN", 5*time.Second)
			checker.kill()

			f2.Close()
			checker = startLocker(t, "bob's writer after the second descriptor closed", kind, true, false, B)
			if kind == "posix" {
				// Any close by the process releases its POSIX locks.
				checker.expect("locked", 5*time.Second)
			} else {
				checker.expect("EAGAIN", 5*time.Second)
			}
			checker.kill()
		})
	}
}

// TestLocksRemovedMember: a member removed from a group cannot take new
// locks through a handle opened before (EACCES, audited as a denial of
// lock), and can still let go of the ones he held.
func TestLocksRemovedMember(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	mustWrite(t, s.In("alice", "groups", "team-alpha", "members"), []byte("x"), 0o644)
	f, err := os.OpenFile(s.In("bob", "groups", "team-alpha", "members"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wantOK(t, "bob's flock while a member", unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))

	adminOK(t, "group", "remove-member", "team-alpha", "bob", "--store", s.Store)

	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	wantErrno(t, "bob's fcntl lock after his removal", unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk), unix.EACCES)
	wantOK(t, "bob's unlock after his removal", unix.Flock(int(f.Fd()), unix.LOCK_UN))
	if err := tryLock(t, "flock", true, s.In("alice", "groups", "team-alpha", "members")); err != nil {
		t.Errorf("alice's flock once bob let go: %v", err)
	}
	waitTrail(t, s.Store, 5*time.Second, "bob's refused lock", func(recs []trailRecord) bool {
		for _, r := range recs {
			if r.Op == "lock" && r.Result == "EACCES" && r.Path == "/groups/team-alpha/members" {
				return true
			}
		}
		return false
	}, "--denied", "--user", "bob")
}

// perlLockIntr is a perl program that takes a blocking lock of kind
// ARGV[1] on ARGV[0] with an alarm in one second, and prints "EINTR" if
// the wait is interrupted by it. Perl installs its handlers without
// SA_RESTART, so the interrupted call returns EINTR instead of restarting
// (a Go process cannot show this: its runtime restarts every call).
const perlLockIntr = `
use strict; use Fcntl qw(:DEFAULT :flock);
my ($path, $kind) = @ARGV;
open(my $fh, "+<", $path) or die "open: $!";
$SIG{ALRM} = sub {};
alarm 1;
my $ok;
if ($kind eq "flock") {
	$ok = flock($fh, LOCK_EX);
} else {
	my $cmd = $kind eq "ofd" ? 38 : F_SETLKW; # 38 is F_OFD_SETLKW
	# struct flock on 64-bit Linux: short type, short whence, off_t start,
	# off_t len, pid_t pid, with padding.
	my $lk = pack("s s x4 q q l x4", F_WRLCK, 0, 0, 0, 0);
	$ok = fcntl($fh, $cmd, $lk);
}
print $ok ? "locked\n" : ($!{EINTR} ? "EINTR\n" : "error: $!\n");
`

// TestLocksInterrupted: a process waiting for a lock held in another view
// gets EINTR when a signal interrupts the wait, a waiter killed with
// SIGKILL dies at once, and neither is granted the lock afterwards.
func TestLocksInterrupted(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	for _, kind := range lockKinds {
		t.Run(kind, func(t *testing.T) {
			A := s.In("alice", "groups", "team-alpha", "intr-"+kind)
			mustWrite(t, A, []byte("x"), 0o644)
			holder := startLocker(t, "alice's writer", kind, true, false, A)
			holder.expect("locked", 5*time.Second)
			start := time.Now()
			out, _ := tool(t, "perl", "-e", perlLockIntr, s.In("bob", "groups", "team-alpha", "intr-"+kind), kind)
			if strings.TrimSpace(out) != "EINTR" {
				t.Errorf("bob's interrupted wait: %q, want EINTR", out)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the interrupted wait took %v", d)
			}
			// A waiter killed with SIGKILL dies at once (the kernel
			// interrupts the wait) and is granted nothing.
			killed := startLocker(t, "bob's waiter, killed", kind, true, true, s.In("bob", "groups", "team-alpha", "intr-"+kind))
			killed.waiting()
			killed.kill()
			holder.release()
			// flock and OFD locks go with the kernel's asynchronous
			// RELEASE after the last close (of the holder, and of a
			// waiter killed just as it was granted), so they may
			// outlive their process by a moment; left behind means
			// still there seconds later.
			err := tryLock(t, kind, true, A)
			for deadline := time.Now().Add(5 * time.Second); kind != "posix" && err == unix.EAGAIN && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				err = tryLock(t, kind, true, A)
			}
			if err != nil {
				t.Errorf("an interrupted or killed waiter left a lock behind: %v", err)
			}
		})
	}
}

// TestLocksSQLite: two sqlite3 processes, one in alice's view and one in
// bob's, increment one counter in a database in their group, each in many
// write transactions at once; no increment is lost and the database stays
// intact.
func TestLocksSQLite(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("sqlite3 not installed (CI=true)")
		}
		t.Skip("sqlite3 not installed (Debian package sqlite3)")
	}
	s := startTeam(t)
	const n = 150
	db := func(user string) string { return s.In(user, "groups", "team-alpha", "counter.db") }
	if out, code := tool(t, "sqlite3", db("alice"), "CREATE TABLE c(n INTEGER); INSERT INTO c VALUES (0);"); code != 0 {
		t.Fatalf("create the database: exit %d\n%s", code, out)
	}
	var script strings.Builder
	script.WriteString(".timeout 120000\n")
	for range n {
		script.WriteString("BEGIN IMMEDIATE; UPDATE c SET n = n + 1; COMMIT;\n")
	}
	type result struct {
		user string
		out  string
		err  error
	}
	results := make(chan result, 2)
	for _, user := range []string{"alice", "bob"} {
		go func() {
			cmd := exec.Command("sqlite3", "-bail", db(user))
			cmd.Stdin = strings.NewReader(script.String())
			out, err := cmd.CombinedOutput()
			results <- result{user, string(out), err}
		}()
	}
	for range 2 {
		select {
		case r := <-results:
			if r.err != nil {
				t.Errorf("%s's sqlite3: %v\n%s", r.user, r.err, truncate([]byte(r.out), 2000))
			}
		case <-time.After(4 * time.Minute):
			t.Fatal("the sqlite3 writers still run after 4 minutes")
		}
	}
	for _, user := range []string{"alice", "bob"} {
		out, code := tool(t, "sqlite3", db(user), "SELECT n FROM c; PRAGMA integrity_check;")
		if code != 0 || strings.TrimSpace(out) != strconv.Itoa(2*n)+"\nok" {
			t.Errorf("%s reads: exit %d, %q; want %d and ok", user, code, out, 2*n)
		}
	}
	if ls := statusLocks(t, s.Store); len(ls) != 0 {
		t.Errorf("locks left after sqlite3 ended: %+v", ls)
	}
	if t.Failed() {
		return
	}
	s.Stop()
	fsckClean(t, s.Store)
}
