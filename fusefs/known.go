package fusefs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/fusehandover"
)

// The kernel of each view caches what it was told about an inode (names,
// attributes, pages, listings) for as long as it holds the inode, and an
// invalidation needs to reach only the views whose kernel does. The kernel
// counts every entry it is given (lookup, create, mkdir, symlink, link,
// each readdirplus entry) and hands the count back with FORGET when it
// drops the inode. knownInodes keeps that count per view for the inodes of
// shared zones, the only ones more than one view can hold; a view's
// private inodes are in its own kernel alone (one view per user), until
// the user has a session (vfs.Core.SharedIn).
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
	m  map[uint64]map[*View]knownCount
}

// knownCount is what one view's kernel holds of one inode: how many
// entries, and whether what it caches of the inode was invalidated since
// the view last asked the daemon about it: its attributes (attrStale),
// or its attributes and pages or listing (dataStale). What is stale needs
// no further invalidation: the kernel asks again before it uses it, and
// any request about the inode makes it fresh again. A range of pages is
// not counted so: the kernel reads its other pages without asking, so
// each written range is told anew (FS.holdersOf).
type knownCount struct {
	n                    uint64
	attrStale, dataStale bool
}

func newKnownInodes() *knownInodes {
	k := &knownInodes{}
	for i := range k.shards {
		k.shards[i].m = make(map[uint64]map[*View]knownCount)
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
		views = make(map[*View]knownCount, 1)
		s.m[ino] = views
	}
	views[v] = knownCount{n: views[v].n + 1}
	s.mu.Unlock()
}

// touch records that v's kernel is about to be given what it caches of
// ino anew (attributes, pages or a listing). Like learn, it comes before
// the store is read.
func (k *knownInodes) touch(v *View, ino uint64) {
	s := k.shard(ino)
	s.mu.Lock()
	if c, ok := s.m[ino][v]; ok && c.attrStale {
		c.attrStale, c.dataStale = false, false
		s.m[ino][v] = c
	}
	s.mu.Unlock()
}

// claim appends to into the views other than except whose kernel holds
// ino with a cache not invalidated yet (its attributes, or with data its
// pages or listing too), and marks them stale: they are about to be told.
func (k *knownInodes) claim(ino uint64, data bool, except *View, into []*View) []*View {
	s := k.shard(ino)
	s.mu.Lock()
	views := s.m[ino]
	for v, c := range views {
		if v == except || c.dataStale || (!data && c.attrStale) {
			continue
		}
		into = append(into, v)
		c.attrStale = true
		c.dataStale = c.dataStale || data
		views[v] = c
	}
	s.mu.Unlock()
	return into
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
	if c.n <= n {
		delete(views, v)
		if len(views) == 0 {
			delete(s.m, ino)
		}
		return
	}
	c.n -= n
	views[v] = c
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

// Each request that may fill the kernel's cache of an inode (its
// attributes, pages or listing) makes the inode fresh in the view's
// kernel again: see knownCount.

// GetAttr implements fuse.RawFileSystem.
func (c *forgetCounter) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.touch(in.NodeId)
	return c.RawFileSystem.GetAttr(cancel, in, out)
}

// Statx implements fuse.RawFileSystem.
func (c *forgetCounter) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	c.touch(in.NodeId)
	return c.RawFileSystem.Statx(cancel, in, out)
}

// SetAttr implements fuse.RawFileSystem.
func (c *forgetCounter) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.touch(in.NodeId)
	return c.RawFileSystem.SetAttr(cancel, in, out)
}

// Open implements fuse.RawFileSystem.
func (c *forgetCounter) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.touch(in.NodeId)
	return c.RawFileSystem.Open(cancel, in, out)
}

// Read implements fuse.RawFileSystem.
func (c *forgetCounter) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	c.touch(in.NodeId)
	return c.RawFileSystem.Read(cancel, in, buf)
}

// Write implements fuse.RawFileSystem.
func (c *forgetCounter) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	c.touch(in.NodeId)
	return c.RawFileSystem.Write(cancel, in, data)
}

// Writev implements fuse.RawFileSystem.
func (c *forgetCounter) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	c.touch(in.NodeId)
	return c.RawFileSystem.Writev(cancel, in, data)
}

// CopyFileRange implements fuse.RawFileSystem.
func (c *forgetCounter) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	c.touch(in.NodeId)
	c.touch(in.NodeIdOut)
	return c.RawFileSystem.CopyFileRange(cancel, in)
}

// Fallocate implements fuse.RawFileSystem.
func (c *forgetCounter) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	c.touch(in.NodeId)
	return c.RawFileSystem.Fallocate(cancel, in)
}

// OpenDir implements fuse.RawFileSystem.
func (c *forgetCounter) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.touch(in.NodeId)
	return c.RawFileSystem.OpenDir(cancel, in, out)
}

// ReadDir implements fuse.RawFileSystem.
func (c *forgetCounter) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.touch(in.NodeId)
	return c.RawFileSystem.ReadDir(cancel, in, out)
}

// ReadDirPlus implements fuse.RawFileSystem.
func (c *forgetCounter) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.touch(in.NodeId)
	st := c.RawFileSystem.ReadDirPlus(cancel, in, out)
	if st == fuse.OK {
		if n := plusEntries(out.Bytes()); n > 0 {
			c.v.kernelEntries(n)
		}
	}
	return st
}

// plusEntries counts the entries of a READDIRPLUS reply that hand the
// kernel a node.
func plusEntries(b []byte) int64 {
	var n int64
	fusehandover.PlusNodeIDs(b, func(uint64) { n++ })
	return n
}

func (c *forgetCounter) touch(nodeID uint64) {
	c.v.fs.known.touch(c.v, c.v.storeIno(nodeID))
}

// Lookup implements fuse.RawFileSystem. It and the other requests whose
// reply names a node count the entries the kernel holds, as go-fuse
// counts them (memlimit.go).
func (c *forgetCounter) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	st := c.RawFileSystem.Lookup(cancel, header, name, out)
	c.entry(st, out)
	return st
}

// Mknod implements fuse.RawFileSystem.
func (c *forgetCounter) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	st := c.RawFileSystem.Mknod(cancel, in, name, out)
	c.entry(st, out)
	return st
}

// Mkdir implements fuse.RawFileSystem.
func (c *forgetCounter) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	st := c.RawFileSystem.Mkdir(cancel, in, name, out)
	c.entry(st, out)
	return st
}

// Link implements fuse.RawFileSystem.
func (c *forgetCounter) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	st := c.RawFileSystem.Link(cancel, in, name, out)
	c.entry(st, out)
	return st
}

// Symlink implements fuse.RawFileSystem.
func (c *forgetCounter) Symlink(cancel <-chan struct{}, header *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	st := c.RawFileSystem.Symlink(cancel, header, target, name, out)
	c.entry(st, out)
	return st
}

// Create implements fuse.RawFileSystem.
func (c *forgetCounter) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := c.RawFileSystem.Create(cancel, in, name, out)
	c.entry(st, &out.EntryOut)
	return st
}

// Tmpfile implements fuse.RawFileSystem.
func (c *forgetCounter) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	st := c.RawFileSystem.Tmpfile(cancel, in, out)
	c.entry(st, &out.EntryOut)
	return st
}

// entry counts the node a successful reply hands the kernel; a negative
// entry (node ID 0) holds none.
func (c *forgetCounter) entry(st fuse.Status, out *fuse.EntryOut) {
	if st == fuse.OK && out.NodeId != 0 {
		c.v.kernelEntries(1)
	}
}

// Forget implements fuse.RawFileSystem.
func (c *forgetCounter) Forget(nodeid, nlookup uint64) {
	c.RawFileSystem.Forget(nodeid, nlookup)
	c.v.kernelEntries(-int64(nlookup))
	c.v.fs.known.forget(c.v, nodeid, nlookup)
	if ino := c.v.storeIno(nodeid); !c.v.fs.known.knows(c.v, ino) {
		// The kernel dropped the directory, and its negative entries.
		c.v.fs.negatives.dropDir(c.v, ino)
	}
}
