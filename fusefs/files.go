package fusefs

import (
	"time"

	"github.com/shedfs/shedfs"
)

// coreFiles is the open-file table of the views as the core's namespace
// operations need it (vfs.Files).
type coreFiles struct{ f *FS }

func (c coreFiles) Clock() uint64 { return c.f.persists.now() }

func (c coreFiles) Overlaid(rec *shedfs.Inode, since uint64) *shedfs.Inode {
	return c.f.overlaid(rec, since)
}

func (c coreFiles) Ghost(ino uint64) *shedfs.Inode { return c.f.ghostOf(ino) }
func (c coreFiles) AddGhost(rec *shedfs.Inode)     { c.f.addGhost(rec) }
func (c coreFiles) DropGhost(ino uint64)           { c.f.dropGhost(ino) }
func (c coreFiles) Settle(ino uint64)              { c.f.settle(ino) }

func (c coreFiles) Orphan(ino uint64) {
	c.f.mu.Lock()
	c.f.orphans[ino] = true
	c.f.mu.Unlock()
}

func (c coreFiles) Linked(ino uint64) {
	c.f.mu.Lock()
	delete(c.f.orphans, ino)
	c.f.mu.Unlock()
}

func (c coreFiles) ReclaimIfUnused(n *shedfs.Inode) { c.f.reclaimIfUnused(n) }
func (c coreFiles) ReclaimIfIdle(ino uint64)        { c.f.reclaimIfIdle(ino) }

func (c coreFiles) UpdateHeld(ino uint64, fn func(n *shedfs.Inode) error) (*shedfs.Inode, error) {
	return c.f.updateHeld(ino, fn, nil)
}

func (c coreFiles) SetMtime(ino uint64, t time.Time) {
	if oi := c.f.lookupOpen(ino); oi != nil {
		oi.mu.Lock()
		oi.mtime = t
		oi.mu.Unlock()
	}
}
