package blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/shedfs/shedfs/objstore"
)

// upload puts what e holds that the bucket lacks into the bucket: the
// dirty chunks (every chunk of a fresh blob) as new objects, then a
// manifest of the new version naming them and the base's other chunks;
// the manifests before it are deleted then (their chunks are the
// collector's). A failure leaves the base current and the chunks dirty.
func (r *Remote) upload(ctx context.Context, e *cached) error {
	select {
	case e.up <- struct{}{}:
	case <-ctx.Done():
		return errIO(fmt.Sprintf("upload blob %d", e.ino), ctx.Err())
	}
	defer func() { <-e.up }()
	r.mu.Lock()
	if e.removed || (!e.fresh && !e.needManifest && len(e.dirty) == 0) || (e.untouched && !e.needManifest && len(e.dirty) == 0) {
		r.mu.Unlock()
		return nil
	}
	take := e.dirty
	e.inflight, e.dirty = take, map[int64]bool{}
	base, fresh, chunk, ino := e.base, e.fresh, e.chunk, e.ino
	older := base != nil || e.supersedes
	r.mu.Unlock()
	m, err := r.uploadChunks(ctx, ino, base, fresh, chunk, take)
	if err == nil {
		err = r.put(ctx, manifestKey(ino, m.Ver), encodeManifest(m))
	}
	if err != nil {
		r.mu.Lock()
		for i := range take {
			e.dirty[i] = true
		}
		e.inflight = nil
		r.mu.Unlock()
		return errIO(fmt.Sprintf("upload blob %d", ino), err)
	}
	removed := r.uploaded(e, m, take, fresh)
	if removed {
		r.deleteQuietly(manifestKey(ino, m.Ver))
		return nil
	}
	if err := r.writeJournal(e); err != nil {
		r.log.Error("blob cache: journal", "ino", ino, "err", err)
	}
	if older {
		r.dropOlder(ctx, ino, m.Ver)
	}
	return nil
}

// uploadChunks uploads the chunks of ino's local file that changed since
// base and returns the manifest of the new version.
func (r *Remote) uploadChunks(ctx context.Context, ino uint64, base *manifest, fresh bool, chunk int64, take map[int64]bool) (*manifest, error) {
	f, err := os.Open(r.d.Path(ino))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	ver := uint64(time.Now().UnixNano())
	if base != nil && ver <= base.Ver {
		ver = base.Ver + 1
	}
	m := &manifest{Size: size, Chunk: chunk, Ver: ver, Keys: make([]string, chunks(size, chunk))}
	buf := make([]byte, min(chunk, size))
	for i := range int64(len(m.Keys)) {
		if !fresh && !take[i] {
			m.Keys[i] = base.keyOf(i)
			continue
		}
		b := buf[:min(chunk, size-i*chunk)]
		n, err := f.ReadAt(b, i*chunk)
		if err != nil && err != io.EOF {
			return nil, err
		}
		clear(b[n:]) // cut short by a truncate since: the next upload has it
		if allZero(b) {
			continue
		}
		key := chunkKey(ino, ver, i)
		if err := r.put(ctx, key, b); err != nil {
			return nil, err
		}
		r.stats.uploadBytes.Add(int64(len(b)))
		m.Keys[i] = key
	}
	return m, nil
}

// put stores b at key, with its SHA-256 for the bucket to verify.
func (r *Remote) put(ctx context.Context, key string, b []byte) error {
	return r.try(ctx, &r.stats.uploadErrors, func(ctx context.Context) error {
		return putVerified(ctx, r.b, key, b)
	})
}

// putVerified stores p at key in b once, with its SHA-256 for the bucket
// to verify.
func putVerified(ctx context.Context, b objstore.Bucket, key string, p []byte) error {
	sum := sha256.Sum256(p)
	return b.Put(ctx, key, bytes.NewReader(p), int64(len(p)), sum[:])
}

// uploaded makes m e's base: the chunks it took are clean now unless
// written again meanwhile, and a fresh blob's chunks become cached like
// any other. It reports whether the blob was removed meanwhile.
func (r *Remote) uploaded(e *cached, m *manifest, take map[int64]bool, fresh bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.base, e.fresh, e.needManifest, e.supersedes, e.untouched = m, false, false, false, false
	e.inflight = nil
	if e.removed {
		return true
	}
	clean := func(i int64) {
		if el, ok := e.present[i]; ok && el == nil && !e.dirty[i] {
			e.present[i] = r.lru.PushFront(&chunkRef{e, i})
		}
	}
	for i := range take {
		if _, ok := e.present[i]; ok && !e.dirty[i] {
			r.dirty -= e.bytes[i]
		}
		clean(i)
	}
	if fresh {
		for i := range int64(len(m.Keys)) {
			if _, ok := e.present[i]; !ok && i < chunks(e.size, e.chunk) {
				e.present[i] = r.lru.PushFront(&chunkRef{e, i})
				r.countLocked(e, i)
			}
		}
	}
	r.evictLocked()
	return false
}

// dropOlder deletes the manifests of ino before version ver.
func (r *Remote) dropOlder(ctx context.Context, ino, ver uint64) {
	var old []string
	err := r.b.List(ctx, manifestDir(ino), func(i objstore.Info) error {
		if _, v, ok := parseManifestKey(i.Key); ok && v < ver {
			old = append(old, i.Key)
		}
		return nil
	})
	if err != nil {
		r.log.Warn("blob cache: list old versions", "ino", ino, "err", err)
	}
	for _, k := range old {
		r.deleteQuietly(k)
	}
}

// deleteQuietly deletes key, logging a failure: what it leaves is only
// room, which the collector takes back.
func (r *Remote) deleteQuietly(key string) {
	ctx, cancel := r.foreground()
	defer cancel()
	if err := r.b.Delete(ctx, key); err != nil {
		r.log.Warn("blob cache: delete", "key", key, "err", err)
	}
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// enqueue puts ino in the uploaders' queue.
func (r *Remote) enqueue(ino uint64) {
	r.mu.Lock()
	if !r.queued[ino] {
		r.queued[ino] = true
		r.queue = append(r.queue, ino)
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// uploader uploads queued blobs until Close; a failed upload goes back
// in the queue after a pause.
func (r *Remote) uploader() {
	for {
		r.mu.Lock()
		var ino uint64
		ok := len(r.queue) > 0
		if ok {
			ino, r.queue = r.queue[0], r.queue[1:]
			delete(r.queued, ino)
		}
		e := r.files[ino]
		r.mu.Unlock()
		if !ok {
			select {
			case <-r.ctx.Done():
				return
			case <-r.wake:
			}
			continue
		}
		if e == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.Timeout)
		err := r.upload(ctx, e)
		cancel()
		if err != nil {
			r.log.Warn("blob cache: upload failed, will retry", "ino", ino, "err", err)
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(time.Second):
			}
			r.enqueue(ino)
		}
	}
}

// Sync returns once ino's content is durable in the bucket: what the
// cache holds of it is uploaded, waiting at most the timeout (EIO then).
func (r *Remote) Sync(ino uint64) error {
	e := r.get(ino)
	if e == nil {
		return nil
	}
	ctx, cancel := r.foreground()
	defer cancel()
	return r.upload(ctx, e)
}

// Flushed is told that a descriptor of ino was closed: on a Shared store
// what it wrote is uploaded before close(2) returns, so that an open on
// another host reads it (close-to-open); a bucket that cannot take it
// within the timeout leaves it to the background.
func (r *Remote) Flushed(ino uint64) {
	if r.opts.Shared {
		r.Closed(ino)
	}
}

// Closed is told that the last handle of ino closed: what it wrote is
// uploaded in the background, or now when other hosts may open it next
// (Shared; a failure leaves it to the background).
func (r *Remote) Closed(ino uint64) {
	r.mu.Lock()
	e := r.files[ino]
	busy := e != nil && !e.removed && ((e.fresh && !e.untouched) || e.needManifest || len(e.dirty) > 0)
	r.mu.Unlock()
	if !busy {
		return
	}
	if r.opts.Shared {
		if err := r.Sync(ino); err == nil {
			return
		}
	}
	r.enqueue(ino)
}
