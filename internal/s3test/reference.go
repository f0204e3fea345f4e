package s3test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/shedfs/shedfs/objstore"
)

// patternBlock is the size of the random block Pattern repeats: large
// enough that no compression or deduplication finds it, small enough to
// make in a moment.
const patternBlock = 1 << 20

// Pattern returns size bytes of random-looking data, the same for the
// same seed, made as fast as memory copies (a 1 MiB random block,
// repeated), so that a benchmark measures the transfer, not the source.
func Pattern(seed uint64, size int64) io.Reader {
	block := make([]byte, patternBlock)
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24), byte(seed >> 32), byte(seed >> 40), byte(seed >> 48), byte(seed >> 56)}))
	for i := 0; i < len(block); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			block[i+j] = byte(v >> (8 * j))
		}
	}
	return io.LimitReader(&repeater{block: block}, size)
}

type repeater struct {
	block []byte
	off   int
}

func (r *repeater) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.block[r.off:])
		n += c
		r.off = (r.off + c) % len(r.block)
	}
	return n, nil
}

// PutResult is one timed upload.
type PutResult struct {
	Bytes   int64
	Elapsed time.Duration
}

// MBps is the upload's throughput in MB/s (10^6 bytes a second, as go
// test reports).
func (r PutResult) MBps() float64 {
	return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
}

func (r PutResult) String() string {
	return fmt.Sprintf("%d MiB in %v: %.1f MB/s", r.Bytes>>20, r.Elapsed.Round(time.Millisecond), r.MBps())
}

// ReferencePut is the reference for sequential writes: one Put
// of Pattern(seed, size) under key through objstore (the client library
// the blob cache uses). Only the Put is timed; the SHA-256 it needs is
// computed before, by a first pass over the same bytes. A benchmark of
// a view writes the same Pattern(seed, size) and compares.
func ReferencePut(ctx context.Context, b objstore.Bucket, key string, seed uint64, size int64) (PutResult, error) {
	h := sha256.New()
	if _, err := io.Copy(h, Pattern(seed, size)); err != nil {
		return PutResult{}, err
	}
	sum := h.Sum(nil)
	start := time.Now()
	if err := b.Put(ctx, key, Pattern(seed, size), size, sum); err != nil {
		return PutResult{}, fmt.Errorf("reference put: %w", err)
	}
	return PutResult{Bytes: size, Elapsed: time.Since(start)}, nil
}
