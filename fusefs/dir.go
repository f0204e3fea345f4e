package fusefs

import (
	"cmp"
	"context"
	"hash/fnv"
	"slices"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirHandle is one opendir(3). It reads a snapshot of the directory on the
// first readdir and again after a rewind. An entry's offset is its name's
// cookie, and a snapshot is in cookie order, so an offset means the same
// in every snapshot: telldir/seekdir offsets stay valid while the
// directory changes underneath, and a listing resumed from an offset on
// another snapshot (Seekdir) hands out no name twice and skips none that
// stayed.
type dirHandle struct {
	node    *node
	entries []fuse.DirEntry
	loaded  bool
	pos     int
	// batch holds the records read ahead for a READDIRPLUS request
	// (readdirplus.go).
	batch entryBatch
}

func (d *dirHandle) load(ctx context.Context) syscall.Errno {
	d.node.v.lists.loading(d)
	list, e := d.node.v.list(d.node)
	if e != 0 {
		return e
	}
	for i := range list {
		list[i].Off = cookie(list[i].Name)
	}
	slices.SortFunc(list, func(a, b fuse.DirEntry) int {
		return cmp.Or(cmp.Compare(a.Off, b.Off), cmp.Compare(a.Name, b.Name))
	})
	d.entries = list
	d.loaded = true
	return 0
}

// cookie is the offset of the entry name in every listing: a hash of the
// name, above 0 (a rewind) and below 2^63 (the kernel's offsets are
// signed). Offsets that were indexes into each handle's snapshot listed a
// name twice, or skipped one, when the kernel resumed a listing through
// a handle whose snapshot was taken after a change (issue 24, item 16).
func cookie(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return max(h.Sum64()>>1, 1)
}

// Readdirent implements fs.FileReaddirenter.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if !d.loaded {
		if e := d.load(ctx); e != 0 {
			return nil, e
		}
	}
	if d.pos >= len(d.entries) {
		return nil, 0
	}
	e := d.entries[d.pos]
	d.pos++
	return &e, 0
}

// Seekdir implements fs.FileSeekdirer. Offset 0 is a rewind and reads the
// directory afresh, as rewinddir(3) promises. Any other offset may come
// to a handle that has read nothing yet: the kernel serves a listing from
// its readdir cache, filled through another handle, and when that cache
// is dropped midway (an invalidation, memory pressure) it asks this
// handle for the rest, from where the cache left off. So the handle reads
// the directory then and goes on after the offset's cookie; an offset
// past its end is the end, not an error (du failed with EINVAL).
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		d.loaded = false
		d.pos = 0
		return 0
	}
	if !d.loaded {
		if e := d.load(ctx); e != 0 {
			return e
		}
	}
	d.pos, _ = slices.BinarySearchFunc(d.entries, off+1, func(e fuse.DirEntry, t uint64) int { return cmp.Compare(e.Off, t) })
	return 0
}

// Fsyncdir implements fs.FileFsyncdirer.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.node.Fsync(ctx, nil, flags)
}

// Releasedir implements fs.FileReleasedirer.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.node.v.lists.released(d)
	d.node.v.vv.DirClosed(d.node.ino)
}
