package fusefs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The kernel's listing cache (FOPEN_CACHE_DIR) is checked at a listing's
// start against the directory's iversion and mtime, which its own unlink
// moves; but those are recorded by whichever getdents(2) at offset 0
// first finds the cache empty, not by the handle whose replies fill it
// (fs/fuse/readdir.c), and any handle whose next offset is where the
// cache ends appends to it, from whatever snapshot it holds (offsets are
// name cookies, the same in every snapshot: dir.go). So a listing begun
// before this view unlinked b, from a snapshot holding b, went on filling
// the cache after a listing begun after the unlink had recorded the
// directory as it is now: the cache then served b, past the kernel's own
// check, and lstat b said ENOENT (issue 24, item 16).
//
// The daemon knows which snapshots are stale: one is, once the directory
// changed after it was taken, through this view (node.gen, moved by own)
// or another (the content version). While a handle holding one is open,
// a new handle of the directory is opened without FOPEN_CACHE_DIR: it
// neither records nor reads the cache, and asks the daemon. Once none is
// left (RELEASEDIR comes after the handle's last getdents), the next
// cached listing finds the kernel's record older than the unlink and
// drops the cache; after a change made elsewhere, which that check does
// not see, the directory is invalidated again. (An opendir without
// FOPEN_KEEP_CACHE does not drop a directory's cache on Linux 6.18: it
// still lists from it, so keepCache cannot stand in for this.)

// listVersion is a directory's state as far as its listing goes.
type listVersion struct{ gen, content uint64 }

// listVersion is n's listing version now.
func (n *node) listVersion() listVersion {
	return listVersion{gen: n.gen.Load(), content: n.v.fs.core.ContentVersion(n.ino)}
}

// listings are a view's open directory handles that hold a snapshot.
type listings struct {
	mu   sync.Mutex
	open map[*dirHandle]listVersion
}

// loading records that d takes a snapshot now: ver is read before the
// listing, so that a change overtaking it makes the snapshot stale, and
// the handle counts before it lists.
func (l *listings) loading(d *dirHandle) {
	ver := d.node.listVersion()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = make(map[*dirHandle]listVersion)
	}
	l.open[d] = ver
}

// released forgets d. A snapshot overtaken by a change made elsewhere,
// which the kernel's own check does not see, may have filled the cache
// after that change's invalidation: the directory is invalidated again.
func (l *listings) released(d *dirHandle) {
	l.mu.Lock()
	ver, ok := l.open[d]
	delete(l.open, d)
	l.mu.Unlock()
	if n := d.node; ok && ver.content != n.v.fs.core.ContentVersion(n.ino) {
		n.v.fs.notify.enqueue(n.v, []inval{dirOf(n.ino)}, nil)
	}
}

// stale reports whether an open handle of n holds a stale snapshot.
func (l *listings) stale(n *node) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := n.listVersion()
	for d, ver := range l.open {
		if d.node == n && ver != now {
			return true
		}
	}
	return false
}

// openFlags are the flags an opendir of n answers with.
func (l *listings) openFlags(n *node, dh *dirHandle) uint32 {
	if l.stale(n) {
		return 0
	}
	return fuse.FOPEN_CACHE_DIR | n.keepCache(dh)
}
