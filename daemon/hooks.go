package daemon

import (
	"github.com/shedfs/shedfs"
)

// This file is how admin changes made outside any view (membership,
// imports, ownership overrides) reach the views of a running daemon. The
// views cache names and attributes in the kernel and keep per-handle
// state, so the daemon must tell them; the CLI's direct path has no views
// and needs none of this.

// membershipChanged reloads the groups of each user in its views.
func (d *Daemon) membershipChanged(users ...string) {
	for _, u := range users {
		d.fs.MembershipChanged(u)
	}
}

// entryChanged passes a name changed by an import to the views, which
// reclaim a replaced inode once none of them holds it.
func (d *Daemon) entryChanged(dir uint64, name string, replaced *shedfs.Inode) {
	d.fs.EntryChanged(dir, name, replaced)
}

// inodeChanged passes an ownership change made by the admin to the views.
func (d *Daemon) inodeChanged(ino uint64) {
	d.fs.InodeChanged(ino)
}

// record puts an admin change into the audit trail the views write to.
func (d *Daemon) record(e shedfs.Event) {
	d.fs.Record(e)
}
