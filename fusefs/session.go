package fusefs

import (
	"slices"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// OpenSessions is the number of open sessions.
func (f *FS) OpenSessions() int { return f.core.OpenSessions() }

// SessionsChanged implements vfs.Frontend: the main views of a user who
// has a session for the first time learn every inode their kernel holds,
// so that a change made through the session view reaches them from then
// on.
func (f *FS) SessionsChanged(fresh []string) {
	for _, user := range fresh {
		for _, v := range f.notify.viewsOf(user) {
			v.learnAll()
		}
	}
}

// learnAll counts every inode go-fuse knows in v's kernel as held, once.
func (v *View) learnAll() {
	var walk func(in *fs.Inode, depth int)
	walk = func(in *fs.Inode, depth int) {
		n, ok := in.Operations().(*node)
		if !ok || depth > 4096 {
			return
		}
		if !v.fs.known.knows(v, n.ino) {
			v.fs.known.learn(v, n.ino)
		}
		for _, ch := range in.Children() {
			walk(ch, depth+1)
		}
	}
	walk(&v.root.Inode, 0)
}

// sharedIn reports whether more than one view's kernel may hold inodes of
// zone z (vfs.Core.SharedIn).
func (f *FS) sharedIn(z shedfs.Zone) bool { return f.core.SharedIn(z) }

// tellUserViews adds, for a change in a per-user zone of a user who has
// had a session, every name item to each of her views other than from:
// her main view and her session views may all hold the name, also as
// absent (the table of absent names, negatives.go, is kept for share/ and
// groups/ only). A user has a few views, and a name a kernel does not
// hold costs it nothing.
func (f *FS) tellUserViews(from *View, z shedfs.Zone, items []inval, byView map[*View][]inval) map[*View][]inval {
	var names []inval
	for _, it := range items {
		if it.name != "" {
			names = append(names, it)
		}
	}
	if len(names) == 0 {
		return byView
	}
	for _, v := range f.notify.viewsOf(vfs.ZoneUser(z)) {
		if v == from {
			continue
		}
		if byView == nil {
			byView = make(map[*View][]inval)
		}
		for _, it := range names {
			if !slices.Contains(byView[v], it) {
				byView[v] = append(byView[v], it)
			}
		}
	}
	return byView
}

// nestedHolder reports whether h nests in another holder (a session in
// its user), which metrics leave out: they carry no per-session labels.
func nestedHolder(h shedfs.Holder) bool {
	_, ok := shedfs.OuterHolder(h)
	return ok
}

// MountSession mounts the view of session ss at mountpoint: its root is
// the scratch tree, with home/ (the user's private tree), output/,
// uploads/ (uploads/ID only), share/, groups/ and trash/.
func (f *FS) MountSession(ss *metadata.Session, mountpoint string, opts vfs.ViewOptions) (*View, error) {
	return f.mount(ss.User, ss, mountpoint, opts)
}

// Session is the id of the session the view belongs to, "" for a main
// view.
func (v *View) Session() string { return v.session }
