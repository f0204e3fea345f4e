package fusefs

import (
	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// Several daemons may serve one store on etcd. What another daemon changes
// reaches this one through the store's change feed (metadata.Store.Follow),
// after the metadata cache has dropped it, and is pushed to the kernels of
// this daemon's views as a change from outside (tellRemote): names,
// attributes and listings are dropped at once, and an inode's content is
// marked changed, so the next open of it in any view drops its pages
// (close-to-open). Open handles decide their next write on the new record.
// What a daemon holds open is marked in the store (Hold, Unhold), so that
// another daemon's unlink or reclaim leaves it alone.

// Foreign applies a batch of changes other daemons made to the store.
func (f *FS) Foreign(c metadata.Change) {
	if c.All {
		f.core.BumpAllContent()
		for _, v := range f.notify.all() {
			q := &v.queue
			q.mu.Lock()
			q.resync = true
			q.mu.Unlock()
			f.notify.enqueue(v, nil, nil)
		}
		return
	}
	for _, ino := range c.Inodes {
		f.changedContent(nil, ino)
		rec, err := f.store.GetInode(ino)
		if err != nil {
			rec = nil
		}
		f.core.ChangedElsewhere(ino, rec)
		f.tellRemote(ino, rec, []inval{dataOf(ino, 0, 0)})
	}
	for _, e := range c.Entries {
		f.changedContent(nil, e.Dir)
		rec, _ := f.store.GetInode(e.Dir)
		f.tellRemote(e.Dir, rec, []inval{nameIn(e.Dir, e.Name), dirOf(e.Dir)})
	}
}

// tellRemote delivers items about ino, changed by another daemon: to the
// views whose kernel holds it, and for a private zone to its user's views.
// rec is ino's record, nil if it is gone.
func (f *FS) tellRemote(ino uint64, rec *shedfs.Inode, items []inval) {
	byView := f.holdersOf(nil, items)
	if rec != nil && !shared(rec.Zone) {
		if byView == nil {
			byView = make(map[*View][]inval)
		}
		for _, v := range f.notify.viewsOf(rec.Zone.Principal) {
			byView[v] = items
		}
	}
	f.notify.post(nil, byView)
}
