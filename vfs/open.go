package vfs

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// openFile is the state of a regular file while any view holds it open:
// one blob descriptor shared by every handle, and the size and times that
// writes have moved ahead of the store. They are persisted at flush, fsync
// and the last release, so a stream of writes costs no transaction each.
type openFile struct {
	ino    uint64
	holder shedfs.Holder

	mu   sync.Mutex
	blob *os.File
	refs int // handles, guarded by openTable.mu
	// closing counts the handles whose descriptor was closed (flushed)
	// and not written through since: when it equals refs, the file's
	// RELEASE is likely on its way (closing.go). Guarded by openTable.mu.
	closing int
	// entry is what acl needs to decide a write; ownership changes made
	// while the file is open update it.
	entry acl.Entry
	// dirty is set when size or mtime differ from the store.
	dirty bool
	// newBlob is set until the blob's directory entry has been made
	// durable by an fsync.
	newBlob   bool
	size      uint64
	persisted uint64 // the size the store has
	// pendingCharge is what this file adds to its holder's pending bytes:
	// Charge(size) - Charge(persisted).
	pendingCharge int64
	mtime         time.Time
	// writeErr is the first write error since the last flush, reported
	// to the closer as close(2) expects.
	writeErr syscall.Errno
	// changed is set when the content changed since it was last handed
	// to the content service; writer is the view's user that changed it.
	changed bool
	writer  string
	// digest hashes the content while it is written in order (digest.go);
	// known is the content the last persist recorded with its digest, nil
	// when it left the file pending for the content worker.
	digest *runningDigest
	known  *shedfs.Content
	// retired are blob descriptors replaced while open (a version kept
	// in the trash), closed with the last handle.
	retired []*os.File
	// held are attributes a SETATTR set while dirty (hold.go).
	held heldAttrs
	// cow says the blob may be shared with a snapshot: the next change
	// copies it first (cow.go).
	cow atomic.Bool
}

// setSize moves the in-memory size and keeps the holder's pending charge
// in step. oi.mu must be held.
func (c *Core) setSizeLocked(oi *openFile, size uint64) {
	oi.size = size
	pc := shedfs.Charge(size) - shedfs.Charge(oi.persisted)
	c.acct.Add(oi.holder, pc-oi.pendingCharge)
	oi.pendingCharge = pc
}

// acquire returns the open state of n, opening the blob on first use.
// The blob is opened outside c.ft.mu, so that opens of different files run
// in parallel; of two first opens of one file, the second closes its
// descriptor and shares the first's. create says n was just made by
// Create for OpenNew (a new blob; marked open in a shared store).
func (c *Core) acquire(n *shedfs.Inode, create bool) (*openFile, syscall.Errno) {
	oi, fresh, e := c.acquireHere(n, create)
	if e == 0 && !fresh && c.store.Shared() && !create {
		// Another daemon may have written the file since this open
		// state was made (close-to-open); a fresh one read the record
		// itself.
		oi.mu.Lock()
		c.followStoreLocked(oi)
		oi.mu.Unlock()
	}
	return oi, e
}

// acquireHere is acquire in this daemon. A first open does not trust n:
// the caller read it before, and meanwhile another open state of the file
// may have come and gone (a writer's open, truncate, write and last
// release between a reader's lookup and its acquire), leaving n's size and
// the blob the caller would open behind. So a first open reads the record
// again after noting the table's clock of closes, opens the blob, and
// starts over when an open state of the same inode closed in between.
// fresh reports a new open state.
func (c *Core) acquireHere(n *shedfs.Inode, create bool) (_ *openFile, fresh bool, _ syscall.Errno) {
	for {
		c.ft.mu.Lock()
		if oi := c.ft.open[n.Ino]; oi != nil {
			oi.refs++
			c.ft.mu.Unlock()
			return oi, false, 0
		}
		// A ghost's blob may be gone already; never make an empty one.
		_, isGhost := c.ft.ghosts[n.Ino]
		since := c.ft.closes.now()
		c.ft.mu.Unlock()
		rec := n
		if !create {
			if cur, err := c.store.GetInode(n.Ino); err == nil && cur.IsRegular() {
				rec = cur
			}
		}
		var blob *os.File
		var err error
		if create {
			blob, err = c.blobs.OpenFresh(n.Ino)
		} else {
			blob, err = c.blobs.OpenFile(n.Ino, !isGhost)
		}
		if err != nil {
			if create {
				// Its create marked it open (Create): take that back
				// before uncreate frees it.
				c.unhold(n.Ino)
			}
			return nil, false, c.Errno("open blob", err)
		}
		if c.afterBlobOpen != nil {
			c.afterBlobOpen(n.Ino)
		}
		c.ft.mu.Lock()
		if oi := c.ft.open[n.Ino]; oi != nil {
			blob.Close()
			oi.refs++
			c.ft.mu.Unlock()
			return oi, false, 0
		}
		if !create && c.ft.closes.persistedSince(n.Ino, since) {
			// Closed meanwhile: rec or blob may be older than what
			// that open state left.
			c.ft.mu.Unlock()
			blob.Close()
			continue
		}
		oi := &openFile{
			ino:       rec.Ino,
			holder:    shedfs.HolderOf(rec.Zone),
			blob:      blob,
			refs:      1,
			entry:     acl.EntryOf(rec),
			size:      rec.Size,
			persisted: rec.Size,
			mtime:     rec.Mtime,
			newBlob:   create,
		}
		if !create && sharedBlob(blob) {
			// Under c.ft.mu, as Freeze links: a snapshot's link is
			// either seen here or marks the open file itself.
			oi.cow.Store(true)
		}
		c.ft.open[n.Ino] = oi
		if c.store.Shared() && !create {
			// Marked open in the store for the other daemons (remote.go),
			// outside c.ft.mu; a file just created was marked by its create.
			c.ft.mu.Unlock()
			c.hold(n.Ino)
			return oi, true, 0
		}
		c.ft.mu.Unlock()
		return oi, true, 0
	}
}

// followStoreLocked takes the size and mtime the store has for oi when
// nothing written here is waiting to be persisted: on a store other
// daemons share, another daemon may have written the file since this
// open state was made, and every handle here reads up to oi.size. The
// record is read under oi.mu, so that it is never older than a persist
// of this daemon's. oi.mu must be held.
func (c *Core) followStoreLocked(oi *openFile) {
	if oi.dirty || oi.size != oi.persisted {
		return
	}
	rec, err := c.store.GetInode(oi.ino)
	if err != nil || !rec.IsRegular() {
		return // gone: the handles keep reading what they had
	}
	oi.size, oi.persisted, oi.mtime = rec.Size, rec.Size, rec.Mtime
}

// lookupOpen returns the open state of ino, or nil.
func (c *Core) lookupOpen(ino uint64) *openFile {
	c.ft.mu.Lock()
	defer c.ft.mu.Unlock()
	return c.ft.open[ino]
}

// release drops one handle of oi: h, or one the core took itself (nil).
// The last one persists, closes the blob and reclaims the inode if it
// was unlinked and nothing else holds it.
func (c *Core) release(oi *openFile, h *Handle) {
	c.ft.mu.Lock()
	oi.refs--
	if h != nil {
		c.unflushLocked(h)
		h.released = true
	}
	last := oi.refs == 0
	orphan := c.ft.orphans[oi.ino]
	c.ft.mu.Unlock()
	if !last {
		return
	}
	if !orphan {
		// Persisted while every view still finds it open, so that none
		// reads the record behind what a flush held (hold.go).
		oi.mu.Lock()
		c.persistLocked(oi)
		oi.mu.Unlock()
	}
	c.ft.mu.Lock()
	if oi.refs > 0 || c.ft.open[oi.ino] != oi {
		c.ft.mu.Unlock()
		return // opened again meanwhile, or closed by that opener
	}
	delete(c.ft.open, oi.ino)
	c.ft.closes.tick(oi.ino)
	c.releasedLocked(oi)
	c.ft.mu.Unlock()
	c.closeOpen(oi)
}

// closeOpen ends the open state of an inode no handle holds any more.
func (c *Core) closeOpen(oi *openFile) {
	c.unhold(oi.ino)
	c.ft.mu.Lock()
	orphan := c.ft.orphans[oi.ino]
	c.ft.mu.Unlock()
	oi.mu.Lock()
	if orphan {
		// Its charge goes with the inode at reclaim.
		c.acct.Add(oi.holder, -oi.pendingCharge)
		oi.pendingCharge = 0
	} else if c.persistLocked(oi) == 0 && oi.changed && c.content != nil {
		oi.changed = false
		if oi.known == nil {
			c.content.Changed(oi.ino, nil)
		}
	}
	oi.blob.Close()
	for _, b := range oi.retired {
		b.Close()
	}
	oi.mu.Unlock()
	c.blobs.Closed(oi.ino)
	c.reclaimIfIdle(oi.ino)
}

// persistLocked writes the in-memory size and mtime to the store, moving
// the pending charge into the stored usage. oi.mu must be held.
func (c *Core) persistLocked(oi *openFile) syscall.Errno {
	if !oi.dirty {
		return 0
	}
	size, mtime, held := oi.size, oi.mtime, oi.held
	unlock := c.acct.Lock(oi.holder)
	defer unlock()
	err := c.persistWritten(oi, func(n *shedfs.Inode) error {
		n.Size = size
		n.Mtime = mtime
		n.Ctime = mtime
		held.apply(n)
		return nil
	})
	if err != nil {
		return c.Errno("persist size", err)
	}
	c.ft.persists.tick(oi.ino)
	c.acct.Add(oi.holder, -oi.pendingCharge)
	oi.pendingCharge = 0
	oi.persisted = size
	oi.dirty = false
	oi.held = heldAttrs{}
	return 0
}

// overlay puts the not yet persisted size and times of an open inode over
// a stored record.
func (c *Core) overlay(n *shedfs.Inode) {
	if !n.IsRegular() {
		return
	}
	oi := c.lookupOpen(n.Ino)
	if oi == nil {
		return
	}
	oi.mu.Lock()
	if oi.dirty {
		n.Size = oi.size
		n.Mtime = oi.mtime
		n.Ctime = oi.mtime
		oi.held.apply(n)
	}
	oi.mu.Unlock()
}

// resize admits and applies a size change of an open file (write,
// truncate, fallocate) under its holder's lock: grow is checked against
// the mode, the max file size and the quota; the new size is reserved as
// pending before the lock is dropped. blocks is how much disk apply may
// allocate on the host (holes filled included), which the store's disk
// must have room for. apply does the blob work; on failure nothing is
// charged. oi.mu must be held.
func (v *View) resizeLocked(at At, oi *openFile, op acl.Op, newSize uint64, blocks int64, apply func() (uint64, error)) syscall.Errno {
	c := v.c
	a := v.Actor()
	grows := shedfs.Charge(newSize) > shedfs.Charge(oi.size) || newSize > oi.size
	// A blob shared with a snapshot is copied first, and the old
	// content's charge becomes the snapshot's, the holder's (cow.go).
	copyUp := c.needsCopyUp(oi)
	var copyCharge int64
	var group []uint64
	if copyUp {
		// Shared by a fork, the old content may stay a live file's:
		// charged, if at all, once the copy shows whose it is
		// (cow_fork.go).
		if group = c.forkGroup(oi.ino); len(group) == 0 {
			copyCharge = shedfs.Charge(oi.size)
		}
	}
	decide := func(q acl.Quota) acl.Decision {
		if copyCharge > 0 {
			if d := acl.SnapshotCopy(q, copyCharge); !d.Allowed() {
				return d
			}
			q.Usage.Bytes += copyCharge
		}
		if op != acl.OpWrite {
			return acl.Truncate(a, oi.entry, q, oi.size, newSize)
		}
		if !grows {
			return acl.Write(a, oi.entry, q, oi.size, oi.size)
		}
		return acl.Write(a, oi.entry, q, oi.size, newSize)
	}
	g := Growth{Disk: blocks, Decide: decide}
	if grows {
		// Charged to the holder, pending until persisted, and seen by
		// other daemons sharing the store in this one's allotment.
		g.Holder, g.Bytes, g.Allot = oi.holder, shedfs.Charge(newSize)-shedfs.Charge(oi.size), true
	}
	if copyUp {
		g.Holder, g.Bytes, g.Disk = oi.holder, g.Bytes+copyCharge, g.Disk+int64(oi.size)
		g.Hold = !grows
	}
	adm, d, aerr := c.Admit(g)
	if aerr != nil {
		return c.Errno("quota", aerr)
	}
	if !d.Allowed() {
		return v.deny(op, at, "", d)
	}
	if copyUp {
		// Under the holder's lock (Allot or Hold): charged before any
		// other admission of the holder decides.
		if err := c.copyUpLocked(oi, copyCharge, group); err != nil {
			adm.Done()
			return c.Errno(op.String(), err)
		}
	}
	old := oi.size
	if grows {
		// Pending before the blob grows, so a concurrent admission
		// counts this write.
		c.setSizeLocked(oi, newSize)
	}
	adm.Done()
	if !oi.changed {
		// The first change since the content was persisted: no reader
		// may go by the old verdict from here on. Marked after the
		// holder's lock is given back: it is a store commit (an etcd
		// round trip on a shared store).
		if e := v.contentChanging(at); e != 0 {
			if oi.size != old {
				c.setSizeLocked(oi, old) // nothing was written
			}
			return e
		}
	}
	if err := c.unshareLocked(oi); err != nil {
		if oi.size != old {
			c.setSizeLocked(oi, old) // nothing was written
		}
		return c.Errno(op.String(), err)
	}
	got, err := apply()
	if got != oi.size {
		// A short write gives back what it reserved; a shrink lands.
		c.setSizeLocked(oi, got)
	}
	if err != nil {
		return c.Errno(op.String(), err)
	}
	if op != acl.OpWrite {
		c.resizedLocked(oi, got)
	}
	oi.mtime = time.Now()
	oi.dirty = true
	oi.changed = true
	oi.writer = v.user
	return 0
}

// truncate sets the size of regular file rec, through its open state so
// concurrent writers and this agree, and persists it at once.
func (v *View) truncate(at At, rec *shedfs.Inode, size uint64) ([]Version, syscall.Errno) {
	c := v.c
	oi, e := c.acquire(rec, false)
	if e != 0 {
		return nil, e
	}
	defer c.release(oi, nil)
	oi.mu.Lock()
	old := oi.size
	e = v.resizeLocked(at, oi, acl.OpTruncate, size, 0, func() (uint64, error) {
		done, err := c.blobs.Resizing(oi.ino, int64(size))
		if err != nil {
			return old, err
		}
		defer done()
		if err := oi.blob.Truncate(int64(size)); err != nil {
			return old, err
		}
		return size, nil
	})
	if e == 0 {
		e = c.persistLocked(oi)
	}
	known := oi.known
	if e == 0 {
		oi.changed = false
	}
	oi.mu.Unlock()
	if e != 0 {
		return nil, e
	}
	v.changed("truncate", at, "", int64(size))
	v.contentChanged(at, false, 0, known)
	vs := c.contentChanged(at.Zone, at.Ino, nil)
	c.fanOut(v, at.Zone, DataOf(at.Ino, int64(size), 0))
	return vs, 0
}

// truncated records and announces that at's content was cut to size
// (kept as a version in the trash, keepVersion).
func (v *View) truncated(at At, size int64) []Version {
	v.changed("truncate", at, "", size)
	vs := v.c.contentChanged(at.Zone, at.Ino, nil)
	v.c.fanOut(v, at.Zone, DataOf(at.Ino, size, 0))
	return vs
}

// Truncate sets regular file rec's size by name (a truncate(2), or a
// setattr of the size without a handle's own state): to zero, its content
// is kept as a version in the trash first when the trash is on.
func (v *View) Truncate(at At, rec *shedfs.Inode, size uint64) ([]Version, syscall.Errno) {
	if rec.IsDir() {
		return nil, syscall.EISDIR
	}
	if !rec.IsRegular() {
		return nil, syscall.EINVAL
	}
	if d := v.editLocked(at.Ino, true); !d.Allowed() {
		return nil, v.deny(acl.OpTruncate, at, "", d)
	}
	if size != 0 || !v.keepVersion(at, rec) {
		return v.truncate(at, rec, size)
	}
	return v.truncated(at, 0), 0
}
