package vfs

import (
	"time"

	"github.com/shedfs/shedfs"
)

// Files is the open-file table as the namespace operations need it: the
// state of files open in some view (size and times ahead of the store,
// attributes held until the last release), orphans (inodes without links
// that a handle holds) and ghosts (reclaimed inodes kept for requests
// under way). fusefs keeps it and sets it (SetFiles); a core without one
// (the command line) has no open file.
type Files interface {
	// Clock is the persist clock's reading, taken before a record is
	// read; Overlaid lays the open state over rec, read after since,
	// reading it again when its file was persisted meanwhile.
	Clock() uint64
	Overlaid(rec *shedfs.Inode, since uint64) *shedfs.Inode
	// Ghost is the last record of a reclaimed inode still in its grace
	// period, or nil.
	Ghost(ino uint64) *shedfs.Inode
	// AddGhost keeps rec reachable in case its record goes; DropGhost
	// takes it back when it did not.
	AddGhost(rec *shedfs.Inode)
	DropGhost(ino uint64)
	// Settle persists what an open file holds before its stored record
	// is read or moved.
	Settle(ino uint64)
	// Orphan notes that ino has no link (an O_TMPFILE file): it goes
	// with its last handle; Linked that it got one.
	Orphan(ino uint64)
	Linked(ino uint64)
	// ReclaimIfUnused reclaims n if it lost its last link and nothing
	// holds it; ReclaimIfIdle reclaims an orphan nothing holds.
	ReclaimIfUnused(n *shedfs.Inode)
	ReclaimIfIdle(ino uint64)
	// UpdateHeld is Store.Update for a change of times and mode: held on
	// a file open and dirty, persisted with its size.
	UpdateHeld(ino uint64, fn func(n *shedfs.Inode) error) (*shedfs.Inode, error)
	// SetMtime keeps the mtime set on an open file, over its writes'.
	SetMtime(ino uint64, t time.Time)
}

// SetFiles sets the open-file table; set before any view is served.
func (c *Core) SetFiles(f Files) { c.files = f }

// noFiles is the open-file table of a core no door holds files open in.
type noFiles struct{ c *Core }

func (n noFiles) Clock() uint64 { return 0 }
func (n noFiles) Overlaid(rec *shedfs.Inode, since uint64) *shedfs.Inode {
	n.c.Overlay(rec)
	return rec
}
func (noFiles) Ghost(uint64) *shedfs.Inode { return nil }
func (noFiles) AddGhost(*shedfs.Inode)     {}
func (noFiles) DropGhost(uint64)           {}
func (noFiles) Settle(uint64)              {}
func (noFiles) Orphan(uint64)              {}
func (noFiles) Linked(uint64)              {}
func (n noFiles) ReclaimIfUnused(rec *shedfs.Inode) {
	if rec != nil && rec.Nlink == 0 {
		n.c.reclaim(rec.Ino)
	}
}
func (n noFiles) ReclaimIfIdle(ino uint64) { n.c.reclaim(ino) }
func (n noFiles) UpdateHeld(ino uint64, fn func(*shedfs.Inode) error) (*shedfs.Inode, error) {
	return n.c.store.Update(ino, fn, nil)
}
func (noFiles) SetMtime(uint64, time.Time) {}
