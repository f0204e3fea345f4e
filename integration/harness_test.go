package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Timeouts of the harness. They are generous for a loaded 2-core machine but
// short enough that a hung daemon shows up as a failure, not as a test
// binary killed by the go test timeout.
const (
	mountTimeout = 10 * time.Second // from start to the mount in mountinfo
	stopTimeout  = 5 * time.Second  // from SIGTERM to exit
	cliTimeout   = 3 * time.Minute  // one runCLI command
	// viewWatchdog is how long a view may stay up before the harness
	// decides the daemon or the test hung, fails the test and kills the
	// daemon so that stuck callers get ENOTCONN instead of hanging.
	viewWatchdog = 300 * time.Second
)

// shedfsBin is the binary under test, set by TestMain.
var shedfsBin string

// TestMain builds the shedfs binary (unless SHEDFS_BIN names one) and runs
// the tests; with lockerEnv set, the binary is a locker child instead. A
// build failure fails the whole run loudly.
func TestMain(m *testing.M) {
	if os.Getenv(lockerEnv) != "" {
		os.Exit(lockerMain(os.Args[1:]))
	}
	if disk := os.Getenv(fullDiskCommitsEnv); disk != "" {
		os.Exit(fullDiskCommitsMain(disk))
	}
	flag.Parse()
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	defer stopClamd()
	if bin := os.Getenv("SHEDFS_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return 0, err
		}
		if _, err := os.Stat(abs); err != nil {
			return 0, fmt.Errorf("SHEDFS_BIN: %w", err)
		}
		shedfsBin = abs
		return m.Run(), nil
	}
	if testing.Short() {
		// Nothing is built in -short mode; the tests skip themselves.
		return m.Run(), nil
	}
	root, err := moduleRoot()
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "shedfs-it-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	shedfsBin = filepath.Join(dir, "shedfs")
	cmd := exec.Command("go", "build", "-o", shedfsBin, "./cmd/shedfs")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("building ./cmd/shedfs in %s: %v\n%s", root, err, out)
	}
	return m.Run(), nil
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// requireFUSE skips the test (or fails it when CI=true) unless we are root
// and /dev/fuse is a character device we can open.
func requireFUSE(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration tests mount FUSE views; skipped in -short mode")
	}
	reason := ""
	if os.Geteuid() != 0 {
		reason = fmt.Sprintf("integration tests need root to mount FUSE views without fusermount (euid is %d)", os.Geteuid())
	} else if fi, err := os.Stat("/dev/fuse"); err != nil {
		reason = fmt.Sprintf("integration tests need /dev/fuse: %v", err)
	} else if fi.Mode()&fs.ModeCharDevice == 0 {
		reason = "integration tests need /dev/fuse, which is not a character device here"
	} else if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		reason = fmt.Sprintf("integration tests cannot open /dev/fuse: %v", err)
	} else {
		f.Close()
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: failing instead of skipping)", reason)
	}
	t.Skip(reason)
}

// syncBuffer is a bytes.Buffer safe for the exec copy goroutine and readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// View is one mounted view served by a shedfs child process.
type View struct {
	// Dir is the mountpoint: act on the view through paths under it.
	Dir string
	// Store is the store directory the view serves (empty if not known).
	Store string
	// User is the principal the view was mounted for.
	User string

	t      testing.TB
	cmd    *exec.Cmd
	stderr *syncBuffer
	stdout *syncBuffer
	done   chan struct{} // closed once the child has exited
	err    error         // the result of cmd.Wait, valid after done

	watchdog *time.Timer

	mu      sync.Mutex
	devMin  int  // minor device number of the mount, -1 until known
	stopped bool // Stop or Kill has run
}

// childEnv is the environment of children: ours without SHEDFS_STORE (so
// a stray setting cannot redirect a test's store), plus extra.
func childEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SHEDFS_STORE=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// startView mounts a view of store for user on a fresh temporary
// mountpoint, with extraArgs added to the mount flags, and waits until the
// mount shows up. It fails the test with the child's stderr if it does not.
// The view is unmounted and the child ended when the test finishes.
func startView(t testing.TB, store, user string, extraArgs ...string) *View {
	t.Helper()
	args := []string{"mount", "--store", store, "--user", user}
	args = append(args, extraArgs...)
	v := launchView(t, newMountpoint(t), nil, args)
	v.Store, v.User = store, user
	v.waitMounted()
	return v
}

// newMountpoint returns a fresh empty directory for a mount, with symlinks
// resolved so that it matches /proc/self/mountinfo.
func newMountpoint(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// newStore returns the directory of a new, empty store, made by shedfs
// init (no other command creates a store).
func newStore(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if out, errOut, code := runCLI(t, "init", "--store", dir); code != 0 {
		t.Fatalf("shedfs init --store %s: exit %d\n%s%s", dir, code, out, errOut)
	}
	return dir
}

// launchView starts `shedfs args... mnt` with env added to the environment
// and registers the cleanup that ends it, without waiting for the mount.
func launchView(t testing.TB, mnt string, env []string, args []string) *View {
	t.Helper()
	requireFUSE(t)
	if shedfsBin == "" {
		t.Fatal("no shedfs binary: TestMain did not build one")
	}
	cmd := exec.Command(shedfsBin, append(append([]string{}, args...), mnt)...)
	cmd.Env = childEnv(env)
	return launchCmd(t, mnt, cmd)
}

// launchCmd is launchView with the command made by the caller (its
// environment included), which runs shedfs with mnt as its last
// argument, in the end.
func launchCmd(t testing.TB, mnt string, cmd *exec.Cmd) *View {
	t.Helper()
	v := &View{
		Dir:    mnt,
		t:      t,
		stderr: &syncBuffer{},
		stdout: &syncBuffer{},
		done:   make(chan struct{}),
		devMin: -1,
	}
	v.cmd = cmd
	v.cmd.Stdout = v.stdout
	v.cmd.Stderr = v.stderr
	v.cmd.WaitDelay = 2 * time.Second
	// Should the test binary die, take the daemon along.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Registered before the mount is awaited, so that whatever happens
	// next, the mount and the child are gone when the test ends.
	t.Cleanup(v.cleanup)
	if err := v.cmd.Start(); err != nil {
		v.err = err
		close(v.done)
		t.Fatalf("starting %s: %v", strings.Join(cmd.Args, " "), err)
	}
	go func() {
		v.err = v.cmd.Wait()
		close(v.done)
	}()
	v.watchdog = time.AfterFunc(viewWatchdog, v.hung)
	return v
}

// hung fires when a view outlives viewWatchdog: it fails the test and kills
// the daemon and its connection, so that blocked callers return.
func (v *View) hung() {
	v.t.Errorf("view %s still up after %v: the daemon or the test hung; killing shedfs", v.Dir, viewWatchdog)
	_ = v.cmd.Process.Kill()
	v.mu.Lock()
	minor := v.devMin
	v.mu.Unlock()
	if minor >= 0 {
		abortConnection(minor)
	}
	lazyUnmount(v.Dir)
}

// waitMounted polls mountinfo until the view is mounted. It fails the test
// with the child's stderr if the child exits first or the timeout passes.
func (v *View) waitMounted() {
	v.t.Helper()
	deadline := time.Now().Add(mountTimeout)
	for {
		if m, ok := findMount(v.Dir); ok {
			v.mu.Lock()
			v.devMin = m.minor
			v.mu.Unlock()
			if !strings.HasPrefix(m.fstype, "fuse") {
				v.t.Fatalf("%s is mounted with fstype %q, want fuse.shedfs or fuse", v.Dir, m.fstype)
			}
			return
		}
		select {
		case <-v.done:
			v.t.Fatalf("shedfs %s exited before mounting %s: %v\nstderr:\n%s",
				strings.Join(v.cmd.Args[1:], " "), v.Dir, v.err, v.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("shedfs %s: %s not in /proc/self/mountinfo after %v\nstderr:\n%s",
				strings.Join(v.cmd.Args[1:], " "), v.Dir, mountTimeout, v.stderr.String())
		}
	}
}

// waitExitOrMount waits until the child exits (returning its exit code) or
// mounts (returning mounted=true). It fails the test on timeout.
func (v *View) waitExitOrMount(timeout time.Duration) (code int, mounted bool) {
	v.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-v.done:
			return exitCode(v.err), false
		default:
		}
		if m, ok := findMount(v.Dir); ok {
			v.mu.Lock()
			v.devMin = m.minor
			v.mu.Unlock()
			return 0, true
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("shedfs %s neither exited nor mounted within %v\nstderr:\n%s",
				strings.Join(v.cmd.Args[1:], " "), timeout, v.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stderr returns what the child wrote to stderr so far.
func (v *View) Stderr() string { return v.stderr.String() }

// Path joins elem to the mountpoint.
func (v *View) Path(elem ...string) string {
	return filepath.Join(append([]string{v.Dir}, elem...)...)
}

// exited reports whether the child has exited.
func (v *View) exited() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// waitExit waits up to d for the child to exit.
func (v *View) waitExit(d time.Duration) bool {
	select {
	case <-v.done:
		return true
	case <-time.After(d):
		return false
	}
}

// Stop ends the view cleanly: SIGTERM, then the child must exit with status
// 0 within the stop timeout and leave no mount behind. Failures are
// reported with the child's stderr; the view is torn down regardless.
func (v *View) Stop() {
	v.t.Helper()
	v.mu.Lock()
	if v.stopped {
		v.mu.Unlock()
		return
	}
	v.stopped = true
	v.mu.Unlock()
	if !v.exited() {
		_ = v.cmd.Process.Signal(syscall.SIGTERM)
	}
	if !v.waitExit(stopTimeout) {
		v.t.Errorf("shedfs did not exit within %v of SIGTERM\nstderr:\n%s", stopTimeout, v.stderr.String())
		v.teardown()
		return
	}
	if code := exitCode(v.err); code != 0 {
		v.t.Errorf("shedfs exited with %v after SIGTERM, want status 0\nstderr:\n%s", v.err, v.stderr.String())
	}
	if _, ok := findMount(v.Dir); ok {
		v.t.Errorf("%s still mounted after shedfs exited\nstderr:\n%s", v.Dir, v.stderr.String())
	}
	v.teardown()
}

// Kill ends the child with SIGKILL, as a crash would, then detaches the
// mount (aborting the FUSE connection if needed) so that the mountpoint is
// free and no caller stays stuck in the kernel.
func (v *View) Kill() {
	v.t.Helper()
	v.mu.Lock()
	v.stopped = true
	v.mu.Unlock()
	if !v.exited() {
		_ = v.cmd.Process.Kill()
	}
	if !v.waitExit(stopTimeout) {
		// A killed daemon can be held in the kernel by a request on its
		// own connection that nobody will answer (docs/design.md,
		// "Traps that shaped the code"); teardown aborts the connection and fails the test
		// only if even that leaves the process alive.
		v.t.Logf("shedfs did not exit within %v of SIGKILL; aborting its FUSE connection", stopTimeout)
	}
	v.teardown()
}

// cleanup is the t.Cleanup of a view: it stops whatever is still running
// or mounted, and logs the child's stderr when the test failed.
func (v *View) cleanup() {
	if v.watchdog != nil {
		v.watchdog.Stop()
	}
	v.mu.Lock()
	stopped := v.stopped
	v.stopped = true
	v.mu.Unlock()
	if !stopped && !v.exited() {
		_ = v.cmd.Process.Signal(syscall.SIGTERM)
		v.waitExit(stopTimeout)
	}
	v.teardown()
	if v.t.Failed() {
		v.t.Logf("stderr of shedfs %s:\n%s", strings.Join(v.cmd.Args[1:], " "), v.stderr.String())
	}
}

// teardown makes sure the child is gone and nothing is mounted on v.Dir:
// lazy unmount, SIGKILL, and as a last resort an abort of the FUSE
// connection.
func (v *View) teardown() {
	// A descriptor of the mount (O_PATH: no request to the daemon) keeps
	// its connection, and so its number, until teardown ends: without it,
	// an abort by number could hit whatever mount took the number since.
	pinned := false
	if m, ok := findMount(v.Dir); ok {
		v.mu.Lock()
		v.devMin = m.minor
		v.mu.Unlock()
		if fd, err := unix.Open(v.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			pinned = true
			defer unix.Close(fd)
		}
		lazyUnmount(v.Dir)
	}
	if !v.exited() {
		_ = v.cmd.Process.Kill()
		if !v.waitExit(stopTimeout) {
			v.mu.Lock()
			minor := v.devMin
			v.mu.Unlock()
			if minor >= 0 && pinned {
				abortConnection(minor)
			}
			if !v.waitExit(stopTimeout) {
				v.t.Errorf("shedfs (pid %d) does not die even after SIGKILL and abort", v.cmd.Process.Pid)
			}
		}
	}
	// A dead daemon whose connection somebody else still holds (a cloned
	// /dev/fuse fd) would leave callers hanging: abort it.
	v.mu.Lock()
	minor := v.devMin
	v.mu.Unlock()
	if minor >= 0 && pinned {
		if _, err := os.Stat(fmt.Sprintf("/sys/fs/fuse/connections/%d", minor)); err == nil {
			abortConnection(minor)
		}
	}
	// Several stacked mounts (a test bug or a daemon that mounted twice):
	// detach them all.
	for i := 0; i < 8; i++ {
		if _, ok := findMount(v.Dir); !ok {
			break
		}
		lazyUnmount(v.Dir)
	}
}

// lazyUnmount detaches the mount at dir like `umount -l`.
func lazyUnmount(dir string) {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		_ = exec.Command("umount", "-l", dir).Run()
	}
}

// abortAndDetach ends mount m of a daemon that is dead or must go: its
// connection is aborted first, while the mount holds the connection's
// number, and then it is detached. In the other order the number may be
// free again by the time of the abort (a detached mount that nothing
// holds goes at once), and taken by a mount of another test, whose
// callers would then fail with ECONNABORTED.
func abortAndDetach(m mountEntry) {
	abortConnection(m.minor)
	lazyUnmount(m.point)
}

// abortConnection aborts FUSE connection minor through fusectl, mounting
// fusectl for the duration if it is not mounted. The caller makes sure
// that minor is still its mount's (abortAndDetach).
func abortConnection(minor int) {
	const conns = "/sys/fs/fuse/connections"
	entries, _ := os.ReadDir(conns)
	if len(entries) == 0 {
		if err := unix.Mount("fusectl", conns, "fusectl", 0, ""); err == nil {
			defer unix.Unmount(conns, unix.MNT_DETACH)
		}
	}
	_ = os.WriteFile(fmt.Sprintf("%s/%d/abort", conns, minor), []byte("1"), 0)
}

// mountEntry is one line of /proc/self/mountinfo, the fields we use.
type mountEntry struct {
	major, minor int
	point        string
	fstype       string
}

// findMount returns the last mount on dir in /proc/self/mountinfo.
func findMount(dir string) (mountEntry, bool) {
	var found mountEntry
	ok := false
	for _, m := range mounts() {
		if m.point == dir {
			found, ok = m, true
		}
	}
	return found, ok
}

// mounts parses /proc/self/mountinfo.
func mounts() []mountEntry {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []mountEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		var m mountEntry
		majmin := strings.SplitN(fields[2], ":", 2)
		if len(majmin) == 2 {
			m.major, _ = strconv.Atoi(majmin[0])
			m.minor, _ = strconv.Atoi(majmin[1])
		}
		m.point = unescapeMountinfo(fields[4])
		for i := 6; i < len(fields)-1; i++ {
			if fields[i] == "-" {
				m.fstype = fields[i+1]
				break
			}
		}
		out = append(out, m)
	}
	return out
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) of
// mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// exitCode turns the result of cmd.Wait into an exit status: 0 for nil,
// the status for an exit, 128+signal for a signal, -1 otherwise.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// runCLI runs the shedfs binary with args to completion and returns its
// output and exit status. It fails the test if the command cannot start or
// runs longer than the CLI timeout.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	return runCLIEnv(t, nil, args...)
}

// runCLIEnv is runCLI with env added to the child's environment.
func runCLIEnv(t testing.TB, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if shedfsBin == "" {
		t.Fatal("no shedfs binary: TestMain did not build one")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shedfsBin, args...)
	cmd.Env = childEnv(env)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("shedfs %s: still running after %v\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), cliTimeout, o.String(), e.String())
	}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("shedfs %s: %v", strings.Join(args, " "), err)
		}
	}
	return o.String(), e.String(), exitCode(err)
}

// checkOneLine fails the test unless s is exactly one non-empty line (a
// trailing newline allowed).
func checkOneLine(t testing.TB, what, s string) {
	t.Helper()
	trimmed := strings.TrimRight(s, "\n")
	if trimmed == "" {
		t.Errorf("%s: stderr is empty, want one line explaining the refusal", what)
		return
	}
	if strings.Contains(trimmed, "\n") {
		t.Errorf("%s: stderr has %d lines, want exactly one:\n%s", what, strings.Count(trimmed, "\n")+1, s)
	}
}

// fsckClean runs `shedfs fsck --dry-run` on store and fails the test unless
// it exits 0 and reports clean.
func fsckClean(t testing.TB, store string) {
	t.Helper()
	out, errOut, code := runCLI(t, "fsck", "--store", store, "--dry-run")
	if code != 0 || !hasCleanLine(out+errOut) {
		t.Errorf("shedfs fsck --dry-run --store %s: exit %d, want 0 and a line with \"clean\"\nstdout:\n%s\nstderr:\n%s",
			store, code, out, errOut)
	}
}

// hasCleanLine reports whether output has a line containing "clean" (and not
// "unclean").
func hasCleanLine(output string) bool {
	for _, line := range strings.Split(output, "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "clean") && !strings.Contains(l, "unclean") && !strings.Contains(l, "not clean") {
			return true
		}
	}
	return false
}

// blobFiles lists the regular files under store/blobs.
func blobFiles(t testing.TB, store string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(store, "blobs")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return filepath.SkipDir
			}
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return out
}

// mustWrite writes data to path with perm, failing the test on error.
func mustWrite(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// mustRead reads path, failing the test on error.
func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return data
}

// mustMkdir makes a directory, failing the test on error.
func mustMkdir(t testing.TB, path string, perm os.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, perm); err != nil {
		t.Fatalf("mkdir %s: %v", path, err)
	}
}

// runTool runs an external program with a timeout and fails the test with
// its output if it does not exit 0. It returns the combined output.
func runTool(t testing.TB, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, truncate(out, 4000))
	}
	return string(out)
}

// truncate shortens tool output for error messages.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + fmt.Sprintf("\n... (%d more bytes)", len(b)-n)
}

// asErrno finds the errno in err's chain.
func asErrno(err error, target *unix.Errno) bool {
	return errors.As(err, target)
}
