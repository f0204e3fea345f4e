package fusefs

import (
	"slices"
	"sync"
	"time"

	"github.com/shedfs/shedfs/metadata"
)

// The last RELEASE of a written file persists what its FLUSH held
// (hold.go). Nobody waits for a RELEASE (close(2) returned at the FLUSH),
// but its commit ran beside the writer's next CREATE, which waited for it
// on the store's write lock, and a commit costs about the same for one
// record as for several. So a release queues its file, and a goroutine
// persists the files queued in the releaseLinger after the first in one
// commit per holder (docs/design.md section 8, "One worker's create
// chain"). Until then the file stays in the open table: every view reads
// its size through FS.overlay, an unlink, rename or digest read settles it
// first, an fsync persists it, a new open shares its descriptor, and its
// pending bytes stay admitted in the accountant, so quotas stay exact. A
// kill -9 before the commit leaves what one between close and release
// did: a blob longer than its record, which recovery repairs. A store
// other daemons share persists at the FLUSH and queues nothing.

// releaseLinger is how long the first queued release waits for others.
// A one-worker chain of small files releases one every few hundred µs.
const releaseLinger = 2 * time.Millisecond

// releaseQueue holds the files released dirty, not yet persisted.
type releaseQueue struct {
	mu     sync.Mutex
	queue  []*openInode
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

// startReleases starts the goroutine that persists queued releases.
func (f *FS) startReleases() {
	f.releases.wake = make(chan struct{}, 1)
	f.releases.done = make(chan struct{})
	go f.releaseLoop()
}

// stopReleases persists and closes what is queued and ends the goroutine;
// later releases persist at once.
func (f *FS) stopReleases() {
	r := &f.releases
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	<-r.done
}

// deferRelease queues oi, whose last handle went, for the next batch;
// false when it must be persisted now (nothing to persist, a shared
// store, shutting down).
func (f *FS) deferRelease(oi *openInode) bool {
	if f.store.Shared() {
		return false
	}
	oi.mu.Lock()
	dirty := oi.dirty
	oi.mu.Unlock()
	if !dirty {
		return false
	}
	r := &f.releases
	r.mu.Lock()
	if r.closed || r.wake == nil {
		r.mu.Unlock()
		return false
	}
	r.queue = append(r.queue, oi)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

// releaseLoop persists the queue a linger after it was woken, then ends
// the open state of each file no handle took again meanwhile.
func (f *FS) releaseLoop() {
	r := &f.releases
	defer close(r.done)
	for {
		<-r.wake
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if !closed {
			time.Sleep(releaseLinger)
		}
		r.mu.Lock()
		batch := r.queue
		r.queue = nil
		closed = r.closed
		r.mu.Unlock()
		for _, oi := range f.persistReleased(batch) {
			f.closeIfUnused(oi)
		}
		if closed {
			return // deferRelease queues nothing any more
		}
	}
}

// persistReleased persists the files of batch, one commit per holder, and
// returns them once each (batch is sorted in place). A file whose lock is
// taken (a request on it under way) or whose batch failed is persisted on
// its own, as a release did before.
func (f *FS) persistReleased(batch []*openInode) []*openInode {
	slices.SortFunc(batch, func(a, b *openInode) int {
		switch {
		case a.holder < b.holder:
			return -1
		case a.holder > b.holder:
			return 1
		case a.ino < b.ino:
			return -1
		case a.ino > b.ino:
			return 1
		}
		return 0
	})
	batch = slices.Compact(batch) // released twice while queued
	var alone []*openInode
	for rest := batch; len(rest) > 0; {
		n := 1
		for n < len(rest) && rest[n].holder == rest[0].holder {
			n++
		}
		alone = append(alone, f.persistHolderBatch(rest[:n])...)
		rest = rest[n:]
	}
	for _, oi := range alone {
		oi.mu.Lock()
		f.persistLocked(oi)
		oi.mu.Unlock()
	}
	return batch
}

// persistHolderBatch persists the files of one holder in one commit,
// under each file's lock and the holder's admission lock, as
// persistLocked does for one. It returns the files left to persist alone.
func (f *FS) persistHolderBatch(files []*openInode) (alone []*openInode) {
	var held []*openInode
	for _, oi := range files {
		if !oi.mu.TryLock() {
			alone = append(alone, oi) // never wait on one lock holding others
			continue
		}
		if !oi.dirty {
			oi.mu.Unlock()
			continue
		}
		held = append(held, oi)
	}
	if len(held) == 0 {
		return alone
	}
	defer func() {
		for _, oi := range held {
			oi.mu.Unlock()
		}
	}()
	if len(held) == 1 {
		f.persistLocked(held[0])
		return alone
	}
	unlock := f.acct.Lock(held[0].holder)
	defer unlock()
	us := make([]metadata.WrittenUpdate, len(held))
	sizes := make([]uint64, len(held))
	for i, oi := range held {
		sizes[i], us[i].Fn = persistedFieldsLocked(oi)
		us[i].Ino, us[i].Writer = oi.ino, oi.writer
		if c, ok := f.knownLocked(oi); ok {
			us[i].Known = &c
		}
	}
	if err := f.store.UpdateWrittenBatch(us); err != nil {
		f.log.Debug("persist released files together", "files", len(held), "err", err)
		return append(alone, held...)
	}
	for i, oi := range held {
		oi.known = us[i].Known
		f.persistedLocked(oi, sizes[i])
	}
	return alone
}
