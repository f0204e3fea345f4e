package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// target is one place the workloads run in: a plain directory, a loopback
// mount, or a shedfs view with some set of flags.
type target struct {
	// Name is the column header and the -targets name.
	Name string
	// Compare lists the targets this one is divided by in the ratio
	// columns ("shedfs/native", "shedfs/loopback").
	Compare []string
	// Start prepares the target under work and returns where workloads run.
	Start func(ctx context.Context, b *bench, name string) (*mounted, error)
}

// allTargets is the list of everything shedfs-bench can measure, in column
// order. A new comparison is one more entry here, for instance:
//
//	{Name: "shedfs-quota", Compare: []string{"shedfs"},
//		Start: shedfsTarget([]string{"--some-flag"})},
//
// "shedfs" is the configuration docs/design.md, "Performance", judges: every rule,
// quota, audit and metric on (a 1 TiB quota on the user, the audit trail,
// /metrics served).
func allTargets() []target {
	return []target{
		{Name: "native", Start: startNative},
		// The anchor: go-fuse's loopback on /dev/fuse without
		// passthrough (loopback.go); loopback-pt lets the kernel do its
		// reads and writes (FUSE passthrough), a faster anchor. Opt-in.
		{Name: "loopback", Compare: []string{"native"}, Start: loopbackTarget(false)},
		{Name: "loopback-pt", Compare: []string{"loopback"}, Start: loopbackTarget(true)},
		// The ceiling: go-fuse serving an in-memory tree, asked what a
		// view is asked (memfs.go); and the same with the kernel's
		// writeback cache, which views do not use. Opt-in.
		{Name: "memfs", Compare: []string{"loopback"}, Start: memfsTarget("")},
		{Name: "memfs-writeback", Compare: []string{"memfs"}, Start: memfsTarget("writeback")},
		// FUSE over io_uring (needs the kernel's switch on; opt-in):
		// the transport's own gain, and shedfs's over it.
		{Name: "memfs-uring", Compare: []string{"loopback", "memfs"}, Start: memfsTarget("uring")},
		{Name: "shedfs-uring", Compare: []string{"loopback", "shedfs", "memfs-uring"}, Start: shedfsQuotaTarget(append([]string{"--transport", "uring"}, shedfsMetricsFlags...))},
		{Name: "shedfs", Compare: []string{"native", "loopback"}, Start: shedfsQuotaTarget(shedfsMetricsFlags)}, // quota.go
		// An A/B of two builds in one run: "shedfs" with the binary of
		// -shedfs-base (base.go).
		{Name: "shedfs-base", Compare: []string{"loopback"}, Start: shedfsQuotaTarget(shedfsMetricsFlags)},
		// The cost of observability: shedfs-bare has neither metrics nor
		// the audit trail (which is on by default); shedfs-observed serves
		// /metrics and keeps the trail, without quota.
		{Name: "shedfs-bare", Start: shedfsTarget([]string{"--no-audit"})},
		{Name: "shedfs-observed", Compare: []string{"shedfs-bare"}, Start: shedfsTarget(shedfsMetricsFlags)},
		// The cost of quota admission: shedfs-observed plus the quota (the
		// flags of "shedfs", as a daemon of its own).
		{Name: "shedfs+quota", Compare: []string{"shedfs-observed"}, Start: shedfsQuotaTarget(shedfsMetricsFlags)},
		// "shedfs" with its metadata on a 3-member etcd cluster on this
		// machine (etcd.go).
		{Name: "shedfs-etcd", Compare: []string{"shedfs"}, Start: shedfsEtcdTarget(shedfsMetricsFlags)},
		// An A/B of two builds on etcd: shedfs-etcd with the binary of
		// -shedfs-base.
		{Name: "shedfs-etcd-base", Compare: []string{"shedfs-etcd"}, Start: shedfsEtcdTarget(shedfsMetricsFlags)},
	}
}

// shedfsMetricsFlags serve the daemon's metrics on a free local port.
var shedfsMetricsFlags = []string{"--metrics", "127.0.0.1:0"}

// defaultTargets are measured unless -targets says otherwise: the three
// columns docs/design.md, "Performance", compares, and shedfs-etcd beside shedfs
// where Debian's etcd-server is installed (issue 13's target: metadata
// work within 2x of badger). The others are opt-in.
func defaultTargets() []string {
	if etcdtest.Available() {
		return []string{"native", "loopback", "shedfs", "shedfs-etcd"}
	}
	return []string{"native", "loopback", "shedfs"}
}

// targetNames lists the names of ts in order.
func targetNames(ts []target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// mounted is a started target: the directory workloads use and, for FUSE
// targets, the serving child process and its mount point.
type mounted struct {
	name string
	dir  string // where workloads create their files
	mnt  string // FUSE mount point, "" for a plain directory
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  string        // the child's stderr+stdout
	// stopWait is how long stop waits for the child to exit on SIGTERM
	// (0: 15 s); a daemon serving many views needs longer to unmount them.
	stopWait time.Duration
	// after runs once the child is gone (stopping what the target started
	// beside it, such as an etcd cluster).
	after func()
}

// startNative makes a plain directory on the work filesystem.
func startNative(_ context.Context, b *bench, name string) (*mounted, error) {
	dir := filepath.Join(b.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("native dir: %w", err)
	}
	return &mounted{name: name, dir: dir}, nil
}

// loopbackTarget returns a Start function that mounts a go-fuse loopback
// of a directory on the work filesystem, served by this binary re-executed
// as a child, with FUSE passthrough if passthrough.
func loopbackTarget(passthrough bool) func(context.Context, *bench, string) (*mounted, error) {
	return func(ctx context.Context, b *bench, name string) (*mounted, error) {
		src := filepath.Join(b.work, name+"-src")
		mnt := filepath.Join(b.work, name+"-mnt")
		for _, d := range []string{src, mnt} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("loopback dirs: %w", err)
			}
		}
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own binary for the loopback child: %w", err)
		}
		args := []string{serveLoopbackArg, src, mnt}
		if passthrough {
			args = append(args, loopbackPassthroughArg)
		}
		return startFUSEChild(ctx, b, name, mnt, self, args...)
	}
}

// memfsTarget returns a Start function that mounts the in-memory ceiling
// filesystem, with the kernel's writeback cache if writeback, served by
// this binary re-executed as a child.
func memfsTarget(mode string) func(context.Context, *bench, string) (*mounted, error) {
	return func(ctx context.Context, b *bench, name string) (*mounted, error) {
		mnt := filepath.Join(b.work, name+"-mnt")
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			return nil, fmt.Errorf("memfs mount point: %w", err)
		}
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own binary for the memfs child: %w", err)
		}
		args := []string{serveMemfsArg, mnt}
		if mode != "" {
			args = append(args, mode)
		}
		return startFUSEChild(ctx, b, name, mnt, self, args...)
	}
}

// shedfsTarget returns a Start function that mounts a view of user "bench"
// with `shedfs mount`, plus extra flags, on a store of its own.
func shedfsTarget(extra []string) func(context.Context, *bench, string) (*mounted, error) {
	return func(ctx context.Context, b *bench, name string) (*mounted, error) {
		if _, err := os.Stat(b.shedfsBinOf(name)); err != nil {
			return nil, fmt.Errorf("shedfs binary: %w (build it with `make build`, or pass -shedfs (-shedfs-base for shedfs-base), or leave %q out of -targets)", err, name)
		}
		store := filepath.Join(b.work, name+"-store")
		mnt := filepath.Join(b.work, name+"-mnt")
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			return nil, fmt.Errorf("shedfs dirs: %w", err)
		}
		// A store made beforehand (shedfsQuotaTarget) is left as it is.
		if err := initStore(ctx, b.shedfsBinOf(name), "--store", store); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		args := []string{"mount", "--store", store, "--user", "bench"}
		args = append(args, extra...)
		args = append(args, mnt)
		return startFUSEChild(ctx, b, name, mnt, b.shedfsBinOf(name), args...)
	}
}

// startFUSEChild runs a FUSE server as a child process in its own process
// group (so a Ctrl-C reaches only the bench, which then stops the children in
// order) and waits until mnt shows up as a FUSE mount.
func startFUSEChild(ctx context.Context, b *bench, name, mnt, bin string, args ...string) (*mounted, error) {
	return startChild(ctx, b, name, mnt, b.cfg.mountTimeout, func() (bool, error) { return isFUSEMount(mnt) }, bin, args...)
}

// startChild runs a FUSE server as a child process, like startFUSEChild,
// and waits up to timeout until ready reports true. mnt is recorded as its
// mount point.
func startChild(ctx context.Context, b *bench, name, mnt string, timeout time.Duration, ready func() (bool, error), bin string, args ...string) (*mounted, error) {
	logPath := filepath.Join(b.work, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("child log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// Start and record the child under b.mu, and not at all once ctx is
	// done, so that a concurrent stopAll never misses it.
	b.mu.Lock()
	if err := ctx.Err(); err != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	m := &mounted{name: name, dir: mnt, mnt: mnt, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		close(m.done)
	}()
	b.started = append(b.started, m) // stopped by b.stopAll whatever happens next
	b.mounts = append(b.mounts, mnt)
	b.mu.Unlock()
	slog.Info("starting FUSE target", "target", name, "cmd", strings.Join(append([]string{bin}, args...), " "))

	deadline := time.Now().Add(timeout)
	for {
		if ok, _ := ready(); ok {
			return m, nil
		}
		select {
		case <-m.done:
			return nil, fmt.Errorf("%s exited before mounting (%s); its output:\n%s", name, cmd.ProcessState, tail(logPath, 20))
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s to mount: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not mount %s within %s; its output:\n%s", name, mnt, timeout, tail(logPath, 20))
		}
	}
}

// peakRSS reports the child's peak resident set size in bytes (VmHWM), or 0.
func (m *mounted) peakRSS() int64 {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// exited reports whether the child process has exited.
func (m *mounted) exited() bool {
	if m.done == nil {
		return true
	}
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// stop ends a FUSE target: SIGTERM (the server unmounts itself), then
// umount, then a lazy umount and SIGKILL if it is hung. It never returns
// with the mount still in place unless even `umount -l` failed.
func (m *mounted) stop() error {
	if m.cmd == nil {
		return nil
	}
	if m.after != nil {
		defer m.after()
	}
	if !m.exited() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		wait := m.stopWait
		if wait == 0 {
			wait = 15 * time.Second
		}
		select {
		case <-m.done:
		case <-time.After(wait):
			slog.Warn("FUSE child did not exit on SIGTERM", "target", m.name)
		}
	}
	if ok, _ := isFUSEMount(m.mnt); ok {
		if err := syscall.Unmount(m.mnt, 0); err != nil {
			slog.Warn("umount failed, detaching", "target", m.name, "mnt", m.mnt, "err", err)
			if err := syscall.Unmount(m.mnt, syscall.MNT_DETACH); err != nil {
				if out, err2 := exec.Command("umount", "-l", m.mnt).CombinedOutput(); err2 != nil {
					return fmt.Errorf("unmount %s: %v; umount -l: %v: %s", m.mnt, err, err2, bytes.TrimSpace(out))
				}
			}
		}
	}
	if !m.exited() {
		_ = m.cmd.Process.Kill()
		select {
		case <-m.done:
		case <-time.After(5 * time.Second):
			return fmt.Errorf("%s child (pid %d) did not exit after SIGKILL", m.name, m.cmd.Process.Pid)
		}
	}
	if ok, _ := isFUSEMount(m.mnt); ok {
		if err := syscall.Unmount(m.mnt, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("%s still mounted at %s: %w", m.name, m.mnt, err)
		}
	}
	// A `shedfs serve` child mounts its views below mnt, its mount root:
	// any it left behind are detached too.
	if m.mnt != "" {
		left, err := fuseMountsUnder(m.mnt)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if len(left) > 0 {
			slog.Warn("detaching views the child left mounted", "target", m.name, "count", len(left))
		}
		for _, p := range left {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
				return fmt.Errorf("%s still mounted at %s: %w", m.name, p, err)
			}
		}
	}
	if st := m.cmd.ProcessState; st != nil && !st.Success() {
		if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			slog.Warn("FUSE child exited with an error", "target", m.name, "state", st.String(), "output", tail(m.log, 10))
		}
	}
	return nil
}

// isFUSEMount reports whether dir is the mount point of a FUSE filesystem
// in this process's mount namespace.
func isFUSEMount(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || unescapeMountinfo(fields[4]) != dir {
			continue
		}
		for i := 6; i < len(fields)-1; i++ {
			if fields[i] == "-" {
				fstype := fields[i+1]
				if fstype == "fuse" || strings.HasPrefix(fstype, "fuse.") || fstype == "fuseblk" {
					return true, nil
				}
			}
		}
	}
	return false, sc.Err()
}

// fuseMountsUnder lists the FUSE mount points strictly below dir, deepest
// first, from one read of /proc/self/mountinfo.
func fuseMountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return parseFUSEMountsUnder(string(data), dir), nil
}

// parseFUSEMountsUnder picks from mountinfo text the FUSE mount points
// strictly below dir, deepest first.
func parseFUSEMountsUnder(mountinfo, dir string) []string {
	prefix := strings.TrimSuffix(filepath.Clean(dir), "/") + "/"
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(line)
		if len(fields) < 10 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if !strings.HasPrefix(mp, prefix) {
			continue
		}
		for i := 6; i < len(fields)-1; i++ {
			if fields[i] == "-" {
				fstype := fields[i+1]
				if fstype == "fuse" || strings.HasPrefix(fstype, "fuse.") || fstype == "fuseblk" {
					out = append(out, mp)
				}
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// firstN returns at most n elements of list, for error messages.
func firstN(list []string, n int) []string {
	return list[:min(n, len(list))]
}

// cpuSeconds returns the CPU time (user + system, every thread) the
// target's server process has used so far; an error for a plain directory.
func (m *mounted) cpuSeconds() (float64, error) {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0, errors.New("no server process")
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("cpu time: %w", err)
	}
	ticks, err := parseProcStatCPU(string(data))
	if err != nil {
		return 0, fmt.Errorf("cpu time of pid %d: %w", m.cmd.Process.Pid, err)
	}
	return float64(ticks) / userHZ, nil
}

// userHZ is the unit of the times in /proc/PID/stat (sysconf(_SC_CLK_TCK),
// USER_HZ): 100 on every Linux architecture Go supports.
const userHZ = 100

// parseProcStatCPU returns utime + stime, in clock ticks, from the text of
// /proc/PID/stat (proc(5): fields 14 and 15, counted after the command
// name in parentheses, which may itself hold spaces and parentheses).
func parseProcStatCPU(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name in stat")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the name, want at least 13", len(f))
	}
	var total int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad time %q: %w", s, err)
		}
		total += v
	}
	return total, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no output: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, "\n")
	if s == "" {
		return "(no output)"
	}
	return s
}

// errStillMounted is returned when cleanup could not remove a mount.
var errStillMounted = errors.New("mount left behind")
