package blobs

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/objstore"
)

// Remote makes a Dir the cache of a bucket: the bucket holds every
// blob's content (manifest.go), the directory what this host wrote and
// has not uploaded yet (dirty chunks, never evicted) and what it read
// lately (clean chunks, evicted least recently used first to stay under
// the cache size). A cached blob is a sparse local file of the blob's
// size, so the core reads and writes it through an *os.File as it does a
// local blob; what it has not fetched yet is a hole that Fill fetches
// before a read and Changing before a write.
//
// The dirty cache is the journal: beside each blob with changes not in
// the bucket lies <blob>.dirty, written before the change, naming the
// version it started from and the chunks changed since. A restart
// uploads them; a cached blob without one is only a copy of the bucket,
// dropped at start.
type Remote struct {
	b    objstore.Bucket
	d    *Dir
	opts RemoteOptions
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	files   map[uint64]*cached
	loading map[uint64]chan struct{}
	// lru holds the clean chunks present in the cache (*chunkRef), the
	// most recently used in front.
	lru *list.List
	// present and dirty are the bytes of chunks in the cache, and of
	// those the ones not in the bucket yet.
	present, dirty int64
	// queue is the blobs waiting for an upload, in order; queued says
	// which are in it.
	queue  []uint64
	queued map[uint64]bool
	wake   chan struct{}
	gone   chan uint64

	stats remoteStats
}

// RemoteOptions tune a Remote.
type RemoteOptions struct {
	// CacheSize is the bytes of chunks the cache keeps; dirty chunks are
	// never evicted, and writes wait while they alone fill it.
	CacheSize int64
	// Timeout bounds how long a read waits for the bucket, and a write
	// for room in a cache full of dirty chunks, before failing with EIO.
	Timeout time.Duration
	// ChunkSize is the size new content is cut into (8 MiB if 0).
	ChunkSize int64
	// Uploaders is how many blobs upload at once (2 if 0).
	Uploaders int
	// Shared says other hosts serve the same store (metadata on etcd):
	// the last close uploads before it returns, and a first open on
	// this host takes the bucket's newest version (close-to-open).
	Shared bool
	// Grace is how long replaced chunks stay in the bucket before the
	// collector deletes them (DefaultGrace if 0; Private: no collector).
	Grace time.Duration
	// Private says the directory is this Remote's alone (a read-only
	// open beside a serving daemon): it has no journal to take over,
	// and Close removes it.
	Private bool
	Logger  *slog.Logger
}

// DefaultChunkSize is the chunk size of a Remote whose options give none.
const DefaultChunkSize = 8 << 20

// cached is the state of one blob in the cache. Its fields are guarded by
// Remote.mu, except use and up.
type cached struct {
	ino uint64
	// use is held shared while a range is read or written through the
	// local file, alone to resize or move it.
	use sync.RWMutex
	// up is the token of the one upload of the blob at a time.
	up chan struct{}
	// jmu orders the journal's writes.
	jmu sync.Mutex

	base  *manifest // what the chunks not dirty hold; nil when fresh
	chunk int64
	size  int64
	// present are the chunks in the local file: their LRU element when
	// clean, nil when dirty or uploading.
	present  map[int64]*list.Element
	dirty    map[int64]bool
	inflight map[int64]bool
	filling  map[int64]chan struct{}
	pins     map[int64]int
	// bytes is what each present chunk counts for in Remote.present
	// (and dirty): its length, short for a file's last chunk.
	bytes map[int64]int64
	// fresh: the blob has no version in the bucket; every chunk of the
	// local file is its content, and none is evicted before an upload.
	fresh bool
	// needManifest: base is the content, but no manifest of this inode
	// names it yet (moved or linked from another inode).
	needManifest bool
	removed      bool
	// untouched: a fresh blob made because the bucket had none of an
	// existing inode, not written here since.
	untouched bool
	// supersedes: the bucket may hold manifests of this inode older
	// than base (a fresh blob that replaced moved content), for the
	// upload to delete.
	supersedes bool
	// next is the chunk a sequential reader reads next, for read-ahead.
	next int64
}

type chunkRef struct {
	f *cached
	i int64
}

// remoteStats are the counters Stats reports.
type remoteStats struct {
	uploadBytes, downloadBytes, uploadErrors, downloadErrors, hits, misses atomic.Int64
}

// OpenRemote makes d the cache of bucket b: the blobs the journal names
// are queued for upload, every other cached blob is dropped, and the
// uploaders start. Close stops them.
func OpenRemote(d *Dir, b objstore.Bucket, opts RemoteOptions) (*Remote, error) {
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.Uploaders <= 0 {
		opts.Uploaders = 2
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Remote{
		b: b, d: d, opts: opts, log: opts.Logger,
		files: map[uint64]*cached{}, loading: map[uint64]chan struct{}{},
		lru: list.New(), queued: map[uint64]bool{},
		wake: make(chan struct{}, 1), gone: make(chan uint64, 4096),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if !opts.Private {
		if err := r.recover(); err != nil {
			return nil, err
		}
	}
	for range opts.Uploaders {
		r.wg.Go(r.uploader)
	}
	r.wg.Go(r.remover)
	if !opts.Private {
		if opts.Grace <= 0 {
			opts.Grace = DefaultGrace
		}
		r.wg.Go(func() { r.collector(opts.Grace) })
	}
	d.remote = r
	return r, nil
}

// Close stops the uploaders; what they did not upload stays in the
// journal for the next start.
func (r *Remote) Close() {
	r.cancel()
	r.wg.Wait()
	if r.opts.Private {
		os.RemoveAll(r.d.root)
	}
}

func newCached(ino uint64, chunk int64) *cached {
	return &cached{
		ino: ino, chunk: chunk, up: make(chan struct{}, 1),
		present: map[int64]*list.Element{}, dirty: map[int64]bool{},
		filling: map[int64]chan struct{}{}, pins: map[int64]int{}, bytes: map[int64]int64{},
	}
}

// errIO marks a failure of the bucket as EIO for the doors.
func errIO(op string, err error) error {
	return fmt.Errorf("%s: %w (%w)", op, syscall.EIO, err)
}

// try runs fn until it succeeds, the object is missing, or ctx ends,
// waiting longer after each failure.
func (r *Remote) try(ctx context.Context, errs *atomic.Int64, fn func(ctx context.Context) error) error {
	delay := 50 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || errors.Is(err, objstore.ErrNotFound) {
			return err
		}
		errs.Add(1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// foreground is the context of an operation a caller waits for.
func (r *Remote) foreground() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ctx, r.opts.Timeout)
}

// entry returns the cache state of ino, loading it from the bucket when
// this host has none: fresh says the inode was just made (nothing to
// look up), create that a blob the bucket lacks starts empty.
func (r *Remote) entry(ino uint64, create, fresh bool) (*cached, error) {
	r.mu.Lock()
	for {
		if e := r.files[ino]; e != nil {
			r.mu.Unlock()
			return e, nil
		}
		ch := r.loading[ino]
		if ch == nil {
			break
		}
		r.mu.Unlock()
		<-ch
		r.mu.Lock()
	}
	ch := make(chan struct{})
	r.loading[ino] = ch
	r.mu.Unlock()
	e, err := r.load(ino, create, fresh)
	r.mu.Lock()
	delete(r.loading, ino)
	close(ch)
	if err == nil {
		r.files[ino] = e
	}
	r.mu.Unlock()
	return e, err
}

// load makes the cache state of ino: an empty fresh blob, or a sparse
// local file of the size of the bucket's current version.
func (r *Remote) load(ino uint64, create, fresh bool) (*cached, error) {
	var m *manifest
	if !fresh {
		var err error
		if m, err = r.current(ino); err != nil {
			return nil, err
		}
		if m == nil && !create {
			return nil, fmt.Errorf("open blob %d: %w", ino, fs.ErrNotExist)
		}
	}
	e := newCached(ino, r.opts.ChunkSize)
	switch {
	case m == nil && !fresh:
		// An inode the bucket has no content of: empty until written,
		// and nothing to upload before (another host may upload it).
		e.fresh, e.untouched = true, true
	case m == nil:
		e.fresh = true
		if err := r.writeJournal(e); err != nil {
			return nil, err
		}
	default:
		e.base, e.chunk, e.size = m, m.Chunk, m.Size
	}
	if err := r.d.mkShard(ino); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(r.d.Path(ino), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache blob %d: %w", ino, err)
	}
	defer f.Close()
	if err := f.Truncate(e.size); err != nil {
		return nil, fmt.Errorf("cache blob %d: %w", ino, err)
	}
	return e, nil
}

// current returns the newest manifest of ino in the bucket, nil if it
// has none.
func (r *Remote) current(ino uint64) (*manifest, error) {
	ctx, cancel := r.foreground()
	defer cancel()
	var key string
	err := r.try(ctx, &r.stats.downloadErrors, func(ctx context.Context) error {
		key = ""
		return r.b.List(ctx, manifestDir(ino), func(i objstore.Info) error {
			if _, _, ok := parseManifestKey(i.Key); ok && i.Key > key {
				key = i.Key
			}
			return nil
		})
	})
	if err != nil {
		return nil, errIO(fmt.Sprintf("list versions of blob %d", ino), err)
	}
	if key == "" {
		return nil, nil
	}
	return r.getManifest(ctx, key)
}

// getManifest reads the manifest at key.
func (r *Remote) getManifest(ctx context.Context, key string) (*manifest, error) {
	var body []byte
	err := r.try(ctx, &r.stats.downloadErrors, func(ctx context.Context) error {
		rc, err := r.b.Get(ctx, key, 0, -1)
		if err != nil {
			return err
		}
		defer rc.Close()
		body, err = readAllLimited(rc, 64<<20)
		return err
	})
	if err != nil {
		return nil, errIO("read manifest "+key, err)
	}
	return decodeManifest(body)
}

// get returns the cache state of ino if this host has one.
func (r *Remote) get(ino uint64) *cached {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.files[ino]
}

// chunkLen is the length of chunk i of a blob of e.size bytes.
func (e *cached) chunkLen(i int64) int64 {
	return max(0, min(e.chunk, e.size-i*e.chunk))
}

// opening makes ino's blob ready for its first open on this host; on a
// Shared store a cached copy older than the bucket's newest version,
// with nothing of this host's waiting for upload, is dropped first.
func (r *Remote) opening(ino uint64, create bool) error {
	if e := r.get(ino); e != nil && r.opts.Shared {
		r.mu.Lock()
		clean := !e.fresh && !e.needManifest && len(e.dirty) == 0 && len(e.inflight) == 0 && e.base != nil
		var have uint64
		if clean {
			have = e.base.Ver
		}
		clean = clean || (e.untouched && len(e.dirty) == 0)
		r.mu.Unlock()
		if clean {
			m, err := r.current(ino)
			if err != nil {
				return err
			}
			if m != nil && m.Ver != have {
				r.forget(e)
			}
		}
	}
	_, err := r.entry(ino, create, false)
	return err
}

// forget drops the clean cached copy e, so that the next use loads the
// bucket's version afresh.
func (r *Remote) forget(e *cached) {
	e.use.Lock()
	defer e.use.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files[e.ino] != e || len(e.dirty) > 0 || len(e.inflight) > 0 {
		return
	}
	for i := range e.present {
		r.dropLocked(e, i)
	}
	e.removed = true // readers still holding it fail rather than mix
	delete(r.files, e.ino)
}
