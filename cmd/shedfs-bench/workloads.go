package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// metric is one number a workload produces per run.
type metric struct {
	// Name is the row label and the JSON key.
	Name string `json:"name"`
	// Unit is what the number counts: files/s, s or MiB/s.
	Unit string `json:"unit"`
	// HigherIsBetter is true for rates and false for durations; ratios are
	// always reported as speed ratios, >1 meaning faster than the baseline.
	HigherIsBetter bool `json:"higher_is_better"`
	// Class groups metrics for the DESIGN.md section 8 targets.
	Class string `json:"class"`
}

// Classes of metrics, matching the DESIGN.md section 8 targets.
const (
	classMetadata = "metadata"
	classSeqWrite = "seqwrite"
	classSeqRead  = "seqread"
)

// workload is a piece of work run in a fresh directory of a target.
type workload struct {
	// Name is the -workloads name.
	Name string
	// Metrics returns what one run measures, for this configuration.
	Metrics func(b *bench) []metric
	// Run does the work once in dir and returns one value per metric.
	Run func(ctx context.Context, b *bench, dir string) ([]float64, error)
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
		{Name: "untar", Metrics: untarMetrics, Run: runUntar},
		{Name: "seq", Metrics: seqMetrics, Run: runSeq},
		{Name: "rss", Standalone: runRSS, OptIn: true}, // rss.go
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
	return []metric{
		{Name: "create " + what, Unit: "files/s", HigherIsBetter: true, Class: classMetadata},
		{Name: "stat " + what, Unit: "files/s", HigherIsBetter: true, Class: classMetadata},
		{Name: "read " + what, Unit: "files/s", HigherIsBetter: true, Class: classMetadata},
		{Name: "delete " + what, Unit: "files/s", HigherIsBetter: true, Class: classMetadata},
	}
}

// runSmallFiles creates, stats, reads and deletes cfg.files small files in
// one directory, one process, one file at a time, as tools such as tar, git
// or a test suite do. Reads check the contents.
func runSmallFiles(ctx context.Context, b *bench, dir string) ([]float64, error) {
	d := filepath.Join(dir, "files")
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
		start := time.Now()
		for i := range n {
			if i%256 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if err := f(i); err != nil {
				return fmt.Errorf("%s %s: %w", name, names[i], err)
			}
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

func untarMetrics(b *bench) []metric {
	what := fmt.Sprintf("%s (%d files, %s)", b.treeLabel, b.treeFiles, humanBytes(b.treeBytes))
	return []metric{
		{Name: "untar " + what, Unit: "s", Class: classMetadata},
		{Name: "rm -rf " + what, Unit: "s", Class: classMetadata},
	}
}

// runUntar extracts the tarball made at start with tar(1) and removes the
// tree with rm -rf, the way an agent's shell would.
func runUntar(ctx context.Context, b *bench, dir string) ([]float64, error) {
	d := filepath.Join(dir, "tree")
	if err := os.Mkdir(d, 0o755); err != nil {
		return nil, fmt.Errorf("mkdir: %w", err)
	}
	untar, err := timeCommand(ctx, "tar", "-xf", b.tarball, "-C", d)
	if err != nil {
		return nil, err
	}
	syncAll()
	rm, err := timeCommand(ctx, "rm", "-rf", d)
	if err != nil {
		return nil, err
	}
	return []float64{untar.Seconds(), rm.Seconds()}, nil
}

// timeCommand runs a command and returns its wall time.
func timeCommand(ctx context.Context, name string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
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
		{Name: "seq write " + what + " +fsync", Unit: "MiB/s", HigherIsBetter: true, Class: classSeqWrite},
		{Name: "seq read " + what, Unit: "MiB/s", HigherIsBetter: true, Class: classSeqRead},
	}
}

// seqBlock is the size of each write and read of the sequential workload.
const seqBlock = 1 << 20

// runSeq writes cfg.seqSize bytes in 1 MiB writes, fsyncs, drops the page
// cache where permitted, and reads the file back in 1 MiB reads.
func runSeq(ctx context.Context, b *bench, dir string) ([]float64, error) {
	path := filepath.Join(dir, "seq.bin")
	buf := make([]byte, seqBlock)
	rng := rand.New(rand.NewChaCha8([32]byte{'s', 'h', 'e', 'd', 'f', 's'}))
	for i := 0; i < len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
	}
	blocks := b.cfg.seqSize / seqBlock
	size := blocks * seqBlock

	start := time.Now()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	for i := int64(0); i < blocks; i++ {
		if i%64 == 0 && ctx.Err() != nil {
			f.Close()
			return nil, ctx.Err()
		}
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return nil, fmt.Errorf("write: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	write := time.Since(start)

	b.noteDrop(dropCaches())

	start = time.Now()
	f, err = os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open for read: %w", err)
	}
	var total int64
	for {
		if ctx.Err() != nil {
			f.Close()
			return nil, ctx.Err()
		}
		n, err := f.Read(buf)
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read: %w", err)
		}
	}
	f.Close()
	read := time.Since(start)
	if total != size {
		return nil, fmt.Errorf("read %d bytes back, wrote %d", total, size)
	}
	if err := os.Remove(path); err != nil {
		return nil, fmt.Errorf("remove: %w", err)
	}
	mib := float64(size) / (1 << 20)
	return []float64{mib / write.Seconds(), mib / read.Seconds()}, nil
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
