package metadata

import "encoding/binary"

// Directories whose every entry the cache holds.
//
// A tool that fills a tree (git's checkout, tar, npm) looks up every name
// before it makes it: git lstat(2)s each path, and the kernel looks the
// name up once more for open(O_CREAT|O_EXCL), since FUSE never trusts a
// negative dentry for an exclusive create. A name nobody asked for yet is
// not in the cache, so each such miss opened a badger snapshot, which
// first waits for the commits before it (the last file's release, under
// way beside the lookup) and then searches the memtables and tables for a
// key that is not there.
//
// A directory this process made is empty at its commit, and on an engine
// only this process writes (badger's directory lock) every entry it gets
// later is a write of this process, which the cache puts in its slot at
// commit. So as long as none of its entries has left the cache (evicted,
// invalidated, or dropped by a failed commit), a name of it that the cache
// does not hold is known absent without asking the engine. The cache keeps
// the set of such complete directories; any drop or eviction of one of a
// directory's entries takes it out for good, as does a reset. Not on a
// shared engine (etcd): other daemons add entries there, which this cache
// learns of only through the feed.

// maxCompleteDirs bounds the set of complete directories (8 bytes and a
// map slot each); past it new directories are simply not added.
const maxCompleteDirs = 1 << 16

// emptyDirNoter is a transaction that can be told that it creates an empty
// directory (writeTxn, for the metadata cache).
type emptyDirNoter interface {
	emptyDir(ino uint64)
}

// newEmptyDir tells the metadata cache that the directory ino, created by
// this transaction, has no entries. The cache knows directories by the
// number in their keys (their allocation order, layout.go).
func (o *op) newEmptyDir(ino uint64) {
	if e, ok := o.tx.(emptyDirNoter); ok {
		e.emptyDir(o.k.order(ino))
	}
}

// emptyDir records a directory this transaction creates, to be marked
// complete once it commits. Only on an engine no other process writes.
func (t *writeTxn) emptyDir(ino uint64) {
	if t.rt != nil {
		return
	}
	t.emptyDirs = append(t.emptyDirs, ino)
}

// markComplete adds the directories a committed transaction created to the
// complete set.
func (c *cache) markComplete(dirs []uint64) {
	if len(dirs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.complete == nil {
		c.complete = make(map[uint64]struct{})
	}
	for _, d := range dirs {
		if len(c.complete) >= maxCompleteDirs {
			return
		}
		c.complete[d] = struct{}{}
	}
}

// entryParent returns the directory of an entry key.
func entryParent(key string) (uint64, bool) {
	if len(key) < 9 || key[0] != pEntry {
		return 0, false
	}
	return binary.BigEndian.Uint64([]byte(key[1:9])), true
}

// lookupLocked returns key's slot, or for an entry key of a complete
// directory that no slot holds a known-absent answer (i < 0). c.mu is held.
func (c *cache) lookupLocked(key string) (i int32, ok bool) {
	if i, ok := c.index[key]; ok {
		return i, true
	}
	if len(c.complete) == 0 {
		return 0, false
	}
	if d, isEntry := entryParent(key); isEntry {
		if _, ok := c.complete[d]; ok {
			return -1, true
		}
	}
	return 0, false
}

// forgetLocked notes that key leaves the cache, or that its slot may no
// longer hold the latest value: its directory is complete no more. c.mu is
// held.
func (c *cache) forgetLocked(key string) {
	if len(c.complete) == 0 {
		return
	}
	if d, isEntry := entryParent(key); isEntry {
		delete(c.complete, d)
	}
}

// goneLocked notes that key is now known absent: a directory whose own
// record is deleted leaves the complete set. c.mu is held.
func (c *cache) goneLocked(key string) {
	if len(c.complete) == 0 || len(key) != 9 || key[0] != pInode {
		return
	}
	delete(c.complete, binary.BigEndian.Uint64([]byte(key[1:9])))
}
