package fusefs

import (
	"context"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// Views share the inodes of share/ and the group zones. The kernel of each
// view caches names and attributes of those inodes, so a change made
// through one view is pushed to every other view as invalidations. They are
// sent from a worker, never from inside a callback (a notification may
// wait on kernel locks that the calling request holds); the callback waits
// a bounded time for delivery so that the next request in another view
// sees the change.

// notifyWait bounds how long a callback waits for its invalidations: long
// enough to make the common case immediate, short enough that a stuck
// kernel never stalls the daemon.
const notifyWait = 100 * time.Millisecond

// inval is one invalidation: of an inode's attributes and cached data
// (name == ""), or of a name in a directory.
type inval struct {
	ino  uint64 // the inode, or the directory holding name
	name string
	off  int64 // data range for an inode: off < 0 means attributes only
	len  int64
}

// invalBatch is what one callback sends to the other views.
type invalBatch struct {
	from  *View
	items []inval
	done  chan struct{}
}

// notifier delivers invalidations to the views of one FS.
type notifier struct {
	mu    sync.Mutex
	views map[*View]struct{}
	queue chan *invalBatch
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newNotifier() *notifier {
	n := &notifier{
		views: make(map[*View]struct{}),
		queue: make(chan *invalBatch, 1024),
		stop:  make(chan struct{}),
	}
	n.wg.Add(1)
	go n.run()
	return n
}

func (n *notifier) add(v *View) {
	n.mu.Lock()
	n.views[v] = struct{}{}
	n.mu.Unlock()
}

func (n *notifier) remove(v *View) {
	n.mu.Lock()
	delete(n.views, v)
	n.mu.Unlock()
}

// all returns every mounted view.
func (n *notifier) all() []*View {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*View, 0, len(n.views))
	for v := range n.views {
		out = append(out, v)
	}
	return out
}

func (n *notifier) others(from *View) []*View {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*View, 0, len(n.views))
	for v := range n.views {
		if v != from && v.server != nil {
			out = append(out, v)
		}
	}
	return out
}

func (n *notifier) run() {
	defer n.wg.Done()
	for {
		select {
		case b := <-n.queue:
			for _, v := range n.others(b.from) {
				for _, it := range b.items {
					v.deliver(it)
				}
			}
			close(b.done)
		case <-n.stop:
			return
		}
	}
}

func (n *notifier) close() {
	close(n.stop)
	n.wg.Wait()
}

// deliver tells this view's kernel to forget what it cached. A kernel that
// never saw the inode answers ENOENT, which is fine.
func (v *View) deliver(it inval) {
	ino := it.ino
	if ino == v.roots.Private {
		ino = fuse.FUSE_ROOT_ID
	}
	if it.name != "" {
		v.server.EntryNotify(ino, it.name)
		return
	}
	v.server.InodeNotify(ino, it.off, it.len)
}

// shared reports whether inodes of zone z are visible in more than one view.
func shared(z metadata.Zone) bool {
	return z.Kind == metadata.ZoneShare || z.Kind == metadata.ZoneGroup
}

// invalidate sends items to every other view when zone z is shared, and
// waits a bounded time for them to be delivered.
func (f *FS) invalidate(from *View, z metadata.Zone, items ...inval) {
	if !shared(z) || len(items) == 0 {
		return
	}
	if len(f.notify.others(from)) == 0 {
		return
	}
	f.send(from, items)
}

// send queues items for every view but from (nil: every view) and waits a
// bounded time for their delivery.
func (f *FS) send(from *View, items []inval) {
	b := &invalBatch{from: from, items: items, done: make(chan struct{})}
	select {
	case f.notify.queue <- b:
	default:
		f.log.Warn("invalidation queue full; views may show stale data until their caches expire")
		return
	}
	t := time.NewTimer(notifyWait)
	defer t.Stop()
	select {
	case <-b.done:
	case <-t.C:
	}
}

// syncCaches returns once every invalidation queued so far has reached
// the kernels of the other views, or when ctx ends. A lock taken in view
// v calls it, so that whatever the previous holder wrote through another
// view is out of v's cache before the new holder reads: the notifier
// delivers in order, so an empty batch queued now is done after them.
func (f *FS) syncCaches(ctx context.Context, v *View, z metadata.Zone) {
	if !shared(z) || len(f.notify.others(v)) == 0 {
		return
	}
	b := &invalBatch{from: v, done: make(chan struct{})}
	select {
	case f.notify.queue <- b:
	case <-ctx.Done():
		return
	}
	select {
	case <-b.done:
	case <-ctx.Done():
	}
}

// attrOf invalidates an inode's attributes only.
func attrOf(ino uint64) inval { return inval{ino: ino, off: -1} }

// dataOf invalidates an inode's attributes and cached data from off.
func dataOf(ino uint64, off, n int64) inval { return inval{ino: ino, off: off, len: n} }

// nameIn invalidates one name in a directory.
func nameIn(dir uint64, name string) inval { return inval{ino: dir, name: name} }

// EntryChanged tells every view that name in directory dir changed
// outside any view (an import by the admin), and reclaims replaced, the
// inode the change took the name from, once nothing holds it.
func (f *FS) EntryChanged(dir uint64, name string, replaced *metadata.Inode) {
	f.broadcast(nameIn(dir, name), attrOf(dir))
	f.reclaimIfUnused(replaced)
}

// InodeChanged tells every view that ino's ownership or attributes changed
// outside any view (the admin's mode override): open handles decide their
// next write on the new record, and kernels drop cached attributes.
func (f *FS) InodeChanged(ino uint64) {
	rec, err := f.store.GetInode(ino)
	if err != nil {
		f.log.Error("reload changed inode", "ino", ino, "err", err)
		return
	}
	if oi := f.lookupOpen(ino); oi != nil {
		oi.mu.Lock()
		oi.entry = acl.EntryOf(rec)
		oi.mu.Unlock()
	}
	f.broadcast(attrOf(ino))
}

// broadcast sends items to every view, whatever the zone: the change came
// from outside the views, so none of them knows it yet.
func (f *FS) broadcast(items ...inval) {
	f.send(nil, items)
}

// Record puts an event that happened outside the views (an import, an
// admin override) into the same trail as theirs.
func (f *FS) Record(e Event) { f.record(e) }
