package metadata

import (
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// badgerClock hands out the timestamps of a badger opened in managed mode.
//
// Unmanaged, badger times every transaction through two watermarks, each a
// goroutine fed by a channel: a read transaction sends its start and its
// end to one, a write transaction those two and its commit's start and end
// to the other, and waits on the second for commits in flight. On a busy
// machine each send wakes a goroutine that must get a CPU: an UNLINK, one
// snapshot and one commit, paid six wake-ups beside its commit's own. Here
// the store keeps the clock itself, with a mutex and an atomic:
//
//   - every transaction reads at the newest commit applied in full,
//     published only after its Commit returned, so none sees half of one;
//   - commits run one at a time (cachedKV already runs its write
//     transactions one at a time), each at the next timestamp; badger
//     still finds the conflicts of write transactions that overlapped;
//   - badger may discard a version below the oldest transaction still
//     open (its discard timestamp), as its own read watermark let it, which
//     also bounds the commits it keeps for finding conflicts.
type badgerClock struct {
	db *badger.DB

	// write serializes commits and guards next.
	write sync.Mutex
	next  uint64 // the last timestamp a commit was given

	// done is the newest timestamp whose commit is applied in full.
	done atomic.Uint64

	mu      sync.Mutex
	readers map[uint64]int // read timestamps of open read transactions, and how many at each
}

// newBadgerClock starts the clock after every version db holds.
func newBadgerClock(db *badger.DB) *badgerClock {
	c := &badgerClock{db: db, readers: make(map[uint64]int)}
	c.next = db.MaxVersion()
	c.done.Store(c.next)
	if !db.Opts().ReadOnly {
		db.SetDiscardTs(c.next)
	}
	return c
}

// beginRead returns the timestamp a new transaction reads at, and holds
// badger's discard timestamp at or below it until endRead.
func (c *badgerClock) beginRead() uint64 {
	c.mu.Lock()
	ts := c.done.Load()
	c.readers[ts]++
	c.mu.Unlock()
	return ts
}

// endRead ends a transaction begun at ts.
func (c *badgerClock) endRead(ts uint64) {
	c.mu.Lock()
	if c.readers[ts] <= 1 {
		delete(c.readers, ts)
	} else {
		c.readers[ts]--
	}
	c.mu.Unlock()
}

// commitTs is the timestamp of the next commit; call with write held.
func (c *badgerClock) commitTs() uint64 {
	c.next++
	return c.next
}

// applied publishes the commit at ts to new reads and lets badger discard
// what no open read can see any more; call with write held, after the
// commit returned.
func (c *badgerClock) applied(ts uint64) {
	c.done.Store(ts)
	c.mu.Lock()
	floor := ts
	for r := range c.readers {
		floor = min(floor, r)
	}
	c.mu.Unlock()
	if !c.db.Opts().ReadOnly {
		c.db.SetDiscardTs(floor)
	}
}
