package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// metric is one number a workload produces per run.
type metric struct {
	// ID is a stable key (the name changes with sizes), used by the derived
	// ratios between rows (goals.go).
	ID string `json:"id"`
	// Name is the row label and the JSON key.
	Name string `json:"name"`
	// Unit is what the number counts: files/s, s or MiB/s.
	Unit string `json:"unit"`
	// HigherIsBetter is true for rates and false for durations; ratios are
	// always reported as speed ratios, >1 meaning faster than the baseline.
	HigherIsBetter bool `json:"higher_is_better"`
	// Class groups metrics by kind of work (metadata, data, agent, dir).
	Class string `json:"class"`
	// Goal is the docs/design.md "Performance" (issue 9) target on this row, if any.
	Goal *goal `json:"goal,omitempty"`
}

// Classes of metrics.
const (
	classMetadata = "metadata"
	classData     = "data"
	classAgent    = "agent"
	classDir      = "dir"
	classCPU      = "cpu"
)

// workload is a piece of work run in a fresh directory of a target.
type workload struct {
	// Name is the -workloads name.
	Name string
	// Metrics returns what one run measures, for this configuration.
	Metrics func(b *bench) []metric
	// Prepare, if set, runs once before any target starts (a tarball, a
	// warm npm cache, a git repository).
	Prepare func(ctx context.Context, b *bench) error
	// Run does the work once in dir of target m and returns one value per
	// metric; NaN means "not measured here" (daemon CPU of a plain
	// directory, a workload skipped for a reason in b.skips).
	Run func(ctx context.Context, b *bench, m *mounted, dir string) ([]float64, error)
	// Standalone, when set instead of Metrics and Run, runs the workload
	// once per invocation, after the others, with its own targets and
	// report section (the rss workload, rss.go).
	Standalone func(ctx context.Context, b *bench) error
	// OptIn workloads are left out of the default -workloads list.
	OptIn bool
}

// allWorkloads is every workload, in row order.
func allWorkloads() []workload {
	return []workload{
		{Name: "smallfiles", Metrics: smallFilesMetrics, Run: runSmallFiles},
		{Name: "untar", Prepare: prepareTarball, Metrics: untarMetrics, Run: runUntar},
		{Name: "seq", Metrics: seqMetrics, Run: runSeq},
		{Name: "randread", Metrics: randReadMetrics, Run: runRandRead},              // randread.go
		{Name: "npm", Prepare: prepareNpm, Metrics: npmMetrics, Run: runNpm},        // agents.go
		{Name: "clone", Prepare: prepareRepo, Metrics: cloneMetrics, Run: runClone}, // agents.go
		{Name: "dirscale", Metrics: dirScaleMetrics, Run: runDirScale},              // dirscale.go
		{Name: "views", Standalone: runViews},                                       // views.go
		{Name: "rss", Standalone: runRSS, OptIn: true},                              // rss.go
	}
}

// defaultWorkloads is every workload that is not opt-in.
func defaultWorkloads() []workload {
	var out []workload
	for _, w := range allWorkloads() {
		if !w.OptIn {
			out = append(out, w)
		}
	}
	return out
}

// workloadNames lists the names of ws in order.
func workloadNames(ws []workload) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Name
	}
	return out
}

func smallFilesMetrics(b *bench) []metric {
	what := fmt.Sprintf("%d×%s files", b.cfg.files, humanBytes(int64(b.cfg.fileSize)))
	var out []metric
	for _, w := range []int{1, b.cfg.workers} {
		for _, p := range smallFilePhases {
			out = append(out, metric{ID: smallFilesID(p, w), Name: fmt.Sprintf("%s %s, %s", p, what, workersLabel(w)),
				Unit: "files/s", HigherIsBetter: true, Class: classMetadata, Goal: &goal{Of: "shedfs/loopback", Min: 1.5}})
		}
	}
	return out
}

// smallFilePhases are the phases of the smallfiles workload, in order.
var smallFilePhases = []string{"create", "stat", "read", "delete"}

// smallFilesID is the metric ID of one phase at w workers.
func smallFilesID(phase string, w int) string {
	if w == 1 {
		return phase + "@1"
	}
	return phase + "@N"
}

// workersLabel is "1 worker" or "4 workers".
func workersLabel(w int) string {
	if w == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", w)
}

// runSmallFiles creates, stats, reads and deletes cfg.files small files in
// one directory, first from one goroutine one file at a time, as tools such
// as tar, git or a test suite do, then from cfg.workers goroutines, each on
// its own contiguous share of the names in one directory, as a parallel
// build or package manager does. Reads check the contents.
func runSmallFiles(ctx context.Context, b *bench, _ *mounted, dir string) ([]float64, error) {
	one, err := smallFiles(ctx, b, filepath.Join(dir, "files1"), 1)
	if err != nil {
		return nil, err
	}
	many, err := smallFiles(ctx, b, filepath.Join(dir, "filesN"), b.cfg.workers)
	if err != nil {
		return nil, err
	}
	return append(one, many...), nil
}

// smallFiles runs the four phases in a new directory d with w workers and
// returns files/s for each.
func smallFiles(ctx context.Context, b *bench, d string, w int) ([]float64, error) {
	if err := os.Mkdir(d, 0o755); err != nil {
		return nil, fmt.Errorf("mkdir: %w", err)
	}
	n := b.cfg.files
	names := make([]string, n)
	for i := range names {
		names[i] = filepath.Join(d, fmt.Sprintf("f%06d", i))
	}
	content := func(i int) []byte {
		buf := bytes.Repeat([]byte{byte(i)}, b.cfg.fileSize)
		if len(buf) >= 8 {
			binary.BigEndian.PutUint64(buf, uint64(i))
		}
		return buf
	}
	var rates []float64
	phase := func(name string, f func(i int) error) error {
		// Every phase starts cold (issue 28: the anchor's numbers were
		// taken so): what the last one left in the page, dentry and
		// inode caches would otherwise favour the targets that keep it.
		b.noteDrop(dropCaches())
		start := time.Now()
		err := splitWork(n, w, func(lo, hi int) error {
			for i := lo; i < hi; i++ {
				if i%256 == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				if err := f(i); err != nil {
					return fmt.Errorf("%s %s (%s): %w", name, names[i], workersLabel(w), err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		rates = append(rates, float64(n)/time.Since(start).Seconds())
		return nil
	}
	if err := phase("create", func(i int) error {
		return os.WriteFile(names[i], content(i), 0o644)
	}); err != nil {
		return nil, err
	}
	if err := phase("stat", func(i int) error {
		st, err := os.Lstat(names[i])
		if err == nil && st.Size() != int64(b.cfg.fileSize) {
			err = fmt.Errorf("size %d, want %d", st.Size(), b.cfg.fileSize)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := phase("read", func(i int) error {
		got, err := os.ReadFile(names[i])
		if err == nil && !bytes.Equal(got, content(i)) {
			err = errors.New("contents differ from what was written")
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := phase("delete", func(i int) error {
		return os.Remove(names[i])
	}); err != nil {
		return nil, err
	}
	if err := os.Remove(d); err != nil {
		return nil, fmt.Errorf("rmdir: %w", err)
	}
	return rates, nil
}

// splitWork calls fn on w contiguous ranges covering [0, n), each in its
// own goroutine (in the caller's for w == 1), and returns the first error.
func splitWork(n, w int, fn func(lo, hi int) error) error {
	if w <= 1 {
		return fn(0, n)
	}
	errs := make([]error, w)
	var wg sync.WaitGroup
	for k := range w {
		lo, hi := k*n/w, (k+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = fn(lo, hi)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func untarMetrics(b *bench) []metric {
	what := fmt.Sprintf("%s (%d files, %s)", b.treeLabel, b.treeFiles, humanBytes(b.treeBytes))
	g := &goal{Of: "shedfs/loopback", Min: 1.5}
	return []metric{
		{ID: "untar", Name: "untar " + what, Unit: "s", Class: classMetadata, Goal: g},
		{ID: "find", Name: "find over it", Unit: "s", Class: classMetadata, Goal: g},
		{ID: "du", Name: "du -s over it", Unit: "s", Class: classMetadata, Goal: g},
		{ID: "rm-tree", Name: "rm -rf of it", Unit: "s", Class: classMetadata, Goal: g},
		{ID: "cpu-untar", Name: "daemon CPU for the untar (utime+stime)", Unit: "s", Class: classCPU,
			Goal: &goal{Of: "shedfs/loopback", Min: 1.0}},
	}
}

// runUntar extracts the tarball made at start with tar(1), walks the tree
// with find(1) and du(1), and removes it with rm -rf, the way an agent's
// shell would. For a FUSE target it also reads the CPU time the server
// process spent during the untar.
func runUntar(ctx context.Context, b *bench, m *mounted, dir string) ([]float64, error) {
	d := filepath.Join(dir, "tree")
	if err := os.Mkdir(d, 0o755); err != nil {
		return nil, fmt.Errorf("mkdir: %w", err)
	}
	b.noteDrop(dropCaches())
	cpu0, cpuErr := m.cpuSeconds()
	untar, err := timeCommand(ctx, "tar", "-xf", b.tarball, "-C", d)
	if err != nil {
		return nil, err
	}
	cpu := math.NaN()
	if cpu1, err := m.cpuSeconds(); err == nil && cpuErr == nil {
		cpu = cpu1 - cpu0
	}
	b.noteDrop(dropCaches())
	find, err := timeCommand(ctx, "find", d)
	if err != nil {
		return nil, err
	}
	b.noteDrop(dropCaches())
	du, err := timeCommand(ctx, "du", "-s", d)
	if err != nil {
		return nil, err
	}
	b.noteDrop(dropCaches())
	rm, err := timeCommand(ctx, "rm", "-rf", d)
	if err != nil {
		return nil, err
	}
	return []float64{untar.Seconds(), find.Seconds(), du.Seconds(), rm.Seconds(), cpu}, nil
}

// timeCommand runs a command and returns its wall time.
func timeCommand(ctx context.Context, name string, args ...string) (time.Duration, error) {
	return timeCommandIn(ctx, "", nil, name, args...)
}

// timeCommandIn runs a command in directory dir ("": the current one) with
// extra environment variables and returns its wall time. Its output is
// kept only for the error.
func timeCommandIn(ctx context.Context, dir string, env []string, name string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		msg := bytes.TrimSpace(out.Bytes())
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return 0, fmt.Errorf("%s %v: %w: %s", name, args, err, msg)
	}
	return elapsed, nil
}

func seqMetrics(b *bench) []metric {
	what := humanBytes(b.cfg.seqSize)
	return []metric{
		{ID: "seq-write", Name: "seq write " + what + " +fsync", Unit: "MiB/s", HigherIsBetter: true, Class: classData,
			Goal: &goal{Of: "shedfs/native", Min: 0.8}},
		{ID: "seq-read", Name: "seq read " + what + " cold", Unit: "MiB/s", HigherIsBetter: true, Class: classData,
			Goal: &goal{Of: "shedfs/native", Min: 0.95}},
		{ID: "seq-reread", Name: "seq re-read " + what + " warm (page cache)", Unit: "MiB/s", HigherIsBetter: true, Class: classData,
			Goal: &goal{Of: "shedfs/native", Min: 0.9}},
	}
}

// seqBlock is the size of each write and read of the sequential workload.
const seqBlock = 1 << 20

// runSeq writes cfg.seqSize bytes in 1 MiB writes, fsyncs, drops the page
// cache where permitted, reads the file back in 1 MiB reads, then reads it
// once more without dropping anything: the file is unchanged, so a
// filesystem that keeps its page cache across opens serves it from memory.
func runSeq(ctx context.Context, b *bench, _ *mounted, dir string) ([]float64, error) {
	path := filepath.Join(dir, "seq.bin")
	buf := randomBlock([32]byte{'s', 'h', 'e', 'd', 'f', 's'})
	blocks := b.cfg.seqSize / seqBlock
	size := blocks * seqBlock

	start := time.Now()
	if err := writeBlocks(ctx, path, buf, blocks); err != nil {
		return nil, err
	}
	write := time.Since(start)

	b.noteDrop(dropCaches())

	read, err := readAll(ctx, path, buf, size)
	if err != nil {
		return nil, err
	}
	reread, err := readAll(ctx, path, buf, size)
	if err != nil {
		return nil, fmt.Errorf("re-read: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return nil, fmt.Errorf("remove: %w", err)
	}
	mib := float64(size) / (1 << 20)
	return []float64{mib / write.Seconds(), mib / read.Seconds(), mib / reread.Seconds()}, nil
}

// readAll reads path from start to end in len(buf) reads, checks that it
// holds size bytes, and returns the time from open to close.
func readAll(ctx context.Context, path string, buf []byte, size int64) (time.Duration, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("open for read: %w", err)
	}
	defer f.Close()
	var total int64
	for {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		n, err := f.Read(buf)
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("close: %w", err)
	}
	elapsed := time.Since(start)
	if total != size {
		return 0, fmt.Errorf("read %d bytes back, wrote %d", total, size)
	}
	return elapsed, nil
}

// dropCaches syncs and asks the kernel to drop the page, dentry and inode
// caches; it reports whether the kernel accepted.
func dropCaches() bool {
	syncAll()
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.WriteString("3\n")
	return err == nil
}

// syncAll flushes every filesystem, so that one workload's dirty pages are
// not written back on the next one's clock.
func syncAll() { syscall.Sync() }

// humanBytes formats a byte count with a binary unit: 4KiB, 1GiB, 157.3MiB.
func humanBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v := float64(n)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d%s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}

// randomBlock is one seqBlock of pseudo-random bytes, the same for every
// target of a run (seeded), so that no filesystem can compress or dedupe it.
func randomBlock(seed [32]byte) []byte {
	buf := make([]byte, seqBlock)
	rng := rand.New(rand.NewChaCha8(seed))
	for i := 0; i < len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
	}
	return buf
}

// writeBlocks writes blocks copies of buf to a new file at path and
// fsyncs it, stopping early when ctx ends.
func writeBlocks(ctx context.Context, path string, buf []byte, blocks int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	for i := int64(0); i < blocks; i++ {
		if i%64 == 0 && ctx.Err() != nil {
			f.Close()
			return ctx.Err()
		}
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}
