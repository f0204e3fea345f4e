package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/vfs"
)

// A view presents every entry as owned by one uid:gid when its user (or
// the daemon's default) says so (vfs.ViewOptions.ForceOwner). The owner
// can change while the view is mounted (shedfs user set --uid/--gid): the
// presentation is read on every attribute reply, and what the kernel
// cached under the old owner is invalidated, so that the next stat shows
// the new one without a remount, open files and working directories
// untouched.

// presentedOwner is the owner every entry of v shows, and whether one is
// forced at all.
func (v *View) presentedOwner() (fuse.Owner, bool) {
	o := v.owner.Load()
	if o == nil {
		return fuse.Owner{}, false
	}
	return *o, true
}

// setOwner makes v present opts' owner from now on.
func (v *View) setOwner(opts vfs.ViewOptions) {
	if !opts.ForceOwner {
		v.owner.Store(nil)
		return
	}
	v.owner.Store(&fuse.Owner{Uid: opts.Uid, Gid: opts.Gid})
}

// OwnerChanged makes every view of user present opts' owner, and
// invalidates the attributes of every inode its kernel holds.
func (f *FS) OwnerChanged(user string, opts vfs.ViewOptions) {
	for _, v := range f.notify.viewsOf(user) {
		v.setOwner(opts)
		v.invalidateAllAttrs()
	}
}

// invalidateAllAttrs tells v's kernel to forget the attributes (not the
// pages) of every inode of the view it knows: the tree of kernel-side
// inodes from the root, trash/ and groups/ included.
func (v *View) invalidateAllAttrs() {
	seen := map[*fs.Inode]bool{}
	var walk func(in *fs.Inode, depth int)
	walk = func(in *fs.Inode, depth int) {
		if seen[in] || depth > 4096 {
			return
		}
		seen[in] = true
		// Offset -1: attributes only, the page cache stays.
		in.NotifyContent(-1, 0)
		for _, ch := range in.Children() {
			walk(ch, depth+1)
		}
	}
	walk(&v.root.Inode, 0)
}
