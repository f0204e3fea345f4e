package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/shedfs/shedfs"
)

// A READDIRPLUS reply hands the kernel every entry with its attributes,
// and go-fuse asks a lookup for each. Each such lookup used to open a
// store transaction of its own (and count as a LOOKUP request, which the
// kernel never sent). The directory handle instead reads the records of
// the entries a request is about to hand out in one transaction
// (Store.LookupNames) when it reaches the first of them, and each entry is
// then answered by the same code as a LOOKUP (node.resolve) from the
// record so read. The batch is read within the request that uses it and
// never kept for the next one, so it is as fresh as a lookup's read.
//
// Only zones no other view can show take the batch: in a shared zone a
// view's holding of an inode must be counted before its record is read
// (View.learn, negativeEntries), which a batch read ahead of the count
// would undo; there each entry is looked up alone.

// Batch sizes: the first request of a handle reads minBatch records; later
// ones as many as the previous request handed out (the kernel's buffer
// holds from some fifty entries to a few hundred), at most maxBatch.
const (
	minBatch = 32
	maxBatch = 512
)

// entryBatch is what a dirHandle read ahead for the request under way.
type entryBatch struct {
	req  *fuse.Context
	recs map[string]*shedfs.Inode
	// used counts the entries the request handed out.
	used int
	// last is how many the previous request handed out.
	last int
	// clock is the persist clock before recs were read (hold.go).
	clock uint64
}

// Lookup implements fs.FileLookuper: the entry of name in a READDIRPLUS
// reply, just returned by Readdirent.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	since := d.node.v.fs.core.Clock()
	return d.node.resolve(ctx, name, d.batched(ctx, name), since, out)
}

// batched returns name's record from the batch of the request under way,
// reading the batch first if needed; nil when there is none (resolve asks
// the store alone).
// A record is not handed out when its file was persisted since the batch
// was read (resolve then reads it alone).
func (d *dirHandle) batched(ctx context.Context, name string) *shedfs.Inode {
	n := d.node
	req, _ := ctx.(*fuse.Context)
	if req == nil || n.v.fs.sharedIn(n.zone) {
		return nil
	}
	b := &d.batch
	if b.req != req {
		if b.req != nil {
			b.last = b.used
		}
		*b = entryBatch{req: req, last: b.last}
	}
	b.used++
	if rec, ok := b.recs[name]; ok {
		// Used once: resolve lays open-file state over it.
		delete(b.recs, name)
		return b.fresh(n.v.fs, rec)
	}
	// name is the entry Readdirent returned last, unless go-fuse
	// replays a reply the kernel did not take in full.
	i := d.pos - 1
	if i < 0 || i >= len(d.entries) || d.entries[i].Name != name {
		return nil
	}
	size := min(max(b.last, minBatch), maxBatch)
	names := make([]string, 0, size)
	for _, e := range d.entries[i:min(i+size, len(d.entries))] {
		if e.Name != "." && e.Name != ".." {
			names = append(names, e.Name)
		}
	}
	b.clock = n.v.fs.core.Clock()
	recs, err := n.v.fs.store.LookupNames(n.ino, names)
	if err != nil {
		return nil
	}
	b.recs = make(map[string]*shedfs.Inode, len(names))
	for j, rec := range recs {
		if rec != nil {
			b.recs[names[j]] = rec
		}
	}
	rec := b.recs[name]
	delete(b.recs, name)
	return b.fresh(n.v.fs, rec)
}

// fresh is rec unless its file was persisted since the batch was read.
func (b *entryBatch) fresh(f *FS, rec *shedfs.Inode) *shedfs.Inode {
	if rec != nil && rec.IsRegular() && f.core.PersistedSince(rec.Ino, b.clock) {
		return nil
	}
	return rec
}
