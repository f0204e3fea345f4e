package vfs

import (
	"time"

	"github.com/shedfs/shedfs"
)

// Frontend is a door that keeps state the core's changes must reach: the
// FUSE views of fusefs implement it, with kernels caching names,
// attributes and pages. Whatever changes
// the store outside a frontend (the admin API, another frontend) tells
// every attached frontend through the core, so that a change made through
// any door reaches every view's kernel the same way. The methods must not
// block on the caller's locks; they are called without any of the core's.
type Frontend interface {
	// Holds reports whether a handle of the frontend holds ino open (a
	// file or a directory), which keeps a kept file from being freed.
	Holds(ino uint64) bool
	// Overlay lays what the frontend holds of an open file and has not
	// persisted yet (size, times) over rec.
	Overlay(rec *shedfs.Inode)
	// MembershipChanged: user's groups changed.
	MembershipChanged(user string)
	// OwnerChanged: the views of user present entries as opts says from
	// now on (shedfs user set --uid/--gid); what their kernels cached of
	// the old owner is invalidated.
	OwnerChanged(user string, opts ViewOptions)
	// TrashChanged: kept files came or went.
	TrashChanged()
	// TrashFreed: kept files the store deleted for good, for why
	// (purge, evict, expire). Their blobs are the frontend's to remove
	// once no request of it is under way; removed says the core removed
	// them already (the disk needed the room at once).
	TrashFreed(gone []*shedfs.Inode, why string, removed bool)
	// SettingsChanged: the store-wide settings changed.
	SettingsChanged()
	// LocksLost: file locks taken through v on inos were lost with the
	// lease on a shared store (filelocks_lost.go); what v's kernel caches
	// of their data must go, so that reads reach the core and fail.
	LocksLost(v *View, inos []uint64)
	// SessionsChanged: a session opened or closed; fresh are the users
	// who have a session for the first time since the daemon started.
	SessionsChanged(fresh []string)
	// Changed: an operation through view from changed what items name,
	// in zone z. The frontend tells the kernels that hold them, but
	// from's own (its door updates that itself, with what the operation
	// answered).
	Changed(from *View, z shedfs.Zone, items []Change)
}

// Change is one thing a view's kernel may cache that an operation
// changed: an inode's attributes or data, a directory's listing, or a
// name in a directory.
type Change struct {
	// Ino is the inode, or the directory holding Name.
	Ino  uint64
	Name string
	// Off and Len are the data range of an inode from Off (Len 0: to
	// the end); Off < 0 means its attributes only.
	Off, Len int64
	// Was is, for a name, the inode it named before the change
	// (NoneBefore for a new name), so that only the kernels holding
	// that inode or the name as absent are told; 0: every kernel
	// holding the directory.
	Was uint64
}

// NoneBefore is Change.Was of a name that did not exist.
const NoneBefore = ^uint64(0)

// AttrOf changes an inode's attributes only.
func AttrOf(ino uint64) Change { return Change{Ino: ino, Off: -1} }

// DataOf changes an inode's attributes and data from off.
func DataOf(ino uint64, off, n int64) Change { return Change{Ino: ino, Off: off, Len: n} }

// DirOf changes a directory's attributes and listing.
func DirOf(dir uint64) Change { return Change{Ino: dir} }

// NameWas changes a name in a directory that named inode was before
// (NoneBefore if it did not exist).
func NameWas(dir uint64, name string, was uint64) Change {
	return Change{Ino: dir, Name: name, Was: was}
}

// fanOut tells every frontend of a change made through view from.
func (c *Core) fanOut(from *View, z shedfs.Zone, items ...Change) {
	for _, f := range c.attached() {
		f.Changed(from, z, items)
	}
}

// Attach adds a frontend that is told of every change from now on.
func (c *Core) Attach(f Frontend) {
	c.mu.Lock()
	c.frontends = append(c.frontends, f)
	c.mu.Unlock()
}

// attached returns the frontends, for a fan-out outside c.mu.
func (c *Core) attached() []Frontend {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frontends
}

// Unused reports whether no frontend holds ino open. The store asks it
// inside its transactions that free inodes (unlink, trash eviction).
func (c *Core) Unused(ino uint64) bool {
	if !c.unusedHere(ino) {
		return false
	}
	for _, f := range c.attached() {
		if f.Holds(ino) {
			return false
		}
	}
	return true
}

// Stat returns the record of ino as the doors see it: with the size and
// times of an open file not yet persisted laid over it.
func (c *Core) Stat(ino uint64) (*shedfs.Inode, error) {
	rec, err := c.store.GetInode(ino)
	if err != nil {
		return nil, err
	}
	c.Overlay(rec)
	return rec, nil
}

// Overlay lays over rec, read from the store, what Stat would: the size
// and times of an open file not yet persisted. For a door that reads many
// records in one transaction (a folder page of the link server).
func (c *Core) Overlay(rec *shedfs.Inode) {
	c.overlay(rec)
	for _, f := range c.attached() {
		f.Overlay(rec)
	}
}

// MembershipChanged tells the frontends that the groups of users changed.
func (c *Core) MembershipChanged(users ...string) {
	for _, f := range c.attached() {
		for _, u := range users {
			f.MembershipChanged(u)
		}
	}
}

// OwnerChanged tells the frontends that the views of user present
// entries as opts says from now on: a user's uid/gid changed.
func (c *Core) OwnerChanged(user string, opts ViewOptions) {
	for _, f := range c.attached() {
		f.OwnerChanged(user, opts)
	}
}

// TrashChanged tells the frontends that kept files came or went.
func (c *Core) TrashChanged() {
	for _, f := range c.attached() {
		f.TrashChanged()
	}
}

// SettingsChanged reloads the store-wide settings in the core and in
// every frontend.
func (c *Core) SettingsChanged() {
	c.loadSettings()
	for _, f := range c.attached() {
		f.SettingsChanged()
	}
}

// Freed takes kept files the store deleted for good (a purge, an
// eviction, an expiry): the frontends keep them for requests under way
// and remove their blobs after; without a frontend, or when removed is
// set, the core removes the blobs at once. Evictions and expiries, which
// nobody asked for, are audited here; purges by whoever asked.
func (c *Core) Freed(gone []*shedfs.Inode, why string, removed bool) {
	if len(gone) == 0 {
		return
	}
	fs := c.attached()
	if len(fs) == 0 && !removed {
		for _, n := range gone {
			if n.IsRegular() {
				c.removeBlob(n.Ino)
			}
		}
		removed = true
	}
	if !removed {
		c.ghostFreed(gone)
	}
	for _, f := range fs {
		f.TrashFreed(gone, why, removed)
	}
	if why != FreedPurge {
		c.recordFreed(why, gone)
	}
}

// Why kept files went for good (Freed).
const (
	FreedPurge  = "purge"
	FreedEvict  = "evict"
	FreedExpire = "expire"
)

// recordFreed puts kept files that went for good without anyone asking
// into the audit trail: one record each, by the daemon ("-"), with the
// zone and the size; the trash record that knew the path is gone.
func (c *Core) recordFreed(why string, gone []*shedfs.Inode) {
	if !c.Recording() {
		return
	}
	now := time.Now()
	for _, n := range gone {
		c.Record(shedfs.Event{Time: now, User: shedfs.NoUser, Zone: n.Zone, Op: "trash_" + why, Bytes: int64(n.Size)})
	}
}

// reclaim frees an inode without links that nothing holds: its record,
// its charge and its blob.
func (c *Core) reclaim(ino uint64) {
	n, err := c.store.Reclaim(ino)
	if err != nil {
		c.log.Error("reclaim inode", "ino", ino, "err", err)
		return
	}
	if n != nil && n.IsRegular() {
		c.removeBlob(ino)
	}
}
