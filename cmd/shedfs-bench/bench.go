package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// bench is one run of shedfs-bench: its configuration, work directory,
// started targets and collected samples.
type bench struct {
	cfg  *config
	work string // temporary work directory, removed at the end

	tarball   string // tar of the tree, made once at start
	treePath  string // the tree itself (untar and clone workloads)
	treeLabel string
	treeFiles int
	treeBytes int64

	// mu guards started and mounts: the rss workload starts and stops
	// targets from the workload goroutine while a signal may stop them all.
	mu      sync.Mutex
	started []*mounted // FUSE children still to stop, stopped by stopAll
	mounts  []string   // every FUSE mount point ever started, checked by cleanup

	rss   rssState   // the rss workload's store, tree and findings (rss.go)
	views viewsState // the views workload's findings (views.go)
	npm   npmState   // the npm workload's project and cache (agents.go)
	repo  string     // the clone workload's source repository (agents.go)

	// skips maps a metric ID to why it is not measured in this run (npm
	// not installed, the registry unreachable); its rows stay empty.
	skips map[string]string

	dropped, notDropped int // page cache drops that worked / did not

	workFS  workFS     // the filesystem the targets live on (workfs.go)
	dirFS   workFS     // -dir's filesystem, which workFS replaced if scratch is set
	scratch *scratchFS // the journaled scratch filesystem of this run, or nil (scratch.go)

	loadStart string // /proc/loadavg when the run started
}

// row holds the samples of one metric for every target.
type row struct {
	Metric   metric
	Workload string
	Samples  map[string][]float64
	// Reps holds one value per repetition and target, in order, NaN where
	// the target did not measure it (Samples leaves those out).
	Reps map[string][]float64
}

// run does a whole benchmark: prepare, start targets, run workloads, stop
// targets, report. Targets are always stopped and the work directory is
// always removed, including on error and on SIGINT/SIGTERM.
func run(ctx context.Context, cfg *config) (err error) {
	targets := selectTargets(cfg.targets)
	workloads, standalone := splitWorkloads(selectWorkloads(cfg.workloads))
	for _, t := range targets {
		if t.Name != "native" && os.Geteuid() != 0 {
			return fmt.Errorf("target %q mounts FUSE and needs root (run as root, or use -targets native)", t.Name)
		}
	}
	if len(targets) > 1 || targets[0].Name != "native" {
		if _, err := os.Stat("/dev/fuse"); err != nil {
			return fmt.Errorf("FUSE targets need /dev/fuse: %w (try `modprobe fuse`)", err)
		}
	}

	parent, err := filepath.Abs(cfg.parentDir)
	if err != nil {
		return fmt.Errorf("work dir parent: %w", err)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("work dir parent: %w", err)
	}
	scratch, dirFS, err := prepareWorkFS(ctx, cfg, parent)
	if err != nil {
		return err
	}
	if scratch != nil {
		// Deferred first, so it runs after the targets are stopped and the
		// work directory inside it is removed.
		defer func() {
			if rerr := scratch.remove(); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}()
		parent = scratch.Mount
	}
	work, err := os.MkdirTemp(parent, "shedfs-bench-")
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	if work, err = filepath.EvalSymlinks(work); err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	b := &bench{cfg: cfg, work: work, loadStart: loadAvg(), skips: map[string]string{}, dirFS: dirFS, scratch: scratch}
	defer func() {
		if cerr := b.cleanup(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	b.workFS = dirFS
	if scratch != nil {
		var derr error
		if b.workFS, derr = detectWorkFS("/", work); derr != nil {
			slog.Warn("could not tell the scratch filesystem's journal", "err", derr)
		}
	}
	slog.Info("work directory", "dir", work, "fs", b.workFS.String())

	for _, w := range workloads {
		if w.Prepare == nil {
			continue
		}
		if err := w.Prepare(ctx, b); err != nil {
			return fmt.Errorf("prepare workload %s: %w", w.Name, err)
		}
	}

	var mounts []*mounted
	for _, t := range targets {
		if len(workloads) == 0 {
			break // only standalone workloads: they start what they need
		}
		m, err := t.Start(ctx, b, t.Name)
		if err != nil {
			return fmt.Errorf("start target %s: %w", t.Name, err)
		}
		mounts = append(mounts, m)
	}

	var rows []*row
	type span struct{ first, n int }
	spans := make([]span, len(workloads))
	for i, w := range workloads {
		ms := w.Metrics(b)
		spans[i] = span{len(rows), len(ms)}
		for _, m := range ms {
			rows = append(rows, &row{Metric: m, Workload: w.Name, Samples: map[string][]float64{}, Reps: map[string][]float64{}})
		}
	}

	// The workloads run in their own goroutine: if a FUSE daemon hangs, that
	// goroutine is stuck in the kernel, and the signal path below must still
	// be able to kill the daemon and unmount.
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			for rep := 0; rep < cfg.reps; rep++ {
				for wi, w := range workloads {
					for _, m := range mounts {
						if m.cmd != nil && m.exited() {
							return fmt.Errorf("target %s: FUSE server exited (%s); its output:\n%s", m.name, m.cmd.ProcessState, tail(m.log, 20))
						}
						dir := filepath.Join(m.dir, fmt.Sprintf("%s-%d", w.Name, rep))
						if err := os.Mkdir(dir, 0o755); err != nil {
							return fmt.Errorf("target %s: %w", m.name, err)
						}
						vals, err := w.Run(ctx, b, m, dir)
						if err != nil {
							return fmt.Errorf("workload %s on %s (repetition %d): %w", w.Name, m.name, rep+1, err)
						}
						if err := os.RemoveAll(dir); err != nil {
							return fmt.Errorf("target %s: clean up: %w", m.name, err)
						}
						syncAll()
						attrs := []any{"rep", fmt.Sprintf("%d/%d", rep+1, cfg.reps), "workload", w.Name, "target", m.name}
						for i, v := range vals {
							r := rows[spans[wi].first+i]
							r.Reps[m.name] = append(r.Reps[m.name], v)
							if math.IsNaN(v) {
								continue // not measured on this target
							}
							r.Samples[m.name] = append(r.Samples[m.name], v)
							attrs = append(attrs, r.Metric.ID, fmt.Sprintf("%s %s", formatValue(v, r.Metric.Unit), r.Metric.Unit))
						}
						slog.Info("measured", attrs...)
					}
				}
			}
			for _, w := range standalone {
				if err := w.Standalone(ctx, b); err != nil {
					return fmt.Errorf("workload %s: %w", w.Name, err)
				}
			}
			return nil
		}()
	}()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		slog.Warn("interrupted: stopping targets and removing the work directory")
		if cerr := b.stopAll(); cerr != nil {
			slog.Error("stop targets", "err", cerr)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}

	rss := map[string]int64{}
	for _, m := range mounts {
		if v := m.peakRSS(); v > 0 {
			rss[m.name] = v
		}
	}
	if err := b.stopAll(); err != nil {
		return err
	}
	rep := buildReport(b, targets, rows, rss)
	rep.print(os.Stdout)
	if cfg.jsonPath != "" {
		if err := rep.writeJSON(cfg.jsonPath); err != nil {
			return err
		}
		slog.Info("wrote raw numbers", "file", cfg.jsonPath)
	}
	return nil
}

// selectTargets returns the targets named, in allTargets order.
func selectTargets(names []string) []target {
	var out []target
	for _, t := range allTargets() {
		if containsString(names, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// splitWorkloads separates the per-target workloads from the standalone ones.
func splitWorkloads(ws []workload) (perTarget, standalone []workload) {
	for _, w := range ws {
		if w.Standalone != nil {
			standalone = append(standalone, w)
		} else {
			perTarget = append(perTarget, w)
		}
	}
	return perTarget, standalone
}

// selectWorkloads returns the workloads named, in allWorkloads order.
func selectWorkloads(names []string) []workload {
	var out []workload
	for _, w := range allWorkloads() {
		if containsString(names, w.Name) {
			out = append(out, w)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// prepareTarball tars the source tree once into the work directory.
func prepareTarball(ctx context.Context, b *bench) error {
	if err := b.prepareTree(ctx); err != nil {
		return err
	}
	if b.tarball != "" {
		return nil
	}
	tarball := filepath.Join(b.work, "tree.tar")
	slog.Info("making tarball", "tree", b.treePath, "files", b.treeFiles, "bytes", humanBytes(b.treeBytes))
	if _, err := timeCommand(ctx, "tar", "-cf", tarball, "-C", filepath.Dir(b.treePath), filepath.Base(b.treePath)); err != nil {
		return fmt.Errorf("tar the tree: %w", err)
	}
	b.tarball = tarball
	return nil
}

// prepareTree finds the source tree and counts its files, once.
func (b *bench) prepareTree(ctx context.Context) error {
	if b.treePath != "" {
		return nil
	}
	tree := b.cfg.tree
	if tree == "" {
		goroot, err := goEnv(ctx, "GOROOT")
		if err != nil {
			return err
		}
		tree = filepath.Join(goroot, "src")
		b.treeLabel = "$GOROOT/src"
		if b.cfg.quick {
			tree = filepath.Join(tree, "net")
			b.treeLabel = "$GOROOT/src/net"
		}
	} else {
		b.treeLabel = tree
	}
	tree, err := filepath.Abs(tree)
	if err != nil {
		return fmt.Errorf("tree: %w", err)
	}
	err = filepath.WalkDir(tree, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b.treeFiles++
			if info, err := d.Info(); err == nil {
				b.treeBytes += info.Size()
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("tree %s: %w", tree, err)
	}
	b.treePath = tree
	return nil
}

// goEnv asks the go command for one variable.
func goEnv(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w (or pass -tree)", name, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", fmt.Errorf("go env %s is empty (pass -tree)", name)
	}
	return v, nil
}

// noteDrop counts whether a page cache drop worked.
func (b *bench) noteDrop(ok bool) {
	if ok {
		b.dropped++
	} else {
		b.notDropped++
	}
}

// stopOne stops one started FUSE child and forgets it.
func (b *bench) stopOne(m *mounted) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, s := range b.started {
		if s == m {
			b.started = append(b.started[:i], b.started[i+1:]...)
			break
		}
	}
	return m.stop()
}

// stopAll stops every started FUSE child, last started first.
func (b *bench) stopAll() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for i := len(b.started) - 1; i >= 0; i-- {
		if err := b.started[i].stop(); err != nil {
			errs = append(errs, err)
		}
	}
	b.started = nil
	return errors.Join(errs...)
}

// cleanup stops the targets and removes the work directory, unless a mount
// is still inside it (removing through a live mount would hang or reach the
// wrong files).
func (b *bench) cleanup() error {
	if err := b.stopAll(); err != nil {
		return fmt.Errorf("%w: %v", errStillMounted, err)
	}
	b.mu.Lock()
	mounts := append([]string(nil), b.mounts...)
	b.mu.Unlock()
	for _, mnt := range mounts {
		if ok, _ := isFUSEMount(mnt); ok {
			return fmt.Errorf("%w at %s; remove %s by hand after `umount -l`", errStillMounted, mnt, b.work)
		}
	}
	// A serve child mounts views below its mount root: none may be left.
	if left, err := fuseMountsUnder(b.work); err != nil || len(left) > 0 {
		return fmt.Errorf("%w under %s (%d: %v, %v); remove it by hand after `umount -l`", errStillMounted, b.work, len(left), firstN(left, 3), err)
	}
	if err := os.RemoveAll(b.work); err != nil {
		return fmt.Errorf("remove work dir: %w", err)
	}
	return nil
}

// machineInfo describes where the numbers were measured.
type machineInfo struct {
	Date       string `json:"date"`
	Hostname   string `json:"hostname"`
	NumCPU     int    `json:"nproc"`
	CPU        string `json:"cpu"`
	Kernel     string `json:"kernel"`
	MemTotal   string `json:"mem_total"`
	GoVersion  string `json:"go"`
	WorkFS     string `json:"work_fs"`
	WorkDir    string `json:"work_dir"`
	ShedfsInfo string `json:"shedfs_version,omitempty"`
	LoadStart  string `json:"loadavg_start"`
	LoadEnd    string `json:"loadavg_end"`

	// WorkFSInfo is the filesystem the targets lived on, its journal
	// included; DirFS is -dir's when a Scratch filesystem replaced it.
	WorkFSInfo workFS     `json:"work_fs_detail"`
	DirFS      *workFS    `json:"dir_fs,omitempty"`
	Scratch    *scratchFS `json:"scratch_fs,omitempty"`
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "".
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// readMachineInfo gathers machineInfo; missing pieces stay empty.
func readMachineInfo(b *bench) machineInfo {
	mi := machineInfo{
		Date:      time.Now().Format(time.RFC3339),
		NumCPU:    runtime.NumCPU(),
		GoVersion: runtime.Version(),
		WorkDir:   filepath.Dir(b.work),
		LoadStart: b.loadStart,
		LoadEnd:   loadAvg(),
	}
	mi.WorkFSInfo = b.workFS
	if b.scratch != nil {
		mi.DirFS, mi.Scratch = &b.dirFS, b.scratch
	}
	mi.Hostname, _ = os.Hostname()
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		mi.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				mi.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb); err == nil {
					mi.MemTotal = humanBytes(kb << 10)
				}
			}
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(b.work), &st); err == nil {
		mi.WorkFS = fsTypeName(int64(st.Type))
	}
	if containsString(b.cfg.targets, "shedfs") {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, b.cfg.shedfsBin, "version").Output(); err == nil {
			mi.ShedfsInfo = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
		}
	}
	return mi
}

// fsTypeName names the common statfs magic numbers.
func fsTypeName(magic int64) string {
	switch magic {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs"
	case 0x794c7630:
		return "overlayfs"
	case 0x2FC12FC1:
		return "zfs"
	case 0x65735546:
		return "fuse"
	}
	return fmt.Sprintf("0x%x", magic)
}
