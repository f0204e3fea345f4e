package blobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"time"
)

// changing prepares a write of n bytes at off to e: the chunks it changes
// in part are fetched, all of them are marked dirty (in the journal first)
// and pinned. A cache full of dirty chunks makes it wait for the uploads,
// at most the timeout, then fail with EIO. done ends the write.
func (r *Remote) changing(e *cached, off, n int64) (done func(), err error) {
	e.use.RLock()
	if n <= 0 {
		return e.use.RUnlock, nil
	}
	if err := r.waitRoom(e, off, n); err != nil {
		e.use.RUnlock()
		return nil, err
	}
	if err := r.fill(e, off, n, true); err != nil {
		e.use.RUnlock()
		return nil, err
	}
	first, last := off/e.chunk, (off+n-1)/e.chunk
	r.mu.Lock()
	grew := false
	journaled := !e.fresh || e.untouched // a fresh blob's journal says all of it already
	e.size = max(e.size, off+n)
	for i := first; i <= last; i++ {
		grew = r.markDirtyLocked(e, i) || grew
	}
	grew = grew && journaled
	pressure := r.dirty > r.opts.CacheSize/2
	r.mu.Unlock()
	if grew {
		if err := r.writeJournal(e); err != nil {
			r.unpin(e, first, last)
			e.use.RUnlock()
			return nil, err
		}
	}
	if pressure {
		r.enqueue(e.ino)
	}
	return func() {
		r.unpin(e, first, last)
		e.use.RUnlock()
	}, nil
}

// markDirtyLocked marks chunk i of e changed since its base, reporting
// whether it was not before (the journal must say so). r.mu must be
// held.
func (r *Remote) markDirtyLocked(e *cached, i int64) bool {
	if e.dirty[i] {
		r.countLocked(e, i)
		return false
	}
	if el := e.present[i]; el != nil {
		r.lru.Remove(el)
	}
	e.present[i] = nil
	if !e.inflight[i] {
		r.dirty += e.bytes[i]
	}
	e.dirty[i] = true
	e.untouched = false
	r.countLocked(e, i)
	return true
}

// countLocked makes the cache's byte counts hold chunk i of e (present)
// at its length now: the bytes of a file's last chunk grow with it.
// r.mu must be held.
func (r *Remote) countLocked(e *cached, i int64) {
	n, old := e.chunkLen(i), e.bytes[i]
	if n == old {
		return
	}
	e.bytes[i] = n
	r.present += n - old
	if e.dirty[i] || e.inflight[i] {
		r.dirty += n - old
	}
}

// dropLocked forgets chunk i of e (cut off by a truncate, or the blob
// removed). r.mu must be held.
func (r *Remote) dropLocked(e *cached, i int64) {
	el, ok := e.present[i]
	if !ok {
		return
	}
	if el != nil {
		r.lru.Remove(el)
	}
	delete(e.present, i)
	r.present -= e.bytes[i]
	if e.dirty[i] || e.inflight[i] {
		r.dirty -= e.bytes[i]
	}
	delete(e.dirty, i)
	delete(e.bytes, i)
}

// waitRoom waits until the dirty chunks leave room for the ones a write
// of n bytes at off makes dirty, pushing every dirty blob to the
// uploaders meanwhile.
func (r *Remote) waitRoom(e *cached, off, n int64) error {
	deadline := time.Now().Add(r.opts.Timeout)
	for kicked := false; ; kicked = true {
		r.mu.Lock()
		var more int64
		for i := off / e.chunk; i <= (off+n-1)/e.chunk; i++ {
			if !e.dirty[i] && !e.inflight[i] {
				more += min(off+n, (i+1)*e.chunk) - max(off, i*e.chunk)
			}
		}
		fits := more == 0 || r.dirty+more <= r.opts.CacheSize
		var all []uint64
		if !fits && !kicked {
			all = slices.Collect(maps.Keys(r.files))
		}
		r.mu.Unlock()
		if fits {
			return nil
		}
		for _, ino := range all {
			r.enqueue(ino)
		}
		if time.Now().After(deadline) {
			return errIO(fmt.Sprintf("write blob %d", e.ino), errors.New("the cache is full of changes the bucket has not taken"))
		}
		select {
		case <-r.ctx.Done():
			return errIO("write", r.ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// resizing prepares a truncate of e to size: the chunk the new end cuts
// is fetched and marked dirty, chunks past it forgotten, and a grown
// tail reads as zeros. The caller truncates the local file, then calls
// done; reads and writes of the blob wait meanwhile.
func (r *Remote) resizing(e *cached, size int64) (done func(), err error) {
	e.use.Lock()
	r.mu.Lock()
	old := e.size
	r.mu.Unlock()
	cut := min(old, size) // the one chunk that keeps only part of itself
	if cut%e.chunk != 0 {
		if err := r.fillChunk(e, cut/e.chunk, false); err != nil {
			e.use.Unlock()
			return nil, err
		}
		r.unpin(e, cut/e.chunk, cut/e.chunk)
	}
	r.mu.Lock()
	keep := chunks(size, e.chunk)
	for i := range e.present {
		if i >= keep {
			r.dropLocked(e, i)
		}
	}
	if e.base != nil && int64(len(e.base.Keys)) > chunks(cut, e.chunk) {
		b := *e.base
		b.Keys = slices.Clone(b.Keys[:chunks(cut, e.chunk)])
		b.Size = min(b.Size, cut)
		e.base = &b
	}
	e.size = size
	if cut%e.chunk != 0 && cut/e.chunk < keep {
		r.markDirtyLocked(e, cut/e.chunk)
	}
	e.needManifest = e.needManifest || !e.fresh
	if e.untouched {
		e.untouched = false
		e.needManifest = true
	}
	r.mu.Unlock()
	if err := r.writeJournal(e); err != nil {
		e.use.Unlock()
		return nil, err
	}
	return e.use.Unlock, nil
}

// journal is the content of a blob's .dirty file.
type journal struct {
	Base         *manifest `json:"base,omitempty"`
	Dirty        []int64   `json:"dirty,omitempty"`
	Fresh        bool      `json:"fresh,omitempty"`
	NeedManifest bool      `json:"need_manifest,omitempty"`
	Size         int64     `json:"size"`
}

// journalPath is where the journal of ino lies, beside its blob; Each
// skips it, its name being no number.
func (d *Dir) journalPath(ino uint64) string { return d.Path(ino) + ".dirty" }

// writeJournal records what e holds that the bucket lacks, or removes
// the record when it lacks nothing.
func (r *Remote) writeJournal(e *cached) error {
	e.jmu.Lock()
	defer e.jmu.Unlock()
	r.mu.Lock()
	j := journal{Base: e.base, Fresh: e.fresh, NeedManifest: e.needManifest, Size: e.size}
	for i := range e.dirty {
		j.Dirty = append(j.Dirty, i)
	}
	for i := range e.inflight {
		if !e.dirty[i] {
			j.Dirty = append(j.Dirty, i)
		}
	}
	ino, removed := e.ino, e.removed
	r.mu.Unlock()
	if removed {
		return nil
	}
	path := r.d.journalPath(ino)
	if !j.Fresh && !j.NeedManifest && len(j.Dirty) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blob %d journal: %w", ino, err)
		}
		return nil
	}
	if err := r.d.mkShard(ino); err != nil {
		return err
	}
	b, _ := json.Marshal(j) // plain fields cannot fail
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("blob %d journal: %w", ino, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("blob %d journal: %w", ino, err)
	}
	return nil
}

// readJournal reads the journal of ino; ok is false when it has none.
func (d *Dir) readJournal(ino uint64) (j journal, ok bool, err error) {
	b, err := os.ReadFile(d.journalPath(ino))
	if errors.Is(err, fs.ErrNotExist) {
		return j, false, nil
	}
	if err != nil {
		return j, false, fmt.Errorf("blob %d journal: %w", ino, err)
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return j, false, fmt.Errorf("blob %d journal: %w", ino, err)
	}
	return j, true, nil
}
