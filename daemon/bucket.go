package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/objstore"
)

// openBucket makes the blob directory bl the cache of the store's bucket,
// when its contents are in one (Location.Bucket). A read-only open
// caches in a directory of its own, removed at Close, so that it never
// touches the cache of a daemon that serves the store.
func openBucket(loc Location, bl *blobs.Dir, readOnly bool, log *slog.Logger) (*blobs.Dir, *objstore.Metrics, error) {
	if loc.Bucket == "" {
		return bl, nil, nil
	}
	timeout := loc.Cache.Timeout
	if timeout <= 0 {
		timeout = DefaultBlobTimeout
	}
	size := loc.Cache.Size
	if size <= 0 {
		size = DefaultCacheSize
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m := objstore.NewMetrics()
	b, err := objstore.Open(ctx, loc.Bucket, objstore.Options{Metrics: m})
	if err != nil {
		return nil, nil, fmt.Errorf("blobs %s: %w", loc.Bucket, err)
	}
	if readOnly {
		tmp, err := os.MkdirTemp("", "shedfs-cache-")
		if err != nil {
			return nil, nil, fmt.Errorf("blob cache: %w", err)
		}
		if bl, err = blobs.OpenDir(tmp); err != nil {
			return nil, nil, err
		}
	}
	if _, err := blobs.OpenRemote(bl, b, blobs.RemoteOptions{CacheSize: size, Timeout: timeout, Logger: log, Private: readOnly, Shared: loc.Meta != ""}); err != nil {
		return nil, nil, fmt.Errorf("blobs %s: %w", loc.Bucket, err)
	}
	return bl, m, nil
}

// registerBucketMetrics exports the state of the bucket's cache, and the
// bucket's traffic (m).
func registerBucketMetrics(reg prometheus.Registerer, r *blobs.Remote, m *objstore.Metrics) error {
	gauge := func(name, help string, f func(blobs.Stats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(r.Stats())) })
	}
	counter := func(name, help string, f func(blobs.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(r.Stats())) })
	}
	cs := []prometheus.Collector{
		gauge("shedfs_blob_uploads_pending", "Files whose changes the bucket does not have yet.", func(s blobs.Stats) int64 { return int64(s.PendingUploads) }),
		gauge("shedfs_blob_uploads_pending_bytes", "Bytes of changed chunks not uploaded yet.", func(s blobs.Stats) int64 { return s.PendingBytes }),
		gauge("shedfs_blob_cache_bytes", "Bytes of chunks in the bucket's local cache.", func(s blobs.Stats) int64 { return s.CacheBytes }),
		counter("shedfs_blob_cache_hits_total", "Chunk lookups the cache answered.", func(s blobs.Stats) int64 { return s.Hits }),
		counter("shedfs_blob_cache_misses_total", "Chunk lookups fetched from the bucket.", func(s blobs.Stats) int64 { return s.Misses }),
	}
	if m != nil {
		cs = append(cs, m)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("bucket metrics: %w", err)
		}
	}
	return nil
}
