package vfs

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/zones"
)

// The admin's deletions that no user's rule decides: kept files purged
// for good (shedfs trash purge) and the names of a quarantined file
// (shedfs quarantine delete). Like a view's rm, they free what nothing
// holds, keep what is still open until its last handle goes, and tell
// every view's kernel (Freed, and the admin's fan-out of Frontend.Changed).

// Purged is what PurgeKept deleted: the kept files, and the bytes they
// were charged.
type Purged struct {
	Entries int
	Bytes   int64
}

// KeptFile is a kept file to purge as the admin listed it: its inode, its
// name under trash/ (for the operator's line) and its size.
type KeptFile struct {
	Ino   uint64
	Entry string
	Size  uint64
}

// PurgeKept deletes kept files for good, those of kept still in the
// trash; a file still open becomes an orphan that goes with its last
// handle. The purge is recorded once, by the admin.
func (c *Core) PurgeKept(kept []KeptFile) (Purged, error) {
	var res Purged
	var gone []*shedfs.Inode
	defer func() {
		c.Freed(gone, FreedPurge, false)
		c.TrashChanged()
	}()
	for _, e := range kept {
		n, freed, err := c.store.PurgeTrash(e.Ino, c.Unused)
		if errors.Is(err, syscall.ENOENT) {
			continue
		}
		if err != nil {
			return res, adminErr(err, "purge "+e.Entry)
		}
		if freed {
			gone = append(gone, n)
		} else {
			// Held open: it goes, with its charge, at its last
			// release, not at the next start.
			c.ReclaimIfUnused(n)
		}
		res.Entries++
		res.Bytes += shedfs.Charge(e.Size)
	}
	c.Admin("").Record(shedfs.Zone{}, "/"+zones.NameTrash, "admin_trash_purge", res.Bytes)
	return res, nil
}

// DeleteNames removes names, every name of one file (a quarantined one),
// from their directories; the file goes once no view holds it, and every
// kernel that looked a name up forgets it at once. A name gone meanwhile
// is skipped.
func (c *Core) DeleteNames(names []metadata.Name) error {
	a := c.Admin("")
	for _, nm := range names {
		n, err := c.store.Unlink(nm.Parent, nm.Name, false)
		if errors.Is(err, syscall.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete %s: %w", nm.Path, err)
		}
		a.entryChanged(nm.Parent, n.Zone, nm.Name, n, true)
	}
	return nil
}
