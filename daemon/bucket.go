package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

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

// bucketFile, in an embedded store's directory, holds the URL of the
// bucket its contents were migrated to (shedfs migrate --blobs-to): from
// then on the blob directory is only a cache, which an open without that
// bucket would serve as the contents, stale.
const bucketFile = "bucket"

// RecordBucket writes down that the contents of the embedded store in
// dir are in the bucket at url now.
func RecordBucket(dir, url string) error {
	p := filepath.Join(dir, bucketFile)
	if err := os.WriteFile(p+".tmp", []byte(url+"\n"), 0o600); err != nil {
		return fmt.Errorf("record bucket: %w", err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return fmt.Errorf("record bucket: %w", err)
	}
	return nil
}

// RecordedBucket returns the bucket the embedded store in dir was
// migrated to, "" if none.
func RecordedBucket(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, bucketFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store %s: %w", dir, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// checkBucket refuses to open the embedded store in dir with contents
// elsewhere than where they are: without the bucket they were migrated
// to (or created in), with another bucket, or with a bucket when they
// are in the store's own blob directory (a bucket's cache drops every
// blob it has no journal of). fresh says the store is being created with
// loc: a bucket is recorded then.
func checkBucket(loc Location, fresh bool) error {
	rec, err := RecordedBucket(loc.Dir)
	switch {
	case err != nil:
		return err
	case rec == "" && loc.Bucket == "":
		return nil
	case rec == "" && fresh:
		return RecordBucket(loc.Dir, loc.Bucket)
	case rec == "":
		return fmt.Errorf("store %s keeps its file contents in %s, not in a bucket: move them with shedfs migrate --from %s --blobs-to '%s'",
			loc.Dir, filepath.Join(loc.Dir, "blobs"), loc.Dir, loc.Bucket)
	case loc.Bucket == "":
		return fmt.Errorf("store %s keeps its file contents in %s: give --blobs '%s'", loc.Dir, rec, rec)
	}
	a, errA := objstore.ParseURL(rec)
	b, errB := objstore.ParseURL(loc.Bucket)
	if err := errors.Join(errA, errB); err != nil {
		return fmt.Errorf("store %s: %w", loc.Dir, err)
	}
	if a.Bucket != b.Bucket || a.Prefix != b.Prefix || a.Endpoint != b.Endpoint {
		return fmt.Errorf("store %s keeps its file contents in %s, not %s", loc.Dir, rec, loc.Bucket)
	}
	return nil
}
