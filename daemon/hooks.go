package daemon

import (
	"github.com/shedfs/shedfs/metadata"
)

// This file is how admin changes made outside any view (membership,
// imports, ownership overrides) reach the views of a running daemon. The
// views cache names and attributes in the kernel and keep per-handle
// state, so the daemon must tell them; the CLI's direct path has no views
// and needs none of this.

// entryNotifier is what the FUSE layer offers to push a changed name to
// every view, and to reclaim an inode that lost its last name once no view
// holds it. It is looked up on the FS at run time so that the daemon works
// (with the kernel's entry timeout as the only bound on staleness, and
// replaced inodes reclaimed at the next stop) until fusefs provides it.
type entryNotifier interface {
	EntryChanged(dir uint64, name string, replaced *metadata.Inode)
}

// inodeNotifier is what the FUSE layer offers to reload an inode's
// ownership into open handles and drop its cached attributes in every
// view; looked up at run time like entryNotifier.
type inodeNotifier interface {
	InodeChanged(ino uint64)
}

// membershipChanged reloads the groups of each user in its views.
func (d *Daemon) membershipChanged(users ...string) {
	for _, u := range users {
		d.fs.MembershipChanged(u)
	}
}

// entryChanged passes a name changed by an import to the views. Without
// support in the FUSE layer a replaced inode stays an orphan, which the
// daemon reclaims when it stops (or the next start does).
func (d *Daemon) entryChanged(dir uint64, name string, replaced *metadata.Inode) {
	if n, ok := any(d.fs).(entryNotifier); ok {
		n.EntryChanged(dir, name, replaced)
		return
	}
	if replaced != nil && replaced.Nlink == 0 {
		d.log.Debug("replaced inode kept until the views let go of it", "ino", replaced.Ino)
	}
}

// inodeChanged passes an ownership change made by the admin to the views.
func (d *Daemon) inodeChanged(ino uint64) {
	if n, ok := any(d.fs).(inodeNotifier); ok {
		n.InodeChanged(ino)
	}
}
