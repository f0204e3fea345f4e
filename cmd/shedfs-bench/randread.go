package main

// The randread workload: 4 KiB reads at random offsets of a file whose
// pages are not in the page cache, as a database, a linker or an index
// lookup does. docs/design.md, "Performance", wants them at least as fast as the
// loopback's.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// randBlock is the size of each random read.
const randBlock = 4096

func randReadMetrics(b *bench) []metric {
	return []metric{
		{ID: "randread", Name: fmt.Sprintf("random 4KiB reads of a %s file, cold", humanBytes(b.cfg.randSize)),
			Unit: "reads/s", HigherIsBetter: true, Class: classData, Goal: &goal{Of: "shedfs/loopback", Min: 1.0}},
	}
}

// runRandRead writes a file of cfg.randSize, fsyncs it, drops the page
// cache where permitted, and makes cfg.randOps preads of 4 KiB at random
// 4 KiB-aligned offsets (the same sequence on every target), one at a time,
// checking what each returns.
func runRandRead(ctx context.Context, b *bench, _ *mounted, dir string) ([]float64, error) {
	path := filepath.Join(dir, "rand.bin")
	buf := randomBlock([32]byte{'r', 'a', 'n', 'd'})
	blocks := max(b.cfg.randSize/seqBlock, 1)
	if err := writeBlocks(ctx, path, buf, blocks); err != nil {
		return nil, err
	}
	b.noteDrop(dropCaches())

	pages := blocks * seqBlock / randBlock
	rng := rand.New(rand.NewChaCha8([32]byte{'o', 'f', 'f'}))
	page := make([]byte, randBlock)
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open for read: %w", err)
	}
	defer f.Close()
	for i := range b.cfg.randOps {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		off := rng.Int64N(pages) * randBlock
		n, err := f.ReadAt(page, off)
		if err != nil || n != randBlock {
			return nil, fmt.Errorf("pread at %d: %d bytes, %v", off, n, err)
		}
		if in := off % seqBlock; !bytes.Equal(page, buf[in:in+randBlock]) {
			return nil, fmt.Errorf("pread at %d: contents differ from what was written", off)
		}
	}
	elapsed := time.Since(start)
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return nil, fmt.Errorf("remove: %w", err)
	}
	return []float64{float64(b.cfg.randOps) / elapsed.Seconds()}, nil
}
