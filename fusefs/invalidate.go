package fusefs

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/vfs"
)

// Views share the inodes of share/ and the group zones, and the kernel of
// each view caches names, attributes, pages and listings for long. So a
// change is pushed as invalidations to the views whose kernel holds what
// changed (knownInodes), and to no other. Each view has its own delivery
// queue, drained by a goroutine of its own while it has work: a kernel
// busy with one view's locks never delays the others.
//
// A callback never delivers itself (a notification may wait on kernel
// locks that the calling request holds). It waits a short, bounded time
// for delivery to at most syncTargets views, so that a process acting
// right after in another view sees the change; everything beyond that is
// delivered behind its back. A wait could deadlock if two requests each
// held kernel locks the other's delivery needs and each waited for the
// other, so a request never waits for a view that has a request waiting
// itself (View.waiting): no cycle can form, and notifyWait is only a
// safety net.

// notifyWait bounds how long a callback waits for its invalidations.
const notifyWait = 100 * time.Millisecond

// membershipWait bounds how long a change of a user's groups waits for
// that user's kernels. It comes from the admin, who holds no kernel
// lock, and what comes right after it (ls groups/G, a write on a handle
// of G) must meet the new membership: under load the 100 ms of
// notifyWait passed and a removed member still listed the group's folder
// (EACCES, not ENOENT), an added one still met its cached absence
// (ENOENT) (issue 24, items 15 and the differential test's load).
const membershipWait = 2 * time.Second

// syncTargets is how many views a change waits for at most.
const syncTargets = 8

// paceDelivery is the least time between two deliveries to one view that
// nobody waits for: the invalidations of a burst of changes to inodes
// many views hold (a directory in share/ every view looked at) merge
// meanwhile, so each view is told once per pause rather than once per
// change. A change after a quiet pause is delivered at once, and one a
// request waits for never pauses.
const paceDelivery = 20 * time.Millisecond

// maxQueued bounds what waits in one view's queue. Past it, the queue is
// dropped and the view's whole shared cache invalidated instead (resync),
// so a flood never costs unbounded memory nor leaves a stale entry.
const maxQueued = 1 << 14

// inval is one invalidation: of an inode's attributes and cached data
// (name == ""), or of a name in a directory.
type inval struct {
	ino  uint64 // the inode, or the directory holding name
	name string
	off  int64 // data range for an inode: off < 0 means attributes only
	len  int64
	// was is, for a name, the inode it named before the change (noneBefore
	// for a new name), so that only the views whose kernel holds that
	// inode or the name as absent are told; 0: every view holding the
	// directory.
	was uint64
}

// noneBefore is inval.was of a name that did not exist.
const noneBefore = ^uint64(0)

// attrOf invalidates an inode's attributes only.
func attrOf(ino uint64) inval { return inval{ino: ino, off: -1} }

// dataOf invalidates an inode's attributes and cached data from off.
func dataOf(ino uint64, off, n int64) inval { return inval{ino: ino, off: off, len: n} }

// dirOf invalidates a directory's attributes and its cached listing.
func dirOf(dir uint64) inval { return inval{ino: dir, off: 0} }

// nameIn invalidates one name in a directory, positive or negative.
func nameIn(dir uint64, name string) inval { return inval{ino: dir, name: name} }

// invalKey is what one queued invalidation is about: later ones about the
// same merge into it.
type invalKey struct {
	ino  uint64
	name string
}

// merge returns one invalidation covering a and b, of the same key.
func merge(a, b inval) inval {
	switch {
	case a.name != "" || b.off < 0:
		return a
	case a.off < 0:
		return b
	}
	out := inval{ino: a.ino, off: min(a.off, b.off)}
	if a.len > 0 && b.len > 0 {
		out.len = max(a.off+a.len, b.off+b.len) - out.off
	}
	return out
}

// waiter is released when every view it was queued to has delivered what
// was queued before it.
type waiter struct {
	left atomic.Int32
	done chan struct{}
}

func (w *waiter) release() {
	if w.left.Add(-1) == 0 {
		close(w.done)
	}
}

// viewQueue is what is still to be delivered to one view's kernel. What
// is queued about one inode or name merges into one invalidation, so a
// view whose delivery lags behind a burst of changes is told once.
type viewQueue struct {
	mu      sync.Mutex
	items   map[invalKey]inval
	waiters []*waiter
	resync  bool
	running bool
	// last is when the queue was last delivered; wake cuts short the
	// pause of a drain when a waiter comes.
	last time.Time
	wake chan struct{}
}

// notifier knows the mounted views and runs their deliveries.
type notifier struct {
	log *slog.Logger

	mu    sync.Mutex
	views map[*View]struct{}

	// waitMu guards View.waiting.
	waitMu sync.Mutex

	drains  sync.WaitGroup
	dropped atomic.Uint64
}

func newNotifier(log *slog.Logger) *notifier {
	return &notifier{log: log, views: make(map[*View]struct{})}
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

// viewsOf returns the views of one user.
func (n *notifier) viewsOf(user string) []*View {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*View
	for v := range n.views {
		if v.user == user {
			out = append(out, v)
		}
	}
	return out
}

// close waits for deliveries under way.
func (n *notifier) close() {
	n.drains.Wait()
}

// post queues what each view must be told and waits, boundedly, for at
// most syncTargets of them. from is the view whose request made the change
// (nil for the admin, which holds no kernel lock).
func (n *notifier) post(from *View, byView map[*View][]inval) {
	n.postWithin(from, byView, notifyWait)
}

// postWithin is post with wait as the bound of the wait.
func (n *notifier) postWithin(from *View, byView map[*View][]inval, wait time.Duration) {
	if len(byView) == 0 {
		return
	}
	w := &waiter{done: make(chan struct{})}
	var waitFor []*View
	n.waitMu.Lock()
	for v := range byView {
		if len(waitFor) == syncTargets {
			break
		}
		if v.waiting == 0 {
			waitFor = append(waitFor, v)
		}
	}
	if len(waitFor) > 0 && from != nil {
		from.waiting++
	}
	n.waitMu.Unlock()
	w.left.Store(int32(len(waitFor)))
	// The views waited for first: their deliveries start before the
	// others'.
	for _, v := range waitFor {
		n.enqueue(v, byView[v], w)
	}
	for v, items := range byView {
		if !slices.Contains(waitFor, v) {
			n.enqueue(v, items, nil)
		}
	}
	if len(waitFor) == 0 {
		return
	}
	t := time.NewTimer(wait)
	select {
	case <-w.done:
	case <-t.C:
	}
	t.Stop()
	if from != nil {
		n.waitMu.Lock()
		from.waiting--
		n.waitMu.Unlock()
	}
}

// flush returns once every view but except has delivered what was queued
// to it before, or when ctx ends. Views with nothing under way are not
// waited for.
func (n *notifier) flush(ctx context.Context, except *View) {
	var busy []*View
	for _, v := range n.all() {
		if v == except {
			continue
		}
		v.queue.mu.Lock()
		running := v.queue.running
		v.queue.mu.Unlock()
		if running {
			busy = append(busy, v)
		}
	}
	if len(busy) == 0 {
		return
	}
	w := &waiter{done: make(chan struct{})}
	w.left.Store(int32(len(busy)))
	for _, v := range busy {
		n.enqueue(v, nil, w)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
	}
}

// enqueue adds items (and w, released once they are delivered) to v's
// queue and makes sure a goroutine drains it.
func (n *notifier) enqueue(v *View, items []inval, w *waiter) {
	q := &v.queue
	q.mu.Lock()
	if q.resync || len(q.items)+len(items) > maxQueued {
		if !q.resync {
			n.dropped.Add(1)
			n.log.Warn("invalidation queue of a view overflowed; invalidating its whole shared cache", "user", v.user)
		}
		q.resync = true
		q.items = nil
	} else {
		if q.items == nil && len(items) > 0 {
			q.items = make(map[invalKey]inval, len(items))
		}
		for _, it := range items {
			it.was = 0 // routing only
			k := invalKey{it.ino, it.name}
			if old, ok := q.items[k]; ok {
				it = merge(old, it)
			}
			q.items[k] = it
		}
	}
	if w != nil {
		q.waiters = append(q.waiters, w)
		if q.wake == nil {
			q.wake = make(chan struct{}, 1)
		}
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		n.drains.Add(1)
		go n.drain(v)
	}
}

// drain delivers v's queue until it is empty.
func (n *notifier) drain(v *View) {
	defer n.drains.Done()
	q := &v.queue
	for {
		q.mu.Lock()
		if pause := paceDelivery - time.Since(q.last); pause > 0 && len(q.waiters) == 0 && !q.resync && len(q.items) > 0 {
			// Nobody waits: let what comes in the meantime merge.
			if q.wake == nil {
				q.wake = make(chan struct{}, 1)
			}
			wake := q.wake
			q.mu.Unlock()
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-wake:
			}
			t.Stop()
			q.mu.Lock()
		}
		q.last = time.Now()
		items, waiters, resync := q.items, q.waiters, q.resync
		q.items, q.waiters, q.resync = nil, nil, false
		if len(items) == 0 && len(waiters) == 0 && !resync {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if resync {
			v.resync()
		}
		for _, it := range items {
			v.tell(it)
		}
		for _, w := range waiters {
			w.release()
		}
	}
}

// tell tells this view's kernel to forget what it cached. A kernel that
// no longer holds the inode or name answers ENOENT, which is fine.
func (v *View) tell(it inval) {
	ino := it.ino
	if ino == v.rootIno {
		ino = fuse.FUSE_ROOT_ID
	}
	if it.name != "" {
		v.server.EntryNotify(ino, it.name)
		return
	}
	v.server.InodeNotify(ino, it.off, it.len)
}

// resync invalidates everything of the shared zones this view's kernel
// holds: every name go-fuse knows below share/ and groups/, and every
// shared inode the kernel counts. It is what a lost queue falls back to.
func (v *View) resync() {
	var walk func(n *fs.Inode, ino uint64, depth int)
	walk = func(in *fs.Inode, ino uint64, depth int) {
		if depth > 4096 {
			return
		}
		for name, ch := range in.Children() {
			v.server.EntryNotify(ino, name)
			if cn, ok := ch.Operations().(*node); ok {
				walk(ch, cn.ino, depth+1)
			}
		}
	}
	if sh := v.root.GetChild("share"); sh != nil {
		if sn, ok := sh.Operations().(*node); ok {
			walk(sh, sn.ino, 0)
		}
	}
	walk(&v.groups.Inode, groupsIno, 0)
	v.server.InodeNotify(groupsIno, 0, 0)
	for _, ino := range v.fs.known.inodesOf(v) {
		v.server.InodeNotify(ino, 0, 0)
	}
}

// shared reports whether inodes of zone z are visible in more than one view.
func shared(z shedfs.Zone) bool {
	return z.Kind == shedfs.ZoneShare || z.Kind == shedfs.ZoneGroup
}

// invalidate tells the views other than from whose kernel holds what
// changed. Inodes of a private zone are in from's kernel only, which saw
// the change itself.
func (f *FS) invalidate(from *View, z shedfs.Zone, items ...inval) {
	if !f.sharedIn(z) || len(items) == 0 {
		return
	}
	f.deliver(from, z, items)
}

// deliver tells every view but from whose kernel holds what items name;
// for a per-user zone, every view of its user of the names in it.
func (f *FS) deliver(from *View, z shedfs.Zone, items []inval) {
	byView := f.holdersOf(from, items)
	if !shared(z) {
		byView = f.tellUserViews(from, z, items, byView)
	}
	f.notify.post(from, byView)
}

// holdersOf sorts items by the views whose kernel holds their inode (or
// directory), leaving out one view.
func (f *FS) holdersOf(except *View, items []inval) map[*View][]inval {
	var byView map[*View][]inval
	var buf [16]*View
	for _, it := range items {
		var views []*View
		if it.name != "" && it.was != 0 {
			// A name: the views whose kernel holds it, as absent or
			// as the inode it named.
			views = f.negatives.take(it.ino, it.name, except, buf[:0])
			if it.was != noneBefore {
				views = f.known.holders(it.was, except, views)
			}
		} else if it.name != "" || it.off > 0 || it.len > 0 {
			// An entry of a directory, or a range of pages: every
			// view holding the inode. The kernel keeps the other
			// pages and reads them without asking, so a view told of
			// one range must still be told of the next.
			views = f.known.holders(it.ino, except, buf[:0])
		} else {
			// Of an inode, only the views whose cache of it was not
			// invalidated since they last asked.
			views = f.known.claim(it.ino, it.off >= 0, except, buf[:0])
		}
		for _, v := range views {
			if byView == nil {
				byView = make(map[*View][]inval)
			}
			byView[v] = append(byView[v], it)
		}
	}
	return byView
}

// changedContent records a change of ino's content (data, or the entries
// of a directory) made through from, whose kernel saw it and may keep its
// cache. The other views' next open drops theirs.
func (f *FS) changedContent(from *node, ino uint64) {
	if from != nil && !f.sharedIn(from.zone) {
		// Only from's kernel holds it, and it saw the change.
		return
	}
	before, after := f.core.BumpContent(ino)
	if from != nil {
		from.seen.CompareAndSwap(before, after)
	}
}

// syncCaches returns once every invalidation queued so far has reached
// the kernels of the other views, or when ctx ends. A lock taken in view
// v calls it, so that whatever the previous holder wrote through another
// view is out of v's cache before the new holder reads.
func (f *FS) syncCaches(ctx context.Context, v *View, z shedfs.Zone) {
	if f.sharedIn(z) {
		f.notify.flush(ctx, v)
	}
}

// Changed implements vfs.Frontend: an operation through view from changed
// items in zone z; the kernels holding them are told, but from's own
// (that view's callback updates its kernel with the operation's answer).
// A view of another door (from.Kernel not a FUSE view) has no kernel
// here: every view holding them is told, and for a per-user zone every
// view of its user, as for a change made outside the views.
func (f *FS) Changed(from *vfs.View, z shedfs.Zone, items []vfs.Change) {
	fv, _ := from.Kernel.(*View)
	if len(items) == 0 || fv != nil && !f.sharedIn(z) {
		return
	}
	inv := make([]inval, 0, len(items))
	for _, c := range items {
		inv = append(inv, inval{ino: c.Ino, name: c.Name, off: c.Off, len: c.Len, was: c.Was})
	}
	if fv == nil && !shared(z) {
		byView := make(map[*View][]inval)
		for _, v := range f.notify.viewsOf(vfs.ZoneUser(z)) {
			byView[v] = inv
		}
		f.notify.post(nil, byView)
		return
	}
	f.invalidate(fv, z, inv...)
}

// Record puts an event that happened outside the views (an import, an
// admin override) into the same trail as theirs.
func (f *FS) Record(e shedfs.Event) { f.record(e) }
