package blobs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shedfs/shedfs/objstore"
)

// ErrRemote is the refusal of what a blob cache of a bucket does not do
// (yet): hard links shared with snapshots and forks.
var ErrRemote = errors.New("not supported on a store whose blobs are in a bucket")

// recover reads the journal at start: each blob it names is queued for
// upload; every other cached blob is dropped (the bucket has it).
func (r *Remote) recover() error {
	var drop []string
	err := filepath.WalkDir(r.d.root, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			if path == filepath.Join(r.d.root, "snapshots") {
				return filepath.SkipDir
			}
			return nil
		}
		name := de.Name()
		if strings.HasSuffix(name, ".dirty") || strings.HasSuffix(name, ".tmp") {
			if _, err := os.Stat(strings.TrimSuffix(strings.TrimSuffix(path, ".tmp"), ".dirty")); errors.Is(err, fs.ErrNotExist) {
				drop = append(drop, path)
			}
			return nil
		}
		ino, perr := strconv.ParseUint(name, 10, 64)
		if perr != nil {
			return nil
		}
		j, ok, err := r.d.readJournal(ino)
		if err != nil || !ok {
			if err != nil {
				r.log.Error("blob cache: unreadable journal, the blob is dropped", "ino", ino, "err", err)
			}
			drop = append(drop, path)
			return nil
		}
		r.adopt(ino, j)
		return nil
	})
	if err != nil {
		return fmt.Errorf("blob cache %s: %w", r.d.root, err)
	}
	for _, p := range drop {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blob cache: %w", err)
		}
	}
	return nil
}

// adopt takes a blob the journal names into the cache, queued for upload.
func (r *Remote) adopt(ino uint64, j journal) {
	chunk := r.opts.ChunkSize
	if j.Base != nil {
		chunk = j.Base.Chunk
	}
	e := newCached(ino, chunk)
	e.base, e.fresh, e.needManifest = j.Base, j.Fresh, j.NeedManifest
	if st, err := os.Stat(r.d.Path(ino)); err == nil {
		e.size = st.Size()
	}
	for _, i := range j.Dirty {
		if i < chunks(e.size, chunk) {
			r.markDirtyLocked(e, i)
		}
	}
	r.files[ino] = e
	r.queued[ino] = true
	r.queue = append(r.queue, ino)
}

// remove forgets ino: its cached file and journal go now, its manifests
// in the background (their chunks are the collector's).
func (r *Remote) remove(ino uint64) error {
	r.mu.Lock()
	if e := r.files[ino]; e != nil {
		e.removed = true
		for i := range e.present {
			r.dropLocked(e, i)
		}
		delete(r.files, ino)
	}
	r.mu.Unlock()
	for _, p := range []string{r.d.Path(ino), r.d.journalPath(ino)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove blob %d: %w", ino, err)
		}
	}
	select {
	case r.gone <- ino:
	default:
		r.dropOlder(r.ctx, ino, ^uint64(0))
	}
	return nil
}

// remover deletes the manifests of removed blobs.
func (r *Remote) remover() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case ino := <-r.gone:
			ctx, cancel := r.foreground()
			r.dropOlder(ctx, ino, ^uint64(0))
			cancel()
		}
	}
}

// move gives the content of from to inode to (the trash keeping a
// version): the cached file and journal are renamed, and to gets a
// manifest naming from's chunks at its next upload, nothing copied. from
// starts fresh and empty, superseding its old manifests at its upload.
func (r *Remote) move(from, to uint64) error {
	e, err := r.entry(from, false, false)
	if err != nil {
		return err
	}
	e.use.Lock()
	defer e.use.Unlock()
	ctx, cancel := r.foreground()
	defer cancel()
	select {
	case e.up <- struct{}{}: // no upload of from's content under its old number now
	case <-ctx.Done():
		return errIO(fmt.Sprintf("move blob %d: waiting for its upload", from), ctx.Err())
	}
	defer func() { <-e.up }()
	if old := r.get(to); old != nil {
		if err := r.remove(to); err != nil {
			return err
		}
	}
	if err := r.d.mkShard(to); err != nil {
		return err
	}
	if err := os.Rename(r.d.Path(from), r.d.Path(to)); err != nil {
		return fmt.Errorf("move blob %d to %d: %w", from, to, err)
	}
	os.Remove(r.d.journalPath(from))
	r.mu.Lock()
	delete(r.files, from)
	e.ino = to
	e.needManifest = e.needManifest || !e.fresh
	r.files[to] = e
	r.mu.Unlock()
	if err := r.writeJournal(e); err != nil {
		return err
	}
	r.enqueue(to)
	fresh, err := r.entry(from, true, true)
	if err != nil {
		return err
	}
	r.mu.Lock()
	fresh.supersedes = true
	r.mu.Unlock()
	return nil
}

// link gives inode to the content of from as it is now (a session's
// close renumbering its files): from is uploaded first, and to gets a
// manifest naming the same chunks; nothing is copied.
func (r *Remote) link(from, to uint64) error {
	e, err := r.entry(from, false, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // never written: nothing to link
	}
	if err != nil {
		return err
	}
	ctx, cancel := r.foreground()
	defer cancel()
	if err := r.upload(ctx, e); err != nil {
		return err
	}
	r.mu.Lock()
	m := *e.base
	r.mu.Unlock()
	t := newCached(to, m.Chunk)
	t.base, t.size, t.needManifest = &m, m.Size, true
	if err := r.d.mkShard(to); err != nil {
		return err
	}
	f, err := os.OpenFile(r.d.Path(to), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("link blob %d to %d: %w", from, to, err)
	}
	err = f.Truncate(m.Size)
	f.Close()
	if err != nil {
		return fmt.Errorf("link blob %d to %d: %w", from, to, err)
	}
	if err := r.writeJournal(t); err != nil {
		return err
	}
	r.mu.Lock()
	r.files[to] = t
	r.mu.Unlock()
	r.enqueue(to)
	return nil
}

// size is the length of ino's content: the cached file's, or the
// bucket's current version's.
func (r *Remote) size(ino uint64) (int64, error) {
	if e := r.get(ino); e != nil {
		st, err := os.Stat(r.d.Path(ino))
		if err != nil {
			return 0, fmt.Errorf("stat blob %d: %w", ino, err)
		}
		return st.Size(), nil
	}
	m, err := r.current(ino)
	if err != nil {
		return 0, err
	}
	if m == nil {
		return 0, fmt.Errorf("stat blob %d: %w", ino, fs.ErrNotExist)
	}
	return m.Size, nil
}

// each calls fn for every blob: those the bucket has a manifest of, and
// those only this cache has yet.
func (r *Remote) each(fn func(ino uint64, size int64) error) error {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	newest := map[uint64]string{}
	err := r.b.List(ctx, manifestPrefix, func(i objstore.Info) error {
		if ino, _, ok := parseManifestKey(i.Key); ok && i.Key > newest[ino] {
			newest[ino] = i.Key
		}
		return nil
	})
	if err != nil {
		return errIO("list blobs", err)
	}
	r.mu.Lock()
	for ino := range r.files {
		newest[ino] = ""
	}
	r.mu.Unlock()
	for ino, key := range newest {
		var size int64
		if key == "" {
			if size, err = r.size(ino); err != nil {
				continue // removed meanwhile
			}
		} else {
			m, err := r.getManifest(ctx, key)
			if err != nil {
				return err
			}
			size = m.Size
		}
		if err := fn(ino, size); err != nil {
			return err
		}
	}
	return nil
}

// Stats is what a Remote reports for metrics and shedfs status.
type Stats struct {
	// PendingUploads and PendingBytes are the blobs with changes the
	// bucket lacks, and the bytes of their dirty chunks.
	PendingUploads int   `json:"pending_uploads"`
	PendingBytes   int64 `json:"pending_bytes"`
	// CacheBytes is the bytes of chunks in the cache, CacheSize its limit.
	CacheBytes int64 `json:"cache_bytes"`
	CacheSize  int64 `json:"cache_size"`
	// Hits and Misses count chunk lookups of reads and writes.
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	// UploadBytes, DownloadBytes and the errors count bucket traffic.
	UploadBytes    int64 `json:"upload_bytes"`
	DownloadBytes  int64 `json:"download_bytes"`
	UploadErrors   int64 `json:"upload_errors"`
	DownloadErrors int64 `json:"download_errors"`
}

// Stats reports the cache's state now.
func (r *Remote) Stats() Stats {
	r.mu.Lock()
	s := Stats{PendingBytes: r.dirty, CacheBytes: r.present, CacheSize: r.opts.CacheSize}
	for _, e := range r.files {
		if (e.fresh && !e.untouched) || e.needManifest || len(e.dirty) > 0 || len(e.inflight) > 0 {
			s.PendingUploads++
		}
	}
	r.mu.Unlock()
	s.Hits, s.Misses = r.stats.hits.Load(), r.stats.misses.Load()
	s.UploadBytes, s.DownloadBytes = r.stats.uploadBytes.Load(), r.stats.downloadBytes.Load()
	s.UploadErrors, s.DownloadErrors = r.stats.uploadErrors.Load(), r.stats.downloadErrors.Load()
	return s
}
