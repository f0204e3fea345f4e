package blobs

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// fill makes the chunks of e over [off, off+n) present in the local file
// and pins them against eviction until unpin. Chunks the range covers
// whole are only pinned when covered is set (a write replaces them). A
// chunk is fetched once, however many readers wait for it; one a
// sequential reader will want next is fetched ahead in the background.
func (r *Remote) fill(e *cached, off, n int64, covered bool) error {
	if n <= 0 {
		return nil
	}
	first, last := off/e.chunk, (off+n-1)/e.chunk
	for i := first; i <= last; i++ {
		whole := covered && i*e.chunk >= off && (i+1)*e.chunk <= off+n
		if err := r.fillChunk(e, i, whole); err != nil {
			r.unpin(e, first, i-1)
			return err
		}
	}
	r.mu.Lock()
	sequential := first == e.next || first == e.next-1
	e.next = last + 1
	ahead := sequential && !e.fresh && e.base != nil && last+1 < int64(len(e.base.Keys))
	r.evictLocked()
	r.mu.Unlock()
	if ahead {
		r.readAhead(e, last+1)
	}
	return nil
}

// fillChunk makes chunk i of e present (unless whole) and pins it.
func (r *Remote) fillChunk(e *cached, i int64, whole bool) error {
	r.mu.Lock()
	for {
		if e.removed {
			r.mu.Unlock()
			return fmt.Errorf("blob %d: removed", e.ino)
		}
		if el, ok := e.present[i]; ok || e.fresh || whole || i*e.chunk >= e.size {
			if el != nil {
				r.lru.MoveToFront(el)
			}
			if !e.fresh && ok {
				r.stats.hits.Add(1)
			}
			e.pins[i]++
			r.mu.Unlock()
			return nil
		}
		ch := e.filling[i]
		if ch == nil {
			break
		}
		r.mu.Unlock()
		<-ch
		r.mu.Lock()
	}
	ch := make(chan struct{})
	e.filling[i] = ch
	key, n := e.base.keyOf(i), e.chunkLen(i)
	r.stats.misses.Add(1)
	r.mu.Unlock()
	err := r.fetch(e.ino, key, i*e.chunk, n)
	r.mu.Lock()
	delete(e.filling, i)
	close(ch)
	if err == nil && !e.removed {
		if _, ok := e.present[i]; !ok {
			e.present[i] = r.lru.PushFront(&chunkRef{e, i})
			r.countLocked(e, i)
		}
		e.pins[i]++
	}
	r.mu.Unlock()
	return err
}

// fetch copies up to n bytes of object key into ino's local file at off;
// key "" is a chunk of zeros, which the sparse file holds already.
func (r *Remote) fetch(ino uint64, key string, off, n int64) error {
	if key == "" || n == 0 {
		return nil
	}
	ctx, cancel := r.foreground()
	defer cancel()
	err := r.try(ctx, &r.stats.downloadErrors, func(ctx context.Context) error {
		f, err := os.OpenFile(r.d.Path(ino), os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		rc, err := r.b.Get(ctx, key, 0, n)
		if err != nil {
			return err
		}
		defer rc.Close()
		got, err := io.Copy(io.NewOffsetWriter(f, off), io.LimitReader(rc, n))
		r.stats.downloadBytes.Add(got)
		if err == nil && got != n {
			err = fmt.Errorf("chunk %s: %d bytes, want %d", key, got, n)
		}
		return err
	})
	if err != nil {
		return errIO(fmt.Sprintf("fetch blob %d", ino), err)
	}
	return nil
}

// readAhead fetches chunk i of e in the background, once.
func (r *Remote) readAhead(e *cached, i int64) {
	r.mu.Lock()
	_, busy := e.filling[i]
	_, ok := e.present[i]
	r.mu.Unlock()
	if busy || ok {
		return
	}
	r.wg.Go(func() {
		e.use.RLock()
		defer e.use.RUnlock()
		if r.fillChunk(e, i, false) == nil {
			r.unpin(e, i, i)
		}
	})
}

// unpin releases the pins fill took on chunks first..last.
func (r *Remote) unpin(e *cached, first, last int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := first; i <= last; i++ {
		if e.pins[i]--; e.pins[i] <= 0 {
			delete(e.pins, i)
		}
	}
}

// evictLocked drops clean chunks, least recently used first, until the
// cache is under its size: their range of the local file becomes a hole
// again. Pinned chunks stay. r.mu must be held.
func (r *Remote) evictLocked() {
	for el := r.lru.Back(); el != nil && r.present > r.opts.CacheSize; {
		prev := el.Prev()
		ref := el.Value.(*chunkRef)
		e, i := ref.f, ref.i
		if e.pins[i] == 0 {
			if err := punch(r.d.Path(e.ino), i*e.chunk, e.chunk); err != nil {
				r.log.Warn("blob cache: evict", "ino", e.ino, "err", err)
			} else {
				r.lru.Remove(el)
				delete(e.present, i)
				r.present -= e.bytes[i]
				delete(e.bytes, i)
			}
		}
		el = prev
	}
}

// punch makes [off, off+n) of the file at path a hole.
func punch(path string, off, n int64) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// readAllLimited reads r to its end, refusing more than limit bytes.
func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("more than %d bytes", limit)
	}
	return b, err
}
