package fusefs

import (
	"errors"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
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
		if (err != nil || rec.Nlink == 0) && f.marks.lingering(ino) {
			f.marks.urge(ino) // unlinked elsewhere: our mark goes now (marks.go)
		}
		if err == nil {
			if oi := f.lookupOpen(ino); oi != nil {
				oi.mu.Lock()
				oi.entry = acl.EntryOf(rec)
				oi.mu.Unlock()
			}
		}
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

// holdStripes is how many locks order the open marks: those of one inode
// must not pass each other (an unhold's delete after a new hold's put),
// those of different inodes may, so that the mark of one file's last
// release (a round trip) does not hold up the next file's open.
const holdStripes = 64

// hold marks ino open by this daemon in a store other daemons share.
func (f *FS) hold(ino uint64) {
	if !f.store.Shared() {
		return
	}
	mu := &f.holdMu[ino%holdStripes]
	mu.Lock()
	defer mu.Unlock()
	if f.marks.reuse(ino) {
		return // its mark lingers from the last release (marks.go)
	}
	if err := f.store.Hold(ino); err != nil {
		f.log.Error("mark inode open in the store", "ino", ino, "err", err)
	}
}

// unhold takes the mark back once nothing here holds ino, and notes ino
// as an orphan to reclaim if it lost its last link meanwhile (perhaps
// through another daemon).
func (f *FS) unhold(ino uint64) {
	if !f.store.Shared() {
		return
	}
	mu := &f.holdMu[ino%holdStripes]
	mu.Lock()
	defer mu.Unlock()
	f.mu.Lock()
	again := f.open[ino] != nil
	f.mu.Unlock()
	if again {
		return // opened again meanwhile: the mark stays
	}
	// The mark lingers a while (marks.go), unless the inode has lost its
	// last link as far as the cache knows: then it goes now, as the
	// other daemons wait for it to reclaim the inode.
	if rec, err := f.store.GetInode(ino); err == nil && rec.Nlink > 0 {
		f.marks.keep(ino, false)
		return
	}
	orphan, err := f.store.Unhold(ino)
	if err != nil {
		f.log.Error("unmark inode open in the store", "ino", ino, "err", err)
		return
	}
	if orphan {
		f.mu.Lock()
		f.orphans[ino] = true
		f.mu.Unlock()
	}
}

// heldElsewhere reports a reclaim refused because another daemon holds
// the inode open: it reclaims it when it lets go.
func heldElsewhere(err error) bool {
	return errors.Is(err, metadata.ErrHeld) || errors.Is(err, syscall.ENOENT)
}
