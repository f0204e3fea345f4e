package fusefs

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
)

// sessionTable is what the views need to know of the open sessions
// (docs/design.md, "Sessions"): each session's placeholder
// home/sessions/ID, which the main view shows as the session's scratch
// (read-only) and session views hide; and the users that had a session
// since the daemon started, whose per-user zones are then seen by more
// than one view and so are invalidated across views like shared ones.
type sessionTable struct {
	// open and anyMulti let the callbacks of a store without sessions
	// skip the lock.
	open     atomic.Int64
	anyMulti atomic.Bool

	mu            sync.RWMutex
	byPlaceholder map[uint64]metadata.Session
	// pinned are the directories an open session relies on (its
	// placeholder, the sessions/ holding it, its uploads/ID): no view
	// may remove, replace or move them while it is open.
	pinned map[uint64]metadata.Session
	multi  map[string]bool
}

// placeholder returns the open session whose placeholder is ino.
func (t *sessionTable) placeholder(ino uint64) (metadata.Session, bool) {
	if t.open.Load() == 0 {
		return metadata.Session{}, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	ss, ok := t.byPlaceholder[ino]
	return ss, ok
}

// pin returns the open session that relies on directory ino.
func (t *sessionTable) pin(ino uint64) (metadata.Session, bool) {
	if t.open.Load() == 0 {
		return metadata.Session{}, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	ss, ok := t.pinned[ino]
	return ss, ok
}

// multiView reports whether user's per-user zones may be in more than one
// view's kernel.
func (t *sessionTable) multiView(user string) bool {
	if !t.anyMulti.Load() {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.multi[user]
}

// OpenSessions is the number of open sessions.
func (f *FS) OpenSessions() int { return int(f.sessions.open.Load()) }

// SessionsChanged reloads the open sessions after one opened or closed.
// The main views of a user who has a session for the first time learn
// every inode their kernel holds, so that a change made through the
// session view reaches them from then on.
func (f *FS) SessionsChanged() error {
	list, err := f.store.ListSessions("")
	if err != nil {
		return fmt.Errorf("load sessions: %w", err)
	}
	by := make(map[uint64]metadata.Session, len(list))
	pinned := make(map[uint64]metadata.Session, 3*len(list))
	for _, ss := range list {
		for _, ino := range f.sessionDirs(&ss) {
			pinned[ino] = ss
		}
	}
	var fresh []string
	t := &f.sessions
	t.mu.Lock()
	if t.multi == nil {
		t.multi = make(map[string]bool)
	}
	for _, ss := range list {
		by[ss.Placeholder] = ss
		if !t.multi[ss.User] {
			t.multi[ss.User] = true
			fresh = append(fresh, ss.User)
		}
	}
	t.byPlaceholder = by
	t.pinned = pinned
	t.open.Store(int64(len(by)))
	t.anyMulti.Store(len(t.multi) > 0)
	t.mu.Unlock()
	for _, user := range fresh {
		for _, v := range f.notify.viewsOf(user) {
			v.learnAll()
		}
	}
	return nil
}

// sessionDirs are the directories session ss relies on: its
// placeholder, the directory holding that, and its uploads/ID.
func (f *FS) sessionDirs(ss *metadata.Session) []uint64 {
	dirs := []uint64{ss.Placeholder}
	if p, err := f.store.GetInode(ss.Placeholder); err == nil {
		dirs = append(dirs, p.Parent)
	}
	if u, err := f.store.GetUser(ss.User); err == nil {
		if up, err := f.store.Lookup(u.Roots.Uploads, ss.ID); err == nil {
			dirs = append(dirs, up.Ino)
		}
	}
	return dirs
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
// zone z: always for share and group zones, and for a user's own zones
// once the user has had a session.
func (f *FS) sharedIn(z shedfs.Zone) bool {
	if shared(z) {
		return true
	}
	return f.sessions.multiView(zoneUser(z))
}

// zoneUser is the user whose views show per-user zone z (her private
// tree, output/, uploads/, or one of her sessions' scratch).
func zoneUser(z shedfs.Zone) string {
	if z.Kind == metadata.ZoneSession {
		user, _ := shedfs.SplitSession(z.Principal)
		return user
	}
	return z.Principal
}

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
	for _, v := range f.notify.viewsOf(zoneUser(z)) {
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

// sessionView fills the fields of a session's view: its root, its
// uploads/ and the root's zone.
func (v *View) sessionView(ss *metadata.Session) (shedfs.Zone, error) {
	if ss == nil {
		v.rootIno, v.uploadsIno = v.roots.Private, v.roots.Uploads
		return zones.PrivateZone(v.user), nil
	}
	up, err := v.fs.store.Lookup(v.roots.Uploads, ss.ID)
	if err != nil {
		return shedfs.Zone{}, fmt.Errorf("uploads/%s of session: %w", ss.ID, err)
	}
	v.session, v.rootIno, v.uploadsIno = ss.ID, ss.Root, up.Ino
	return zones.SessionZone(ss.User, ss.ID), nil
}

// sessionOverlay is what this view shows for rec, a directory entry found
// in the store: a session's placeholder is that session's scratch root
// in the user's main view and does not exist in a session view (each
// session sees no other's scratch).
func (v *View) sessionOverlay(rec *shedfs.Inode) (*shedfs.Inode, syscall.Errno) {
	ss, ok := v.fs.sessions.placeholder(rec.Ino)
	if !ok || ss.User != v.user {
		return rec, 0
	}
	if v.session != "" {
		return nil, syscall.ENOENT
	}
	root, err := v.fs.store.GetInode(ss.Root)
	if err != nil {
		return nil, v.fs.errno("session root", err)
	}
	return root, 0
}

// sessionTarget is what a removal or rename in any view decides about
// rec: a directory an open session relies on (its placeholder, sessions/,
// its uploads/ID) is taken as a zone root, which no view may remove,
// replace or move (reserved_name) while the session is open.
func (v *View) sessionTarget(rec *shedfs.Inode) *shedfs.Inode {
	if _, ok := v.fs.sessions.pin(rec.Ino); !ok {
		return rec
	}
	pinned := *rec
	pinned.Parent = 0
	return &pinned
}

// viewPath is where rel, a path within zone z, appears in this view.
func (v *View) viewPath(z shedfs.Zone, rel string) string {
	if v.session != "" {
		return zones.SessionViewPath(v.user, v.session, z, rel)
	}
	return zones.ViewPath(v.user, z, rel)
}

// zonePath is the inverse of viewPath.
func (v *View) zonePath(p string) (shedfs.Zone, string, bool) {
	if v.session != "" {
		return zones.SessionZonePath(v.user, v.session, p)
	}
	return zones.ZonePath(v.user, p)
}

// trashHolders are the holders whose kept files this view's trash/
// shows: the user's, share's, the groups', and a session view's own.
func (v *View) trashHolders(groups []string) []shedfs.Holder {
	holders := []shedfs.Holder{shedfs.HolderOf(zones.PrivateZone(v.user)), shedfs.HolderOf(zones.ShareZone())}
	for _, g := range groups {
		holders = append(holders, shedfs.HolderOf(zones.GroupZone(g)))
	}
	if v.session != "" {
		holders = append(holders, shedfs.HolderOf(zones.SessionZone(v.user, v.session)))
	}
	return holders
}
