package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// A badger commit hands its writes to badger's writer goroutine and waits
// for it, and the next transaction waits again for that commit to be
// marked done; on two shared cores each wait is a goroutine switch or
// several, and a file made by tar cost two such commits (CREATE, the last
// RELEASE) of 150-400 µs each, with the request that made it waiting.
//
// writeBehind is the embedded store's KV in the daemon: an Update commits
// into memory, a pending layer that every later read sees, and returns; a
// flusher goroutine writes what gathered to badger in one transaction a
// few milliseconds later (or at once, past flushEntries), and a Sync
// writes it before it syncs badger's log. Only this process writes the
// store (badger's directory lock), so the layers and the badger snapshot
// under them are the whole truth.
//
// What changes: kill -9 (or a crash) loses the metadata of the last
// flushEvery, where it lost none that had been committed before (badger
// had it in its memory-mapped log). Neither was synced, so a machine's
// crash lost both before, and fsync (Sync) promises what it did. A file
// whose record went with them leaves a blob of no inode, or a blob
// longer than its record, which the check after an unclean stop repairs,
// as it did for files open at a crash.
//
// Reads are snapshots, as badger's: a read transaction sees the layers as
// they were when it began (an append-only log per layer, read up to its
// length then) over one badger read transaction that holds exactly what
// was flushed before them. That transaction is shared by every reader
// until the next flush replaces it, so a read that the cache cannot serve
// opens no badger transaction either.
type writeBehind struct {
	db     *badger.DB
	engine *badgerKV // closed by Close
	log    *slog.Logger

	// umu serializes Updates: one writer, so no conflicts.
	umu sync.Mutex

	// mu guards layers, snap and err; a reader takes its snapshot under
	// it, and a flush swaps the badger snapshot and drops its layer
	// under it in one step.
	mu sync.Mutex
	// layers are the writes not yet flushed, oldest first: at most one
	// being flushed and the active one, which Updates append to.
	layers []*pendingLayer
	snap   *sharedSnapshot
	err    error // a flush that failed: every later Update fails with it

	// flushMu makes flushes one at a time (the flusher's, Sync's, Close's).
	flushMu sync.Mutex
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	closed  atomic.Bool

	flushes atomic.Uint64 // flushes that wrote something, for tests
}

const (
	// flushEvery is how long writes wait in memory before the flusher
	// writes them to badger: what kill -9 can lose, and what a Scan
	// reads past in memory (it merges the pending writes under its
	// prefix). At about 1,000 files a second, 5 ms is one badger commit
	// for five files.
	flushEvery = 5 * time.Millisecond
	// flushEntries writes the active layer at once when it holds this
	// many writes, so that the pending log a Scan reads stays short.
	flushEntries = 2048
	// maxPending is where an Update waits for the flushes: while one is
	// under way, the next layer may grow past flushEntries.
	maxPending = 4 * flushEntries
)

// newWriteBehind puts a write-behind layer over an open badger store and
// starts its flusher.
func newWriteBehind(engine *badgerKV, logger *slog.Logger) *writeBehind {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &writeBehind{
		db: engine.db, engine: engine, log: logger,
		layers: []*pendingLayer{newPendingLayer()},
		snap:   newSharedSnapshot(engine.db),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go w.flusher()
	return w
}

// pendingLayer is an append-only log of writes and, per key, its latest
// entry; entries link to the key's previous one, so a reader that took
// the log at length n finds the key's latest entry below n.
type pendingLayer struct {
	mu     sync.Mutex
	ents   []pendingEntry
	latest map[string]int32
	// ends are len(ents) after each Update: a flush writes whole Updates
	// in one badger transaction each time it has to split.
	ends  []int32
	since time.Time // the first write, for the flusher
}

type pendingEntry struct {
	key  string
	val  []byte // nil with del
	del  bool
	prev int32 // the key's previous entry in this layer, -1 for none
}

func newPendingLayer() *pendingLayer {
	return &pendingLayer{latest: map[string]int32{}}
}

// lookup finds key's latest entry below n.
func (l *pendingLayer) lookup(key string, n int32) (pendingEntry, bool) {
	l.mu.Lock()
	i, ok := l.latest[key]
	ents := l.ents
	l.mu.Unlock()
	for ok && i >= n {
		i = ents[i].prev
		ok = i >= 0
	}
	if !ok {
		return pendingEntry{}, false
	}
	return ents[i], true
}

// entries returns the log below n.
func (l *pendingLayer) entries(n int32) []pendingEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ents[:n]
}

// sharedSnapshot is a badger read transaction shared by the readers of one
// flush interval, discarded when the last of them is done.
type sharedSnapshot struct {
	txn  *badger.Txn
	refs atomic.Int32
}

func newSharedSnapshot(db *badger.DB) *sharedSnapshot {
	s := &sharedSnapshot{txn: db.NewTransaction(false)}
	s.refs.Store(1)
	return s
}

func (s *sharedSnapshot) release() {
	if s.refs.Add(-1) == 0 {
		s.txn.Discard()
	}
}

// behindView is a read snapshot: the layers up to their lengths then,
// newest first, over the badger snapshot.
type behindView struct {
	layers []*pendingLayer
	lens   []int32
	snap   *sharedSnapshot
}

// base reads the badger snapshot under the layers.
func (v *behindView) base() *badgerTxn { return &badgerTxn{txn: v.snap.txn} }

// view takes a read snapshot; release gives it back.
func (w *writeBehind) view() *behindView {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := &behindView{snap: w.snap}
	w.snap.refs.Add(1)
	for i := len(w.layers) - 1; i >= 0; i-- {
		l := w.layers[i]
		l.mu.Lock()
		n := int32(len(l.ents))
		l.mu.Unlock()
		v.layers = append(v.layers, l)
		v.lens = append(v.lens, n)
	}
	return v
}

func (v *behindView) release() { v.snap.release() }

// Get returns a copy, as badger's Get does: the pending value is shared
// by every reader.
func (v *behindView) Get(key []byte) ([]byte, error) {
	for i, l := range v.layers {
		if e, ok := l.lookup(string(key), v.lens[i]); ok {
			if e.del {
				return nil, ErrNotFound
			}
			return bytes.Clone(e.val), nil
		}
	}
	return v.base().Get(key)
}

func (v *behindView) Set([]byte, []byte) error { return errReadOnlyTxn }
func (v *behindView) Delete([]byte) error      { return errReadOnlyTxn }

// errReadOnlyTxn is what a write in a View's transaction returns.
var errReadOnlyTxn = errors.New("write in a read-only transaction")

// pendingUnder returns the latest pending write of every key with prefix
// at or after start, in key order.
func (v *behindView) pendingUnder(prefix, start []byte) []pendingEntry {
	var found map[string]pendingEntry
	p, from := string(prefix), string(start)
	// Oldest layer first, so that a newer write replaces an older one.
	for i := len(v.layers) - 1; i >= 0; i-- {
		for _, e := range v.layers[i].entries(v.lens[i]) {
			if !strings.HasPrefix(e.key, p) || e.key < from {
				continue
			}
			if found == nil {
				found = map[string]pendingEntry{}
			}
			found[e.key] = e
		}
	}
	if len(found) == 0 {
		return nil
	}
	out := make([]pendingEntry, 0, len(found))
	for _, e := range found {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b pendingEntry) int { return strings.Compare(a.key, b.key) })
	return out
}

// Scan merges the pending writes under prefix into badger's keys: a
// pending write replaces badger's value of its key, a pending delete
// hides it.
func (v *behindView) Scan(prefix, start []byte, fn func(key, value []byte) error) error {
	if start == nil {
		start = prefix
	}
	pend := v.pendingUnder(prefix, start)
	if len(pend) == 0 {
		return v.base().Scan(prefix, start, fn)
	}
	// emit calls fn for the pending writes before key (all of them
	// with key nil).
	emit := func(key []byte) error {
		for len(pend) > 0 && (key == nil || pend[0].key < string(key)) {
			e := pend[0]
			pend = pend[1:]
			if e.del {
				continue
			}
			if err := fn([]byte(e.key), slices.Clip(e.val)); err != nil {
				return err
			}
		}
		return nil
	}
	stopped := false
	err := v.base().Scan(prefix, start, func(key, value []byte) error {
		if err := emit(key); err != nil {
			stopped = errors.Is(err, errStopScan)
			return err
		}
		if len(pend) > 0 && pend[0].key == string(key) {
			e := pend[0]
			pend = pend[1:]
			if e.del {
				return nil
			}
			value = slices.Clip(e.val)
		}
		err := fn(key, value)
		stopped = errors.Is(err, errStopScan)
		return err
	})
	if err != nil || stopped {
		return err
	}
	if err := emit(nil); err != nil && !errors.Is(err, errStopScan) {
		return err
	}
	return nil
}

// behindWrite is an Update's transaction: its own writes first, then its
// snapshot.
type behindWrite struct {
	*behindView
	db     *badger.DB
	writes []pendingEntry
	own    map[string]int // key -> its latest index in writes
	count  int64
	size   int64
}

func (t *behindWrite) Get(key []byte) ([]byte, error) {
	if i, ok := t.own[string(key)]; ok {
		if t.writes[i].del {
			return nil, ErrNotFound
		}
		return bytes.Clone(t.writes[i].val), nil
	}
	return t.behindView.Get(key)
}

// A badger transaction starts counted as one entry of len("!badger!txn")
// + 10 bytes, its end marker (badger's newTransaction).
const (
	txnBaseCount int64 = 1
	txnBaseSize  int64 = int64(len("!badger!txn")) + 10
)

// entrySize is what badger counts for one write (Txn.checkSize): the
// key and value, their two meta bytes and the version in the key.
func entrySize(keyLen, valueLen int) int64 { return int64(keyLen+valueLen) + 2 + 10 }

// put records a write, refusing what badger would refuse in one
// transaction (ErrTxnTooBig, which callers that can split their work look
// for), counted as badger counts it.
func (t *behindWrite) put(key, value []byte, del bool) error {
	if len(key) == 0 {
		return badger.ErrEmptyKey
	}
	count, size := t.count+1, t.size+entrySize(len(key), len(value))
	if count >= t.db.MaxBatchCount() || size >= t.db.MaxBatchSize() {
		return badger.ErrTxnTooBig
	}
	t.count, t.size = count, size
	e := pendingEntry{key: string(key), del: del, prev: -1}
	if !del {
		e.val = bytes.Clone(value)
		if e.val == nil {
			e.val = []byte{}
		}
	}
	if t.own == nil {
		t.own = map[string]int{}
	}
	t.own[e.key] = len(t.writes)
	t.writes = append(t.writes, e)
	return nil
}

func (t *behindWrite) Set(key, value []byte) error { return t.put(key, value, false) }
func (t *behindWrite) Delete(key []byte) error     { return t.put(key, nil, true) }

// Scan sees the transaction's own writes too.
func (t *behindWrite) Scan(prefix, start []byte, fn func(key, value []byte) error) error {
	if len(t.writes) == 0 {
		return t.behindView.Scan(prefix, start, fn)
	}
	// The own writes as one more, newest, layer of the view.
	own := &pendingLayer{ents: t.writes, latest: map[string]int32{}}
	v := *t.behindView
	v.layers = append([]*pendingLayer{own}, v.layers...)
	v.lens = append([]int32{int32(len(t.writes))}, v.lens...)
	return v.Scan(prefix, start, fn)
}

// Update runs fn on a transaction over the current snapshot and appends
// its writes to the active layer. Updates run one at a time, so none
// conflicts.
func (w *writeBehind) Update(fn func(tx Txn) error) error {
	w.umu.Lock()
	defer w.umu.Unlock()
	if w.closed.Load() {
		return fmt.Errorf("commit: %w", badger.ErrDBClosed)
	}
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("commit: an earlier write of the metadata failed: %w", err)
	}
	v := w.view()
	defer v.release()
	t := &behindWrite{behindView: v, db: w.db, count: txnBaseCount, size: txnBaseSize}
	if err := fn(t); err != nil {
		return err
	}
	if len(t.writes) == 0 {
		return nil
	}
	// Under mu, so that a flush never takes a layer an Update is still
	// appending to.
	w.mu.Lock()
	l := w.layers[len(w.layers)-1]
	l.mu.Lock()
	first := len(l.ents) == 0
	if first {
		l.since = time.Now()
	}
	base := int32(len(l.ents))
	for i, e := range t.writes {
		e.prev = -1
		if p, ok := l.latest[e.key]; ok {
			e.prev = p
		}
		l.ents = append(l.ents, e)
		l.latest[e.key] = base + int32(i)
	}
	l.ends = append(l.ends, int32(len(l.ents)))
	n := len(l.ents)
	l.mu.Unlock()
	w.mu.Unlock()
	if first || n >= flushEntries {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	if n >= maxPending {
		// badger is behind (a flush stalled on its level 0): wait for
		// it, as a commit to badger itself would, and write this
		// layer too, so that memory and the Scans' merge stay bounded.
		// This commit is made either way; a failed flush fails the
		// next Updates.
		if err := w.flush(); err != nil {
			w.log.Error("metadata: writing pending changes to the store failed; further changes are refused", "err", err)
		}
	}
	return nil
}

// View runs fn on a snapshot.
func (w *writeBehind) View(fn func(tx Txn) error) error {
	v := w.view()
	defer v.release()
	return fn(v)
}

// snapshot hands out a snapshot that stays open until discard (cachedKV
// opens one on its first miss).
func (w *writeBehind) snapshot() (Txn, func()) {
	v := w.view()
	return v, v.release
}

// Size forwards badger's on-disk size.
func (w *writeBehind) Size() (lsm, vlog int64) { return w.engine.Size() }

// flusher writes the active layer flushEvery after its first write, or
// at once when it is full, until Close.
func (w *writeBehind) flusher() {
	defer close(w.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
		}
		w.mu.Lock()
		l := w.layers[len(w.layers)-1]
		w.mu.Unlock()
		l.mu.Lock()
		wait := flushEvery - time.Since(l.since)
		if len(l.ents) >= flushEntries || len(l.ents) == 0 {
			wait = 0
		}
		l.mu.Unlock()
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-w.stop:
				timer.Stop()
				return
			case <-timer.C:
			case <-w.kick: // full meanwhile
				timer.Stop()
			}
		}
		if err := w.flush(); err != nil {
			w.log.Error("metadata: writing pending changes to the store failed; further changes are refused", "err", err)
		}
	}
}

// flush writes the active layer to badger: it becomes the layer being
// flushed, a new active layer takes the Updates meanwhile, and once badger
// has it all, one step under mu drops it and puts a badger snapshot that
// holds it under the readers.
func (w *writeBehind) flush() error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	l := w.layers[len(w.layers)-1]
	l.mu.Lock()
	empty := len(l.ents) == 0
	l.mu.Unlock()
	if empty {
		w.mu.Unlock()
		return nil
	}
	w.layers = append(w.layers, newPendingLayer())
	w.mu.Unlock()

	// No Update appends to l any more: it is the older layer now.
	err := w.write(l)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.err = err
		return err
	}
	old := w.snap
	w.snap = newSharedSnapshot(w.db)
	w.layers = slices.DeleteFunc(w.layers, func(x *pendingLayer) bool { return x == l })
	old.release()
	w.flushes.Add(1)
	return nil
}

// write commits the layer's writes, the latest per key, in as few badger
// transactions as badger takes; each holds whole Updates.
func (w *writeBehind) write(l *pendingLayer) error {
	maxCount, maxSize := w.db.MaxBatchCount(), w.db.MaxBatchSize()
	from := int32(0)
	for from < int32(len(l.ents)) {
		// Take whole Updates while they fit (each fit alone).
		to, count, size := from, txnBaseCount, txnBaseSize
		for _, end := range l.ends {
			if end <= to {
				continue
			}
			c, s := count, size
			for _, e := range l.ents[to:end] {
				c++
				s += entrySize(len(e.key), len(e.val))
			}
			if to > from && (c >= maxCount || s >= maxSize) {
				break
			}
			to, count, size = end, c, s
		}
		txn := w.db.NewTransaction(true)
		seen := make(map[string]bool, to-from)
		var err error
		for i := to - 1; i >= from && err == nil; i-- {
			e := l.ents[i]
			if seen[e.key] {
				continue
			}
			seen[e.key] = true
			if e.del {
				err = txn.Delete([]byte(e.key))
			} else {
				err = txn.Set([]byte(e.key), e.val)
			}
		}
		if err == nil {
			err = txn.Commit()
		} else {
			txn.Discard()
		}
		if err != nil {
			return fmt.Errorf("write %d pending changes: %w", to-from, err)
		}
		from = to
	}
	return nil
}

// Sync writes what is pending, then makes badger's log durable.
func (w *writeBehind) Sync() error {
	if err := w.flush(); err != nil {
		return fmt.Errorf("sync metadata: %w", err)
	}
	return w.engine.Sync()
}

// Close stops the flusher, writes what is pending and closes badger.
func (w *writeBehind) Close() error {
	w.umu.Lock()
	first := !w.closed.Swap(true)
	w.umu.Unlock()
	if !first {
		return nil
	}
	close(w.stop)
	<-w.done
	ferr := w.flush()
	w.mu.Lock()
	w.snap.release()
	w.mu.Unlock()
	cerr := w.engine.Close()
	if ferr != nil {
		return fmt.Errorf("close metadata: %w", ferr)
	}
	return cerr
}
