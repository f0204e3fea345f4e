package metadata

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// cacheSlots bounds the metadata cache: inode records, directory entries
// (present or known absent), usage and limits, about 200 bytes each, so
// some 13 MiB whatever the size of the store.
const cacheSlots = 1 << 16

// cachedKV is a KV whose recently used inode records, directory entries,
// usage and limits are held in memory, so that lookup, getattr and quota
// reads of known records open no engine transaction. It works at the KV
// seam, below the schema: the namespace code runs its transactions as
// before and never sees the cache.
//
// It is written through. Read-write transactions run one at a time (wmu),
// so the cache follows the commits in their order: a transaction's reads of
// cached keys come from the cache, it records the keys it sets and deletes,
// hides them from readers just before the commit and puts the new values
// in their slots after it. A read-only transaction is served from the cache while it hits,
// and opens an engine snapshot at its first miss or scan, which is then
// checked against what the cache already gave it (see viewTxn). Invalidate
// drops keys changed by someone else (the change feed of an engine shared
// by several daemons).
//
// On such a shared engine (etcd) the cache may hold a value another daemon
// has changed and whose invalidation has not arrived yet. A read-only
// transaction may see it (coherence is within the feed's latency), but a
// write must never commit on it: the cache keeps each value's engine
// revision, a write transaction's cache hit is handed to the engine as a
// read at that revision (revTxn.assume), compared at commit like any
// other, and a conflicting attempt runs again with the cache bypassed and
// its hits dropped.
type cachedKV struct {
	KV
	wmu sync.Mutex
	// parallel lets read-write transactions reach the engine at once,
	// without wmu: on etcd, which compares every read at commit (cache
	// hits included, revTxn) and commits the transactions that wait
	// together (etcd_group.go). The cache (begin, end) copes with
	// writes of one key that overlap, ordering them by revision and
	// place in their group. On badger a cache hit is not compared, so
	// they run one at a time.
	parallel bool
	c        *cache
}

// revTxn is a transaction of an engine several processes write (etcd):
// each value has a revision, and a commit compares every key read with the
// revision it was read at.
type revTxn interface {
	// readRev is the revision key was read at (0: absent).
	readRev(key []byte) int64
	// assume records a read of key at rev served from elsewhere (the
	// cache), to be compared at commit like the transaction's own.
	assume(key []byte, rev int64)
	// committedRev is the revision of the commit, 0 when unknown.
	committedRev() int64
}

// orderedTxn is a transaction committed with others in one engine commit
// (memberTxn): its place among them orders its writes after theirs, and
// afterCommit runs fn as soon as the commit is decided, before the next
// group's functions run (which must find the cache up to date).
type orderedTxn interface {
	commitOrder() int
	afterCommit(fn func(err error))
}

// snapshotter is a KV that can hand out a read-only snapshot that stays
// open across calls, which cachedKV needs to open one only on a miss.
type snapshotter interface {
	snapshot() (tx Txn, discard func())
}

func newCachedKV(kv KV, slots int) *cachedKV {
	_, parallel := kv.(*etcdKV)
	return &cachedKV{KV: kv, parallel: parallel, c: newCache(slots)}
}

// Invalidate drops the cached records of keys changed outside this process
// (by another daemon sharing the engine). Unknown keys are ignored.
func (k *cachedKV) Invalidate(keys ...[]byte) {
	k.c.invalidate(keys)
}

// Size forwards the engine's on-disk size (Store.EngineSize).
func (k *cachedKV) Size() (lsm, vlog int64) {
	if sz, ok := k.KV.(interface{ Size() (int64, int64) }); ok {
		return sz.Size()
	}
	return 0, 0
}

// Update runs fn as the only read-write transaction under way and keeps
// the cache in step with what it commits.
func (k *cachedKV) Update(fn func(tx Txn) error) error {
	if !k.parallel {
		k.wmu.Lock()
		defer k.wmu.Unlock()
	}
	w, refused, err := k.update(fn, false)
	if refused && len(w.hits) > 0 {
		// On a shared engine, fn may have refused (ENOENT, EEXIST,
		// EDQUOT) on a cached value another daemon has changed: a
		// refusal, like a commit, is decided on the engine's latest.
		k.c.invalidate(w.hits)
		_, _, err = k.update(fn, true)
	}
	return err
}

// update is one Update (under wmu unless parallel); bypass reads nothing
// from the cache. It
// returns the last attempt's transaction, and whether the error is fn's
// own (refused).
func (k *cachedKV) update(fn func(tx Txn) error, bypass bool) (w *writeTxn, refused bool, err error) {
	gen := k.c.generation()
	begun := false
	order := 0
	// finish puts the committed values in the cache (or drops the keys
	// of a failed commit), once.
	finish := func(err error) {
		if !begun {
			return
		}
		begun = false
		// Of a failed retry, nothing is put back (ok is false).
		ok, rev := err == nil, int64(0)
		if w.rt != nil {
			// On a shared engine a value is cached only with the
			// revision it was committed at.
			rev = w.rt.committedRev()
			ok = ok && rev != 0
		}
		k.c.end(w.writes, ok, rev, order)
		if ok {
			k.c.markComplete(w.emptyDirs)
		}
	}
	engineUpdate := k.KV.Update
	if g, ok := k.KV.(*etcdKV); ok && k.parallel {
		engineUpdate = g.updateGrouped
	}
	err = engineUpdate(func(tx Txn) error {
		// A retry starts afresh; the cache then fills nothing, its
		// generation has moved. On a shared engine a retry follows a
		// conflict, perhaps with a cached value another daemon changed:
		// it drops what the attempt took from the cache and reads
		// everything from the engine.
		if w != nil {
			if w.rt != nil {
				k.c.invalidate(w.hits)
			}
			bypass = true
		}
		if begun {
			// The last attempt's keys were hidden for a commit
			// that did not happen.
			k.c.end(w.writes, false, 0, 0)
			begun = false
		}
		w = &writeTxn{tx: tx, c: k.c, gen: gen, bypass: bypass}
		w.rt, _ = tx.(revTxn)
		if ot, ok := tx.(orderedTxn); ok {
			order = ot.commitOrder()
			ot.afterCommit(finish)
		}
		refused = false
		if err := fn(w); err != nil {
			refused = true
			return err
		}
		// Between here and the end of the commit, readers of these
		// keys go to the engine.
		k.c.begin(w.writes)
		begun = true
		return nil
	})
	finish(err)
	return w, refused && err != nil, err
}

// View runs fn against the cache and, from its first miss on, an engine
// snapshot. In the rare case that a write changed what the cache already
// gave fn before the snapshot was opened, fn runs again on a plain snapshot
// (a View's fn may run twice, as an Update's may on a conflict).
func (k *cachedKV) View(fn func(tx Txn) error) error {
	sn, ok := k.KV.(snapshotter)
	if !ok {
		return k.KV.View(fn)
	}
	r := &viewTxn{c: k.c, sn: sn}
	err := fn(r)
	r.close()
	if errors.Is(err, errViewMoved) {
		return k.KV.View(fn)
	}
	return err
}

// errViewMoved is what a viewTxn returns when the engine changed under what
// it had served from the cache; View then runs fn again.
var errViewMoved = errors.New("metadata changed under a cached read")

// cacheable reports whether records under key are cached: the ones every
// lookup, getattr and admission reads, a file's content records, which
// every persist of a write and every checksum reads (and the snapshot
// bytes every admission reads with the usage), and the audit
// trail's count, which every batch of records reads (on etcd each read the
// cache cannot serve is a round trip).
func cacheable(key []byte) bool {
	if len(key) == 0 {
		return false
	}
	if len(key) == 1 && key[0] == pAudit {
		return true
	}
	switch key[0] {
	case pInode, pEntry, pUsage, pLimit, pPending, pContent, pSnapshotHeld:
		return true
	}
	return false
}

// writeTxn is a read-write transaction under cachedKV.wmu: reads of cached
// keys it has not written come from the cache (which holds the latest
// commit of this process, as no other write is under way here), its writes
// are noted. On a shared engine (rt set) each cache hit is handed to the
// engine to compare at commit, and noted in hits.
type writeTxn struct {
	tx      Txn
	rt      revTxn
	c       *cache
	gen     uint64
	bypass  bool
	writes  []cacheWrite
	written map[string]bool
	hits    [][]byte
	// emptyDirs are the directories it creates (cachedirs.go).
	emptyDirs []uint64
}

func (t *writeTxn) Get(key []byte) ([]byte, error) {
	if !cacheable(key) || t.written[string(key)] || t.bypass {
		return t.tx.Get(key)
	}
	if v, absent, rev, ok := t.c.getRev(key); ok {
		if t.rt != nil {
			t.rt.assume(key, rev)
			t.hits = append(t.hits, key)
		}
		if absent {
			return nil, ErrNotFound
		}
		return v, nil
	}
	v, err := t.tx.Get(key)
	var rev int64
	if t.rt != nil {
		rev = t.rt.readRev(key)
	}
	switch {
	case err == nil:
		t.c.fill(t.gen, key, v, false, rev)
	case errors.Is(err, ErrNotFound):
		t.c.fill(t.gen, key, nil, true, rev)
	}
	return v, err
}

func (t *writeTxn) note(key, val []byte, del bool) {
	if !cacheable(key) {
		return
	}
	if t.written == nil {
		t.written = make(map[string]bool, 8)
	}
	t.written[string(key)] = true
	t.writes = append(t.writes, cacheWrite{key: string(key), val: val, del: del})
}

// absent tells the cache that key does not exist, as of this transaction
// (the records of an inode it creates), without asking the engine.
func (t *writeTxn) absent(key []byte) {
	if t.written[string(key)] {
		return
	}
	t.note(key, nil, true)
}

func (t *writeTxn) Set(key, value []byte) error {
	t.note(key, value, false)
	return t.tx.Set(key, value)
}

func (t *writeTxn) Delete(key []byte) error {
	t.note(key, nil, true)
	return t.tx.Delete(key)
}

func (t *writeTxn) Scan(prefix, start []byte, fn func(key, value []byte) error) error {
	return t.tx.Scan(prefix, start, fn)
}

// viewTxn is a read-only transaction that reads from the cache until it
// first misses, then from an engine snapshot. Every cache hit it serves
// comes from one cache generation, so the hits are of one moment (a write
// drops its keys before it commits, so a hit is never older than a
// commit). The snapshot, opened later, agrees with them if the generation
// has not moved since; if it has, the hits are read again from the
// snapshot and a difference ends the transaction with errViewMoved.
type viewTxn struct {
	c       *cache
	sn      snapshotter
	hits    []cacheWrite
	hitGen  uint64
	snap    Txn
	discard func()
	// fillGen is the generation when the snapshot was opened: what the
	// snapshot reads is cached under it (fill).
	fillGen uint64
}

func (t *viewTxn) Get(key []byte) ([]byte, error) {
	if t.snap == nil && cacheable(key) {
		// Every hit is of the moment of the first: a key no write has
		// touched since holds the value it had then.
		since := t.hitGen
		if len(t.hits) == 0 {
			since = 0
		}
		v, absent, gen, ok := t.c.getSince(key, since, len(t.hits) == 0)
		if ok {
			if len(t.hits) == 0 {
				t.hitGen = gen
			}
			t.hits = append(t.hits, cacheWrite{key: string(key), val: v, del: absent})
			if absent {
				return nil, ErrNotFound
			}
			return v, nil
		}
	}
	if err := t.open(); err != nil {
		return nil, err
	}
	// A key no write has touched since the snapshot was opened holds in
	// the cache what the snapshot holds: no round trip.
	if v, absent, ok := t.cached(key); ok {
		if absent {
			return nil, ErrNotFound
		}
		return v, nil
	}
	v, err := t.snap.Get(key)
	switch {
	case err == nil:
		t.fillRead(key, v, false)
	case errors.Is(err, ErrNotFound):
		t.fillRead(key, nil, true)
	}
	return v, err
}

// cached is what the cache holds of key for a transaction whose snapshot
// is open, as Get would serve it without reading the engine.
func (t *viewTxn) cached(key []byte) (val []byte, absent, ok bool) {
	if !cacheable(key) {
		return nil, false, false
	}
	val, absent, _, ok = t.c.getSince(key, t.fillGen, false)
	return val, absent, ok
}

// fillRead caches val (or that key is absent), read from the snapshot.
func (t *viewTxn) fillRead(key, val []byte, absent bool) {
	if !cacheable(key) {
		return
	}
	var rev int64
	if rt, ok := t.snap.(revTxn); ok {
		rev = rt.readRev(key)
	}
	t.c.fill(t.fillGen, key, val, absent, rev)
}

// open opens the engine snapshot once and checks it against the hits
// whose keys a write has touched since they were served.
func (t *viewTxn) open() error {
	if t.snap != nil {
		return nil
	}
	t.fillGen = t.c.generation()
	t.snap, t.discard = t.sn.snapshot()
	if len(t.hits) == 0 {
		return nil
	}
	for _, h := range t.hits {
		if t.c.unchanged(h.key, t.hitGen) {
			continue
		}
		v, err := t.snap.Get([]byte(h.key))
		switch {
		case errors.Is(err, ErrNotFound):
			if !h.del {
				return errViewMoved
			}
		case err != nil:
			return err
		case h.del || string(v) != string(h.val):
			return errViewMoved
		}
	}
	return nil
}

func (t *viewTxn) close() {
	if t.discard != nil {
		t.discard()
	}
}

func (t *viewTxn) Set(key, _ []byte) error {
	return fmt.Errorf("set %q in a read-only transaction", key)
}

func (t *viewTxn) Delete(key []byte) error {
	return fmt.Errorf("delete %q in a read-only transaction", key)
}

func (t *viewTxn) Scan(prefix, start []byte, fn func(key, value []byte) error) error {
	if err := t.open(); err != nil {
		return err
	}
	return t.snap.Scan(prefix, start, fn)
}

// cache holds values by KV key, bounded, evicting by CLOCK over a fixed
// ring of slots. gen counts the writes begun and ended (and invalidations);
// busy holds the keys of a write between begin and end; stale holds the
// keys invalidated meanwhile, which end must not put back (lost: the whole
// cache was dropped meanwhile). touched says, per key, the generation at
// which a write or an invalidation last touched it, down to floor (older
// touches are forgotten, and whatever asks about a generation before floor
// is told "changed").
//
// A reader that read a key from the engine fills in what it read only if
// no write has touched that key since before its snapshot, and none is
// under way, so a fill never puts back a value older than a commit; and a
// key untouched since a generation holds in the cache what it held then
// (getSince, unchanged). Keeping this per key, not for the whole cache,
// matters on etcd, where some write (an audit batch, a checksum) is under
// way most of the time and each read the cache cannot serve is a round trip.
type cache struct {
	mu   sync.Mutex
	gen  uint64
	busy map[string]int
	// overlap marks keys that two writes under way at once set: which
	// of them committed last is not known here, so the key is dropped
	// when each ends (parallel writes, cachedKV.parallel).
	overlap map[string]bool
	touched map[string]uint64
	floor   uint64
	stale   map[string]bool
	lost    bool
	index   map[string]int32
	slots   []cacheSlot
	hand    int32
	// complete holds the directories whose every entry is in the
	// cache (cachedirs.go).
	complete map[uint64]struct{}
}

// cacheTouchedMax bounds the generations remembered per key: past it they
// are forgotten at once and floor moves up to the present.
const cacheTouchedMax = 1 << 14

// cacheSlot is one cached key: its value, or absent when neg is set, and
// on a shared engine the revision it was read or committed at.
type cacheSlot struct {
	key  string
	val  []byte
	rev  int64
	neg  bool
	ref  bool
	used bool
	// wrev and word are the commit revision and place in its group of
	// the write that put the value (0 for a value read): of two writes
	// of one key that were under way at once, the later commit's value
	// stays whichever ends first (end).
	wrev int64
	word int
}

// cacheWrite is one key a transaction set (or deleted: del), or one value
// the cache gave a reader (absent: del).
type cacheWrite struct {
	key string
	val []byte
	del bool
}

func newCache(slots int) *cache {
	return &cache{index: make(map[string]int32, slots), slots: make([]cacheSlot, slots),
		busy: make(map[string]int), overlap: make(map[string]bool), touched: make(map[string]uint64)}
}

// touchLocked notes that key changes at the current generation. c.mu is
// held.
func (c *cache) touchLocked(key string) {
	if len(c.touched) >= cacheTouchedMax {
		clear(c.touched)
		c.floor = c.gen
	}
	c.touched[key] = c.gen
}

// unchangedLocked reports whether no write or invalidation has touched key
// since generation gen, and none is under way. c.mu is held.
func (c *cache) unchangedLocked(key string, gen uint64) bool {
	if gen < c.floor || c.busy[key] > 0 {
		return false
	}
	return c.touched[key] <= gen
}

// unchanged is unchangedLocked for a caller without c.mu.
func (c *cache) unchanged(key string, gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unchangedLocked(key, gen)
}

// getSince returns the cached value of key if it is the one key had at
// generation since (any cached value when any is set), and the present
// generation.
func (c *cache) getSince(key []byte, since uint64, any bool) (val []byte, absent bool, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.lookupLocked(string(key))
	if !ok || c.busy[string(key)] > 0 || (!any && !c.unchangedLocked(string(key), since)) {
		return nil, false, c.gen, false
	}
	if i < 0 {
		return nil, true, c.gen, true
	}
	s := &c.slots[i]
	s.ref = true
	return s.val, s.neg, c.gen, true
}

func (c *cache) get(key []byte) (val []byte, absent, ok bool) {
	val, absent, _, ok = c.getGen(key)
	return val, absent, ok
}

// getRev is get with the revision the value was cached at.
func (c *cache) getRev(key []byte) (val []byte, absent bool, rev int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.lookupLocked(string(key))
	if !ok || c.busy[string(key)] > 0 {
		return nil, false, 0, false
	}
	if i < 0 {
		return nil, true, 0, true
	}
	s := &c.slots[i]
	s.ref = true
	return s.val, s.neg, s.rev, true
}

// getGen returns the cached value of key (absent: known not to exist; ok
// false: a miss) and the generation it was read at.
func (c *cache) getGen(key []byte) (val []byte, absent bool, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.lookupLocked(string(key))
	if !ok || c.busy[string(key)] > 0 {
		return nil, false, c.gen, false
	}
	if i < 0 {
		return nil, true, c.gen, true
	}
	s := &c.slots[i]
	s.ref = true
	return s.val, s.neg, c.gen, true
}

// generation is the count of writes so far; fill compares it.
func (c *cache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// fill caches what a reader read from a snapshot opened when the
// generation was gen, unless a write or an invalidation has touched key
// since (or is under way).
func (c *cache) fill(gen uint64, key, val []byte, absent bool, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.unchangedLocked(string(key), gen) {
		return
	}
	c.putLocked(string(key), val, absent, rev)
}

// begin hides the keys a write is about to commit from readers (busy):
// they miss until end, but the keys keep their slots, so that a rewrite
// does not push other records out of the cache.
func (c *cache) begin(ws []cacheWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for i, w := range ws {
		if c.busy[w.key] > 0 && !slices.ContainsFunc(ws[:i], func(p cacheWrite) bool { return p.key == w.key }) {
			c.overlap[w.key] = true // another write's, not this one's again
		}
		c.busy[w.key]++
		c.touchLocked(w.key)
	}
}

// end puts the values of a write that committed (ok) at rev, order-th in
// its group, in their slots, or drops its keys from the cache if it
// failed. A key invalidated since begin (another daemon changed it,
// perhaps after this commit) is dropped too. Where writes of one key
// overlapped (parallel), a value a later commit put stays, and a key
// whose slot went meanwhile is not put back: which write was last is not
// known then.
func (c *cache) end(ws []cacheWrite, ok bool, rev int64, order int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	var overlapped map[string]bool
	for _, w := range ws {
		c.touchLocked(w.key)
		if c.overlap[w.key] {
			if overlapped == nil {
				overlapped = make(map[string]bool)
			}
			overlapped[w.key] = true
		}
		if c.busy[w.key]--; c.busy[w.key] <= 0 {
			delete(c.busy, w.key)
			delete(c.overlap, w.key)
		}
	}
	for _, w := range ws {
		if !ok || c.lost || c.stale[w.key] {
			c.dropLocked(w.key)
			continue
		}
		if overlapped[w.key] {
			i, ok := c.index[w.key]
			if !ok {
				continue
			}
			if rev == 0 {
				c.dropLocked(w.key)
				continue
			}
			if s := &c.slots[i]; s.wrev > rev || (s.wrev == rev && s.word > order) {
				continue // a later commit's value
			}
		}
		// A deleted key is absent, whose revision etcd compares as 0,
		// whatever revision deleted it.
		r := rev
		if w.del {
			r = 0
		}
		c.putLocked(w.key, w.val, w.del, r)
		if i, ok := c.index[w.key]; ok {
			c.slots[i].wrev, c.slots[i].word = rev, order
		}
	}
	if len(c.busy) == 0 {
		// No write is under way any more that an invalidation since
		// its begin could concern.
		c.stale, c.lost = nil, false
	}
}

// invalidate drops keys that changed outside this process.
func (c *cache) invalidate(keys [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, k := range keys {
		c.dropLocked(string(k))
		c.touchLocked(string(k))
		if len(c.busy) > 0 {
			if c.stale == nil {
				c.stale = make(map[string]bool)
			}
			c.stale[string(k)] = true
		}
	}
}

// reset drops everything (the change feed lost track).
func (c *cache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.slots)
	clear(c.index)
	clear(c.touched)
	clear(c.complete)
	c.floor = c.gen
	c.hand = 0
	if len(c.busy) > 0 {
		c.lost = true
	}
}

// putLocked caches val under key (absent: known absent). c.mu is held.
func (c *cache) putLocked(key string, val []byte, absent bool, rev int64) {
	if absent {
		val = nil
		c.goneLocked(key)
	}
	if i, ok := c.index[key]; ok {
		s := &c.slots[i]
		s.val, s.neg, s.ref, s.rev = val, absent, true, rev
		s.wrev, s.word = 0, 0
		return
	}
	n := int32(len(c.slots))
	for {
		s := &c.slots[c.hand]
		if !s.used || !s.ref {
			if s.used {
				if !s.neg {
					c.forgetLocked(s.key)
				}
				delete(c.index, s.key)
			}
			*s = cacheSlot{key: key, val: val, rev: rev, neg: absent, used: true}
			c.index[key] = c.hand
			c.hand = (c.hand + 1) % n
			return
		}
		s.ref = false
		c.hand = (c.hand + 1) % n
	}
}

func (c *cache) dropLocked(key string) {
	c.forgetLocked(key)
	if i, ok := c.index[key]; ok {
		delete(c.index, key)
		c.slots[i] = cacheSlot{}
	}
}
