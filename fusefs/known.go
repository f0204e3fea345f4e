package fusefs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The kernel of each view caches what it was told about an inode (names,
// attributes, pages, listings) for as long as it holds the inode, and an
// invalidation needs to reach only the views whose kernel does. The kernel
// counts every entry it is given (lookup, create, mkdir, symlink, link,
// each readdirplus entry) and hands the count back with FORGET when it
// drops the inode. knownInodes keeps that count per view for the inodes of
// shared zones, the only ones more than one view can hold; a view's
// private inodes are in its own kernel alone (one view per user).
//
// A count is taken in the callback, before the reply leaves and before
// the record it carries is read, so a change committed after that read
// finds the view among the holders; one the kernel never took (a reply
// that failed) only costs a needless invalidation later.

// knownShards spreads the table over locks, so that lookups in different
// directories of many views do not contend.
const knownShards = 64

// knownInodes is, per shared inode, how many entries of it each view's
// kernel holds.
type knownInodes struct {
	shards [knownShards]knownShard
}

type knownShard struct {
	mu sync.Mutex
	m  map[uint64]map[*View]uint64
}

func newKnownInodes() *knownInodes {
	k := &knownInodes{}
	for i := range k.shards {
		k.shards[i].m = make(map[uint64]map[*View]uint64)
	}
	return k
}

func (k *knownInodes) shard(ino uint64) *knownShard { return &k.shards[ino%knownShards] }

// learn counts one more entry of ino in v's kernel.
func (k *knownInodes) learn(v *View, ino uint64) {
	s := k.shard(ino)
	s.mu.Lock()
	views := s.m[ino]
	if views == nil {
		views = make(map[*View]uint64, 1)
		s.m[ino] = views
	}
	views[v]++
	s.mu.Unlock()
}

// forget takes back n entries of ino that v's kernel dropped.
func (k *knownInodes) forget(v *View, ino, n uint64) {
	s := k.shard(ino)
	s.mu.Lock()
	defer s.mu.Unlock()
	views := s.m[ino]
	c, ok := views[v]
	if !ok {
		return
	}
	if c <= n {
		delete(views, v)
		if len(views) == 0 {
			delete(s.m, ino)
		}
		return
	}
	views[v] = c - n
}

// holders appends to into the views whose kernel holds ino, except one.
func (k *knownInodes) holders(ino uint64, except *View, into []*View) []*View {
	s := k.shard(ino)
	s.mu.Lock()
	for v := range s.m[ino] {
		if v != except {
			into = append(into, v)
		}
	}
	s.mu.Unlock()
	return into
}

// knows reports whether v's kernel holds ino.
func (k *knownInodes) knows(v *View, ino uint64) bool {
	s := k.shard(ino)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[ino][v]
	return ok
}

// inodesOf lists the shared inodes v's kernel holds.
func (k *knownInodes) inodesOf(v *View) []uint64 {
	var out []uint64
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		for ino, views := range s.m {
			if _, ok := views[v]; ok {
				out = append(out, ino)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// dropView forgets everything v's kernel held: it is unmounted.
func (k *knownInodes) dropView(v *View) {
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		for ino, views := range s.m {
			if _, ok := views[v]; ok {
				delete(views, v)
				if len(views) == 0 {
					delete(s.m, ino)
				}
			}
		}
		s.mu.Unlock()
	}
}

// forgetCounter passes the kernel's FORGETs of a view on to knownInodes
// after go-fuse has handled them. Node IDs are store inode numbers
// (fs.Options.ExternalNodeID), except the view root, which is private.
type forgetCounter struct {
	fuse.RawFileSystem
	v *View
}

// Forget implements fuse.RawFileSystem.
func (c *forgetCounter) Forget(nodeid, nlookup uint64) {
	c.RawFileSystem.Forget(nodeid, nlookup)
	c.v.fs.known.forget(c.v, nodeid, nlookup)
	if ino := c.v.storeIno(nodeid); !c.v.fs.known.knows(c.v, ino) {
		// The kernel dropped the directory, and its negative entries.
		c.v.fs.negatives.dropDir(c.v, ino)
	}
}
