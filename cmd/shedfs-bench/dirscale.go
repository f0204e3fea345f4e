package main

// The dirscale workload: does the cost of an operation on one entry grow
// with the size of its directory? docs/design.md, "Performance", wants create, lookup
// and readdir per entry in a directory of 100,000 entries within 1.5× of
// the same in a directory of 1,000 (-dir-large, -dir-small).

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// dirOps are the operations timed per entry, in order.
var dirOps = []string{"create", "lookup", "readdir", "delete"}

// dirLookups bounds the lookups per directory: a random sample of this
// many names (every name in a smaller directory) is enough for a mean.
const dirLookups = 10000

// dirID is the metric ID of one operation in the "small" or "large"
// directory.
func dirID(op, size string) string { return "dir-" + op + "-" + size }

func dirScaleMetrics(b *bench) []metric {
	what := map[string]string{
		"create":  "create (open O_CREAT+close)",
		"lookup":  fmt.Sprintf("lookup (stat of up to %d random names, dentries dropped)", dirLookups),
		"readdir": "readdir (getdents of the whole directory, dentries dropped)",
		"delete":  "delete (unlink)",
	}
	var out []metric
	for _, size := range []string{"small", "large"} {
		n := b.cfg.dirSmall
		if size == "large" {
			n = b.cfg.dirLarge
		}
		for _, op := range dirOps {
			out = append(out, metric{ID: dirID(op, size), Name: fmt.Sprintf("dir of %d: %s", n, what[op]),
				Unit: "µs/entry", Class: classDir})
		}
	}
	return out
}

// runDirScale fills a small and a large directory with empty files and
// times, per entry: the creates, stat of random names after the kernel
// dropped its dentries (so that each is a lookup the filesystem answers),
// one readdir of the whole directory (again after a drop), and the unlinks.
func runDirScale(ctx context.Context, b *bench, _ *mounted, dir string) ([]float64, error) {
	var out []float64
	for _, n := range []int{b.cfg.dirSmall, b.cfg.dirLarge} {
		vals, err := dirScale(ctx, b, filepath.Join(dir, fmt.Sprintf("d%d", n)), n)
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
	}
	return out, nil
}

// dirScale runs the four operations on a new directory d of n entries and
// returns µs per entry for each.
func dirScale(ctx context.Context, b *bench, d string, n int) ([]float64, error) {
	if err := os.Mkdir(d, 0o755); err != nil {
		return nil, fmt.Errorf("mkdir: %w", err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = filepath.Join(d, fmt.Sprintf("e%07d", i))
	}
	perEntry := func(start time.Time, count int) float64 {
		return float64(time.Since(start).Microseconds()) / float64(count)
	}
	var out []float64

	start := time.Now()
	for i, name := range names {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
	}
	out = append(out, perEntry(start, n))

	syncAll()
	b.noteDrop(dropDentries() == nil)
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	sample := rng.Perm(n)[:min(n, dirLookups)]
	start = time.Now()
	for i, k := range sample {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if _, err := os.Lstat(names[k]); err != nil {
			return nil, fmt.Errorf("lookup: %w", err)
		}
	}
	out = append(out, perEntry(start, len(sample)))

	b.noteDrop(dropDentries() == nil)
	start = time.Now()
	f, err := os.Open(d)
	if err != nil {
		return nil, fmt.Errorf("readdir: %w", err)
	}
	count := 0
	for {
		batch, err := f.Readdirnames(4096)
		count += len(batch)
		if err == io.EOF || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("readdir: %w", err)
		}
	}
	f.Close()
	if count != n {
		return nil, fmt.Errorf("readdir of %s: %d entries, want %d", d, count, n)
	}
	out = append(out, perEntry(start, n))

	start = time.Now()
	for i, name := range names {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := os.Remove(name); err != nil {
			return nil, fmt.Errorf("delete: %w", err)
		}
	}
	out = append(out, perEntry(start, n))
	if err := os.Remove(d); err != nil {
		return nil, fmt.Errorf("rmdir: %w", err)
	}
	return out, nil
}
