package metadata

import "sync"

// cacheSlots bounds the metadata cache: inode records, directory entries
// (present or known absent), usage and limits, about 200 bytes each with
// the index, so some 3-4 MiB whatever the size of the store. A file in use
// takes about two slots (its entry and its record), so this holds the
// working set of some 8,000 files, and leaves the daemon's memory to
// badger's tables and caches, which grow with the store (a 1M-inode store
// must stay well under 200 MiB resident).
const cacheSlots = 1 << 14

// cache holds recently used records by their KV key, so that lookup,
// getattr and quota reads of known inodes open no transaction. It is
// written through: every namespace transaction runs under Store.wmu, drops
// the keys it writes before it commits and puts their new values in after,
// so the cache never holds a value older than a committed one. A reader
// that missed fills in what it read only if no write came between (gen),
// and Invalidate drops keys that changed elsewhere (a change feed of a
// shared engine). Eviction is CLOCK over a fixed ring of slots.
type cache struct {
	mu    sync.Mutex
	gen   uint64
	index map[string]int32
	slots []cacheSlot
	hand  int32
}

// cacheSlot is one cached key: its value, or absent when neg is set.
type cacheSlot struct {
	key  string
	val  []byte
	neg  bool
	ref  bool
	used bool
}

func newCache(slots int) *cache {
	return &cache{index: make(map[string]int32, slots), slots: make([]cacheSlot, slots)}
}

// cacheable reports whether records under key are cached: the ones every
// lookup, getattr and admission reads.
func cacheable(key []byte) bool {
	if len(key) == 0 {
		return false
	}
	switch key[0] {
	case pInode, pEntry, pUsage, pLimit:
		return true
	}
	return false
}

// getLocked returns the cached value of key; absent reports a key known
// not to exist; ok is false on a miss. c.mu must be held.
func (c *cache) getLocked(key []byte) (val []byte, absent, ok bool) {
	i, ok := c.index[string(key)]
	if !ok {
		return nil, false, false
	}
	s := &c.slots[i]
	s.ref = true
	return s.val, s.neg, true
}

func (c *cache) get(key []byte) (val []byte, absent, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(key)
}

// generation is the count of writes so far; fill compares it.
func (c *cache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// putLocked caches val under key (val nil and absent: known absent).
func (c *cache) putLocked(key string, val []byte, absent bool) {
	if i, ok := c.index[key]; ok {
		s := &c.slots[i]
		s.val, s.neg, s.ref = val, absent, true
		return
	}
	for {
		s := &c.slots[c.hand]
		if !s.used || !s.ref {
			if s.used {
				delete(c.index, s.key)
			}
			*s = cacheSlot{key: key, val: val, neg: absent, used: true}
			c.index[key] = c.hand
			c.hand = (c.hand + 1) % int32(len(c.slots))
			return
		}
		s.ref = false
		c.hand = (c.hand + 1) % int32(len(c.slots))
	}
}

func (c *cache) dropLocked(key string) {
	if i, ok := c.index[key]; ok {
		delete(c.index, key)
		c.slots[i] = cacheSlot{}
	}
}

// cacheRead is one value a reader found in the engine.
type cacheRead struct {
	key    []byte
	val    []byte
	absent bool
}

// fill caches what a reader read in a snapshot taken after generation
// returned gen, unless a write has happened since.
func (c *cache) fill(gen uint64, reads ...cacheRead) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	for _, r := range reads {
		if cacheable(r.key) {
			c.putLocked(string(r.key), r.val, r.absent)
		}
	}
}

// cacheWrite is one key a transaction set or deleted.
type cacheWrite struct {
	key string
	val []byte
	del bool
}

// invalidate drops keys about to change: between the commit and apply,
// readers go to the engine.
func (c *cache) invalidate(ws []cacheWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, w := range ws {
		c.dropLocked(w.key)
	}
}

// apply puts the values of a committed transaction.
func (c *cache) apply(ws []cacheWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, w := range ws {
		c.putLocked(w.key, w.val, w.del)
	}
}

// Invalidate drops the cached records of keys changed outside this Store
// (by another process sharing the engine). Unknown keys are ignored.
func (c *cache) Invalidate(keys ...[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, k := range keys {
		c.dropLocked(string(k))
	}
}

// cacheTxn is a read-write transaction whose reads of cached keys come
// from the cache and whose writes are noted for it. It is only used under
// Store.wmu, when no other transaction can change those keys.
type cacheTxn struct {
	Txn
	c      *cache
	writes []cacheWrite
	// written holds the keys set or deleted so far: the engine's
	// transaction, not the cache, has their current values (a second
	// charge of one holder must see the first).
	written map[string]struct{}
}

func (t *cacheTxn) Get(key []byte) ([]byte, error) {
	if !cacheable(key) {
		return t.Txn.Get(key)
	}
	if _, ok := t.written[string(key)]; ok {
		return t.Txn.Get(key)
	}
	if v, absent, ok := t.c.get(key); ok {
		if absent {
			return nil, ErrNotFound
		}
		return v, nil
	}
	v, err := t.Txn.Get(key)
	switch {
	case err == nil:
		// Under wmu the snapshot is the latest commit.
		t.c.mu.Lock()
		t.c.putLocked(string(key), v, false)
		t.c.mu.Unlock()
	case err == ErrNotFound:
		t.c.mu.Lock()
		t.c.putLocked(string(key), nil, true)
		t.c.mu.Unlock()
	}
	return v, err
}

func (t *cacheTxn) Set(key, value []byte) error {
	if cacheable(key) {
		t.note(cacheWrite{key: string(key), val: value})
	}
	return t.Txn.Set(key, value)
}

func (t *cacheTxn) Delete(key []byte) error {
	if cacheable(key) {
		t.note(cacheWrite{key: string(key), del: true})
	}
	return t.Txn.Delete(key)
}

func (t *cacheTxn) note(w cacheWrite) {
	if t.written == nil {
		t.written = make(map[string]struct{}, 4)
	}
	t.written[w.key] = struct{}{}
	t.writes = append(t.writes, w)
}
