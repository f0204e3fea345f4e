package main

// The rss workload: the daemon's memory with a large store (docs/design.md,
// "Performance": "daemon RSS under 200 MiB with 1 million inodes in the store").
//
// Unlike the other workloads it does not run in a fresh directory of every
// target: a million inodes through FUSE would take longer than everything
// else together, so it fills a store of its own directly with package
// metadata (no FUSE, no blobs: regular files stay size 0 and blobs are
// created lazily), once per invocation, and then mounts that store with
// `shedfs mount` — once per selected shedfs target — and reads it: stat of
// 100 directories, a full walk, and a dentry/inode cache drop. The daemon's
// RSS is read from /proc/PID/status after each phase.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

const (
	// rssPerDir is how many files each directory of the rss store holds.
	rssPerDir = 1000
	// rssStatDirs is how many directories phase "stat" looks into.
	rssStatDirs = 100
	// rssLimit is the docs/design.md "Performance" bound on the daemon's RSS.
	rssLimit = 200 << 20
	// rssLoopbackMax is the largest -rss-inodes for which the loopback
	// comparison runs without -rss-loopback: it needs that many real files.
	rssLoopbackMax = 200000
	// rssSettle is how long phase "dropped" waits after the cache drop for
	// the kernel's FORGETs to reach the daemon and its memory to be freed.
	rssSettle = 10 * time.Second
	// rssWorkers is how many goroutines fill the store or the native tree.
	// Every create also updates the user's usage record, one key, so
	// concurrent creates conflict in badger and are retried: measured on 2
	// cores, 2 workers fill the store 1.3x faster than 1, and 8 are slower
	// than 1.
	rssWorkers = 2
	// rssUser is the user whose private tree holds the files.
	rssUser = "bench"
)

// rssPhases names the measurement points, in order.
var rssPhases = []string{"mounted", "stat 100 dirs", "walk all", "dropped +10s"}

// rssShedfsFlags maps the shedfs targets the rss workload knows to the extra
// flags of their daemon (see allTargets): the same names select them.
var rssShedfsFlags = map[string][]string{
	"shedfs":          shedfsMetricsFlags,
	"shedfs-base":     shedfsMetricsFlags,
	"shedfs-bare":     {"--no-audit"},
	"shedfs-observed": {"--metrics", "127.0.0.1:0"},
}

// procMem is a reading of /proc/PID/status, in bytes.
type procMem struct {
	RSS     int64 `json:"vm_rss"`
	HWM     int64 `json:"vm_hwm"`
	RSSAnon int64 `json:"rss_anon"`
	RSSFile int64 `json:"rss_file"`
}

// rssPhase is one measurement point of one daemon.
type rssPhase struct {
	Phase string  `json:"phase"`
	Mem   procMem `json:"mem"`
	// Inodes and Seconds describe the work of the phase (stat, walk).
	Inodes  int     `json:"inodes,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Note    string  `json:"note,omitempty"`
}

// rssRun is every phase of one daemon.
type rssRun struct {
	Target string     `json:"target"`
	Cmd    string     `json:"cmd"`
	Phases []rssPhase `json:"phases"`
}

// rssReport is what the rss workload found, printed after the main table
// and written under "rss" by -json.
type rssReport struct {
	Files    int      `json:"files"`
	Dirs     int      `json:"dirs"`
	Populate float64  `json:"populate_seconds"`
	Runs     []rssRun `json:"runs"`
	Skipped  []string `json:"skipped,omitempty"`
}

// rssState is the per-invocation cache of the rss workload: the store and
// the native tree are filled once and reused by every target.
type rssState struct {
	store string // populated shedfs store, "" until filled
	tree  string // populated native tree for the loopback, "" until filled
	rep   *rssReport
}

// rssShape returns how many directories hold n files, rssPerDir each (the
// last one holds the rest).
func rssShape(n int) (dirs int) {
	return (n + rssPerDir - 1) / rssPerDir
}

// rssFilesIn returns how many files directory d of a store of n files holds.
func rssFilesIn(n, d int) int {
	return min(rssPerDir, n-d*rssPerDir)
}

// rssDirName and rssFileName are the names in the rss tree.
func rssDirName(d int) string  { return fmt.Sprintf("d%05d", d) }
func rssFileName(f int) string { return fmt.Sprintf("f%04d", f) }

// parseProcStatus reads VmRSS, VmHWM, RssAnon and RssFile (kB lines) from
// the contents of /proc/PID/status.
func parseProcStatus(data string) (procMem, error) {
	var m procMem
	for _, line := range strings.Split(data, "\n") {
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		case "RssAnon":
			dst = &m.RSSAnon
		case "RssFile":
			dst = &m.RSSFile
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return procMem{}, fmt.Errorf("bad %s line %q", key, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return procMem{}, fmt.Errorf("bad %s line %q: %w", key, line, err)
		}
		*dst = kb << 10
	}
	if m.RSS == 0 || m.HWM == 0 {
		return procMem{}, errors.New("no VmRSS/VmHWM (process gone or a kernel thread?)")
	}
	return m, nil
}

// readProcMem reads the memory of process pid.
func readProcMem(pid int) (procMem, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMem{}, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	m, err := parseProcStatus(string(data))
	if err != nil {
		return procMem{}, fmt.Errorf("status of pid %d: %w", pid, err)
	}
	return m, nil
}

// rssVerdict judges the docs/design.md "Performance" target on one shedfs run: the
// peak RSS (VmHWM) up to and including the "stat 100 dirs" phase must stay
// under rssLimit. The walk of every inode is reported but not judged: there
// the kernel, not the store, decides how many nodes the daemon must keep.
func rssVerdict(run rssRun) check {
	c := check{Target: "daemon RSS < 200MiB with 1M inodes", Result: "n/a"}
	var judged *rssPhase
	for i := range run.Phases {
		if run.Phases[i].Phase == rssPhases[1] {
			judged = &run.Phases[i]
		}
	}
	if judged == nil || len(run.Phases) < 2 {
		c.Detail = "not measured (the run stopped before phase \"stat 100 dirs\")"
		return c
	}
	mounted := run.Phases[0]
	c.Value = float64(judged.Mem.HWM)
	c.Result = "MISS"
	if judged.Mem.HWM < rssLimit {
		c.Result = "PASS"
	}
	c.Detail = fmt.Sprintf("%s: VmRSS %s when mounted, %s after stat of %d inodes, peak %s (need peak < %s)",
		run.Target, humanBytes(mounted.Mem.RSS), humanBytes(judged.Mem.RSS), judged.Inodes,
		humanBytes(judged.Mem.HWM), humanBytes(rssLimit))
	for _, p := range run.Phases[2:] {
		c.Detail += fmt.Sprintf("; %s: VmRSS %s (not judged)", p.Phase, humanBytes(p.Mem.RSS))
	}
	return c
}

// rssCheck is the rss row of the docs/design.md "Performance" checks: the verdict of
// the first shedfs run with the whole -rss-inodes store, flagged when the
// store is smaller than the 1M inodes the target is about.
func (r *rssReport) check() (check, bool) {
	for _, run := range r.Runs {
		if run.Target == "loopback" {
			continue
		}
		c := rssVerdict(run)
		if r.Files+r.Dirs < 1000000 && c.Result != "n/a" {
			c.Detail = fmt.Sprintf("only %d inodes in the store (use -rss-inodes 1000000 for the real target); ", r.Files+r.Dirs) + c.Detail
			c.Result = "n/a"
		}
		return c, true
	}
	return check{}, false
}

// print writes the rss tables.
func (r *rssReport) print(w io.Writer) {
	fmt.Fprintf(w, "\ndaemon memory with a large store (rss): %d files in %d directories of %d, %d inodes in all; store filled in %.1f s without FUSE\n",
		r.Files, r.Dirs, rssPerDir, r.Files+r.Dirs, r.Populate)
	for _, run := range r.Runs {
		fmt.Fprintf(w, "\n%s: %s\n", run.Target, run.Cmd)
		table := [][]string{{"phase", "VmRSS", "VmHWM", "RssAnon", "RssFile", "work"}}
		for _, p := range run.Phases {
			work := p.Note
			if p.Inodes > 0 && p.Seconds > 0 {
				work = fmt.Sprintf("%d inodes in %.1f s, %.0f inodes/s", p.Inodes, p.Seconds, float64(p.Inodes)/p.Seconds)
				if p.Note != "" {
					work += "; " + p.Note
				}
			}
			table = append(table, []string{p.Phase, humanBytes(p.Mem.RSS), humanBytes(p.Mem.HWM),
				humanBytes(p.Mem.RSSAnon), humanBytes(p.Mem.RSSFile), work})
		}
		writeTable(w, table)
		if n := len(run.Phases); n == len(rssPhases) {
			walk, dropped := run.Phases[n-2].Mem.RSS, run.Phases[n-1].Mem.RSS
			verb := "fell"
			if dropped >= walk {
				verb = "did not fall"
			}
			fmt.Fprintf(w, "after the cache drop, VmRSS %s: %s -> %s\n", verb, humanBytes(walk), humanBytes(dropped))
		}
		if run.Target != "loopback" {
			c := rssVerdict(run)
			fmt.Fprintf(w, "%-4s  %s\n", c.Result, c.Detail)
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
}

// runRSS is the rss workload: fill the store once, then measure each
// selected shedfs target and, when asked, the loopback.
func runRSS(ctx context.Context, b *bench) error {
	n := b.cfg.rssInodes
	st := &b.rss
	if st.rep == nil {
		st.rep = &rssReport{Files: n, Dirs: rssShape(n)}
	}
	var shedfsTargets []string
	for _, t := range b.cfg.targets {
		if _, ok := rssShedfsFlags[t]; ok {
			shedfsTargets = append(shedfsTargets, t)
		}
	}
	for _, t := range b.cfg.targets {
		if _, ok := rssShedfsFlags[t]; !ok && t != "loopback" && t != "native" {
			st.rep.Skipped = append(st.rep.Skipped, fmt.Sprintf("target %s (the rss workload knows %s and loopback)", t, strings.Join(sortedKeys(rssShedfsFlags), ", ")))
		}
	}
	loopback := b.cfg.rssLoopback || (containsString(b.cfg.targets, "loopback") && n <= rssLoopbackMax)
	if !loopback && containsString(b.cfg.targets, "loopback") {
		st.rep.Skipped = append(st.rep.Skipped, fmt.Sprintf("loopback comparison: %d files > %d would take long to create natively; add -rss-loopback to run it", n, rssLoopbackMax))
	}
	if len(shedfsTargets) > 0 {
		for _, t := range shedfsTargets {
			if _, err := os.Stat(b.shedfsBinOf(t)); err != nil {
				return fmt.Errorf("shedfs binary of %s: %w (build it with `make build`, or pass -shedfs or -shedfs-base)", t, err)
			}
		}
		if err := b.rssPopulateStore(ctx); err != nil {
			return err
		}
	}
	for _, t := range shedfsTargets {
		store := st.store
		if b.cfg.rssStore != "" {
			// The kept store stays as filled: each target mounts a copy.
			store = filepath.Join(b.work, "rss-"+t+"-store")
			if out, err := exec.CommandContext(ctx, "cp", "-a", "--sparse=always", st.store, store).CombinedOutput(); err != nil {
				return fmt.Errorf("rss: copy the kept store: %w: %s", err, strings.TrimSpace(string(out)))
			}
		}
		mnt := filepath.Join(b.work, "rss-"+t+"-mnt")
		args := []string{"mount", "--store", store, "--user", rssUser}
		args = append(args, rssShedfsFlags[t]...)
		var metricsAddr string
		if b.cfg.rssProfile != "" {
			addr, err := freeLocalAddr()
			if err != nil {
				return err
			}
			metricsAddr = addr
			args = slicesWithoutFlag(args, "--metrics")
			args = append(args, "--metrics", addr, "--pprof")
		}
		args = append(args, mnt)
		run, err := b.rssMeasure(ctx, t, mnt, metricsAddr, b.shedfsBinOf(t), args...)
		if run != nil {
			st.rep.Runs = append(st.rep.Runs, *run)
		}
		if err != nil {
			return err
		}
	}
	if loopback {
		if err := b.rssPopulateTree(ctx); err != nil {
			return err
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own binary for the loopback child: %w", err)
		}
		mnt := filepath.Join(b.work, "rss-loopback-mnt")
		run, err := b.rssMeasure(ctx, "loopback", mnt, "", self, serveLoopbackArg, st.tree, mnt)
		if run != nil {
			st.rep.Runs = append(st.rep.Runs, *run)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rssMeasure mounts one target with startFUSEChild (the same start, stop
// and cleanup discipline as every FUSE target), runs the phases and stops
// it again. It returns the phases measured so far even on error.
func (b *bench) rssMeasure(ctx context.Context, name, mnt, metricsAddr, bin string, args ...string) (*rssRun, error) {
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, fmt.Errorf("rss mount point: %w", err)
	}
	m, err := startFUSEChild(ctx, b, "rss-"+name, mnt, bin, args...)
	if err != nil {
		return nil, fmt.Errorf("rss: start %s: %w", name, err)
	}
	run := &rssRun{Target: name, Cmd: filepath.Base(bin) + " " + strings.Join(args, " ")}
	err = b.rssPhases(ctx, m, run, metricsAddr)
	if serr := b.stopOne(m); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return run, fmt.Errorf("rss on %s: %w", name, err)
	}
	return run, nil
}

// rssPhases runs the four phases on a mounted target and records the
// daemon's memory after each.
func (b *bench) rssPhases(ctx context.Context, m *mounted, run *rssRun, metricsAddr string) error {
	n := b.cfg.rssInodes
	dirs := rssShape(n)
	record := func(p rssPhase) error {
		if m.exited() {
			return fmt.Errorf("FUSE server exited (%s); its output:\n%s", m.cmd.ProcessState, tail(m.log, 20))
		}
		mem, err := readProcMem(m.cmd.Process.Pid)
		if err != nil {
			return err
		}
		p.Mem = mem
		run.Phases = append(run.Phases, p)
		slog.Info("rss", "target", run.Target, "phase", p.Phase, "VmRSS", humanBytes(mem.RSS), "VmHWM", humanBytes(mem.HWM),
			"RssAnon", humanBytes(mem.RSSAnon), "RssFile", humanBytes(mem.RSSFile))
		if metricsAddr != "" {
			b.rssSaveHeap(metricsAddr, run.Target, len(run.Phases), p.Phase)
		}
		return nil
	}

	// (a) right after the mount is ready.
	if err := record(rssPhase{Phase: rssPhases[0]}); err != nil {
		return err
	}

	// (b) stat of every file in the first rssStatDirs directories.
	start := time.Now()
	count := 0
	for d := 0; d < min(rssStatDirs, dirs); d++ {
		dir := filepath.Join(m.dir, rssDirName(d))
		for f := 0; f < rssFilesIn(n, d); f++ {
			if f%256 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if _, err := os.Lstat(filepath.Join(dir, rssFileName(f))); err != nil {
				return fmt.Errorf("stat: %w", err)
			}
			count++
		}
	}
	if err := record(rssPhase{Phase: rssPhases[1], Inodes: count, Seconds: time.Since(start).Seconds()}); err != nil {
		return err
	}

	// (c) a full walk, lstat of every entry.
	start = time.Now()
	count = 0
	lastLog := start
	err := filepath.WalkDir(m.dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, err := os.Lstat(path); err != nil {
			return err
		}
		count++
		if count%100000 == 0 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Since(lastLog) > 5*time.Second {
				lastLog = time.Now()
				slog.Info("rss: walking", "target", run.Target, "inodes", count)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	walk := rssPhase{Phase: rssPhases[2], Inodes: count, Seconds: time.Since(start).Seconds()}
	if want := n + dirs; count < want {
		walk.Note = fmt.Sprintf("saw %d entries, want at least %d", count, want)
	}
	if err := record(walk); err != nil {
		return err
	}

	// (d) the kernel forgets its dentries and inodes; FORGETs free nodes.
	note := "dentry/inode caches dropped"
	if err := dropDentries(); err != nil {
		note = fmt.Sprintf("caches NOT dropped (%v)", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(rssSettle):
	}
	return record(rssPhase{Phase: rssPhases[3], Note: note})
}

// dropDentries asks the kernel to drop its dentry and inode caches (2 in
// /proc/sys/vm/drop_caches), which sends FORGET for every FUSE inode it let
// go of.
func dropDentries() error {
	syncAll()
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("drop caches: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString("2\n"); err != nil {
		return fmt.Errorf("drop caches: %w", err)
	}
	return nil
}

// rssSaveHeap saves the daemon's heap profile for this phase under
// -rss-profile; failures are logged, not fatal.
func (b *bench) rssSaveHeap(addr, target string, i int, phase string) {
	name := fmt.Sprintf("%s-%d-%s.heap.pb.gz", target, i, strings.ReplaceAll(strings.Fields(phase)[0], " ", "-"))
	path := filepath.Join(b.cfg.rssProfile, name)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		slog.Warn("rss: heap profile", "err", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		slog.Warn("rss: heap profile", "status", resp.Status)
		return
	}
	if err := os.MkdirAll(b.cfg.rssProfile, 0o755); err != nil {
		slog.Warn("rss: heap profile", "err", err)
		return
	}
	f, err := os.Create(path)
	if err != nil {
		slog.Warn("rss: heap profile", "err", err)
		return
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		slog.Warn("rss: heap profile", "err", err)
	}
	if err := f.Close(); err != nil {
		slog.Warn("rss: heap profile", "err", err)
	}
	slog.Info("rss: saved heap profile", "file", path)
}

// freeLocalAddr returns a 127.0.0.1 address with a port that was free a
// moment ago, for the daemon's metrics and pprof server.
func freeLocalAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return addr, nil
}

// slicesWithoutFlag drops a "--flag value" pair from args.
func slicesWithoutFlag(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag && i+1 < len(args) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string][]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// rssPopulateStore fills a fresh store with -rss-inodes files in
// directories of rssPerDir, once per invocation (or once for good in
// -rss-store), straight through package metadata. Directories are handed to rssWorkers goroutines, one directory
// to one goroutine, so that creates in one directory do not conflict over
// the directory's inode.
func (b *bench) rssPopulateStore(ctx context.Context) error {
	if b.rss.store != "" {
		return nil
	}
	n := b.cfg.rssInodes
	dirs := rssShape(n)
	store := filepath.Join(b.work, "rss-store")
	var filled string // marks a kept store as complete
	if b.cfg.rssStore != "" {
		store = filepath.Join(b.cfg.rssStore, fmt.Sprintf("store-%d", n))
		filled = store + ".filled"
		if _, err := os.Stat(filled); err == nil {
			slog.Info("rss: reusing the kept store", "store", store)
			b.rss.store = store
			return nil
		}
		if err := os.RemoveAll(store); err != nil {
			return fmt.Errorf("rss: clear the kept store: %w", err)
		}
	}
	meta, err := metadata.Open(filepath.Join(store, "meta"), metadata.Options{})
	if err != nil {
		return fmt.Errorf("rss: open store: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = meta.Close()
		}
	}()
	u, err := meta.AddUser(rssUser)
	if err != nil {
		return fmt.Errorf("rss: add user %s: %w", rssUser, err)
	}
	// The quota of the "shedfs" target (quota.go), checked on every create.
	if err := meta.SetLimit(shedfs.Holder("user:"+rssUser), shedfs.Limit{Bytes: quotaBytes, Inodes: quotaInodes}); err != nil {
		return fmt.Errorf("rss: quota of %s: %w", rssUser, err)
	}
	zone := shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: rssUser}
	slog.Info("rss: filling the store", "files", n, "dirs", dirs, "store", store)
	start := time.Now()
	var done atomic.Int64
	err = parallelDirs(ctx, dirs, func(d int) error {
		dir, err := meta.Create(u.Roots.Private, rssDirName(d),
			&shedfs.Inode{Mode: syscall.S_IFDIR | 0o755, Zone: zone, Owner: rssUser}, nil)
		if err != nil {
			return fmt.Errorf("mkdir %s: %w", rssDirName(d), err)
		}
		for f := 0; f < rssFilesIn(n, d); f++ {
			if _, err := meta.Create(dir.Ino, rssFileName(f),
				&shedfs.Inode{Mode: syscall.S_IFREG | 0o644, Zone: zone, Owner: rssUser}, nil); err != nil {
				return fmt.Errorf("create %s/%s: %w", rssDirName(d), rssFileName(f), err)
			}
			progress(&done, start, "rss: filling the store", n)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rss: fill store: %w", err)
	}
	closed = true
	if err := meta.Close(); err != nil {
		return fmt.Errorf("rss: close store: %w", err)
	}
	if filled != "" {
		if err := os.WriteFile(filled, nil, 0o644); err != nil {
			return fmt.Errorf("rss: mark the kept store: %w", err)
		}
	}
	b.rss.store = store
	b.rss.rep.Populate = time.Since(start).Seconds()
	slog.Info("rss: store filled", "files", n, "dirs", dirs, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// rssPopulateTree makes the same tree of empty files on the native
// filesystem, once per invocation, as the loopback's source.
func (b *bench) rssPopulateTree(ctx context.Context) error {
	if b.rss.tree != "" {
		return nil
	}
	n := b.cfg.rssInodes
	tree := filepath.Join(b.work, "rss-tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return fmt.Errorf("rss: tree: %w", err)
	}
	slog.Info("rss: creating the native tree", "files", n, "dir", tree)
	start := time.Now()
	var done atomic.Int64
	err := parallelDirs(ctx, rssShape(n), func(d int) error {
		dir := filepath.Join(tree, rssDirName(d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		for f := 0; f < rssFilesIn(n, d); f++ {
			fh, err := os.OpenFile(filepath.Join(dir, rssFileName(f)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			if err := fh.Close(); err != nil {
				return err
			}
			progress(&done, start, "rss: creating the native tree", n)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rss: native tree: %w", err)
	}
	syncAll()
	b.rss.tree = tree
	slog.Info("rss: native tree created", "files", n, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// progress counts one file and logs every 100,000.
func progress(done *atomic.Int64, start time.Time, msg string, total int) {
	if v := done.Add(1); v%100000 == 0 {
		el := time.Since(start)
		slog.Info(msg, "done", v, "of", total, "rate", fmt.Sprintf("%.0f/s", float64(v)/el.Seconds()))
	}
}

// parallelDirs calls fn for directories 0..dirs-1 from rssWorkers
// goroutines and returns the first error; it stops handing out work when
// ctx is done or something failed.
func parallelDirs(ctx context.Context, dirs int, fn func(d int) error) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	for range min(rssWorkers, max(dirs, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d := int(next.Add(1) - 1)
				if d >= dirs || failed() {
					return
				}
				err := ctx.Err()
				if err == nil {
					err = fn(d)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
