package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirHandle is one opendir(3). It reads a snapshot of the directory on the
// first readdir and again after a rewind, so telldir/seekdir offsets stay
// valid while the directory changes underneath.
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
	list, e := d.node.v.list(d.node)
	if e != 0 {
		return e
	}
	d.entries = list
	d.loaded = true
	return 0
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
	e.Off = uint64(d.pos)
	return &e, 0
}

// Seekdir implements fs.FileSeekdirer. Offset 0 is a rewind and reads the
// directory afresh, as rewinddir(3) promises. Any other offset may come
// to a handle that has read nothing yet: the kernel serves a listing from
// its readdir cache, filled through another handle, and when that cache
// is dropped midway (an invalidation, memory pressure) it asks this
// handle for the rest, from where the cache left off. So the handle reads
// the directory then, and an offset past its end (the directory shrank)
// is the end, not an error (du failed with EINVAL).
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
	d.pos = int(min(off, uint64(len(d.entries))))
	return 0
}

// Fsyncdir implements fs.FileFsyncdirer.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.node.Fsync(ctx, nil, flags)
}

// Releasedir implements fs.FileReleasedirer.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.node.v.fs.core.DirClosed(d.node.ino)
}
