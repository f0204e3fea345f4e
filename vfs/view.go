package vfs

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/zones"
)

// DoorFUSE is the door of the FUSE views.
const DoorFUSE = "fuse"

// View is one user's world as one door serves it, whatever the protocol:
// who it is for (the user, a session, the view's options), where its root
// and its reserved names lead, and the user's groups as the view last
// loaded them. The namespace operations (ops.go) are its methods, so
// that every door asks the same rules and records the same trail.
type View struct {
	c    *Core
	door string
	user string
	// id tells this view's lock owners from other views'.
	id uint64
	// tookLocks is set once a lock was asked through the view, so that
	// its closes skip the lock table until then (filelocks_ops.go).
	tookLocks atomic.Bool
	// session is the id of a session's view, "" for a main view.
	session string
	roots   shedfs.Roots
	// root is the view root (the private root, or the session's scratch
	// root), uploads what uploads/ shows, rootZone the root's zone.
	root, uploads uint64
	rootZone      shedfs.Zone
	opts          ViewOptions

	// Kernel is the door's own state of the view (a fusefs view), handed
	// back to the frontends in Changed so that a door can tell its own
	// kernel from the others; nil for a door without one.
	Kernel any

	mu     sync.Mutex
	groups []string // the user's groups, reloaded on membership changes

	// open is what the view holds open, released by Close.
	open viewOpen
	// links is the view's share-by-link state (links.go).
	links viewLinks

	// onRefusal, when set, is told each refusal's decision (OnRefusal).
	onRefusal func(acl.Decision)
	// token and tokenReason name the bearer token of an agent door's
	// request, recorded with every event of the view (SetToken).
	token, tokenReason string
}

// viewOpen is what one view holds open: its file handles and its open
// directories (counted per inode).
type viewOpen struct {
	mu     sync.Mutex
	files  map[*Handle]struct{}
	dirs   map[uint64]int
	closed bool
}

// OnRefusal has fn told the decision of each refusal of a rule made
// through v, after it is recorded: a door that answers with more than an
// errno (a tool call's typed error names the rule) sets it on a view of
// its own, before the view is used.
func (v *View) OnRefusal(fn func(acl.Decision)) { v.onRefusal = fn }

// SetToken names the bearer token (its id and reason) a door's request
// came with, so that every change and refusal through v is recorded with
// it. Set before the view is used.
func (v *View) SetToken(id, reason string) { v.token, v.tokenReason = id, reason }

// NewView returns the view of user for a door, or of session ss when ss
// is not nil: its root is then the session's scratch, with home/ the
// user's private tree and uploads/ uploads/ID.
func (c *Core) NewView(door, user string, ss *metadata.Session, opts ViewOptions) (*View, error) {
	u, err := c.store.GetUser(user)
	if err != nil {
		return nil, fmt.Errorf("view of %s: %w", user, err)
	}
	v := &View{c: c, door: door, user: user, roots: u.Roots, opts: opts, id: c.viewIDs.Add(1)}
	if ss == nil {
		v.root, v.uploads, v.rootZone = u.Roots.Private, u.Roots.Uploads, zones.PrivateZone(user)
	} else {
		up, err := c.store.Lookup(u.Roots.Uploads, ss.ID)
		if err != nil {
			return nil, fmt.Errorf("view of %s: uploads/%s of session: %w", user, ss.ID, err)
		}
		v.session, v.root, v.uploads, v.rootZone = ss.ID, ss.Root, up.Ino, zones.SessionZone(ss.User, ss.ID)
	}
	if err := v.LoadGroups(); err != nil {
		return nil, fmt.Errorf("view of %s: %w", user, err)
	}
	return v, nil
}

// Core is the core the view is served by.
func (v *View) Core() *Core { return v.c }

// User is the principal the view belongs to.
func (v *View) User() string { return v.user }

// Session is the id of the session the view belongs to, "" for a main
// view.
func (v *View) Session() string { return v.session }

// Door is the way in the view is served through ("fuse").
func (v *View) Door() string { return v.door }

// Roots are the user's zone roots.
func (v *View) Roots() shedfs.Roots { return v.roots }

// Root is the inode of the view root, RootZone its zone.
func (v *View) Root() uint64 { return v.root }

// RootZone is the zone of the view root.
func (v *View) RootZone() shedfs.Zone { return v.rootZone }

// Uploads is the inode uploads/ shows (uploads/ID in a session's view).
func (v *View) Uploads() uint64 { return v.uploads }

// Options are the view's settings.
func (v *View) Options() ViewOptions { return v.opts }

// Name is the view as logs and the mount table name it: the user, or
// user@session.
func (v *View) Name() string {
	if v.session != "" {
		return v.user + "@" + v.session
	}
	return v.user
}

// Actor is the view's principal with its current groups.
func (v *View) Actor() acl.Actor {
	v.mu.Lock()
	defer v.mu.Unlock()
	return acl.Actor{User: v.user, Groups: v.groups, Session: v.session}
}

// LoadGroups refreshes the cached group list of the view's user.
func (v *View) LoadGroups() error {
	groups, err := v.c.store.GroupsOf(v.user)
	if err != nil {
		return err
	}
	v.mu.Lock()
	v.groups = groups
	v.mu.Unlock()
	return nil
}

// InGroup reports whether the view's user is in group g now.
func (v *View) InGroup(g string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Contains(v.groups, g)
}

// Caller is who asks for an operation through a view: the process's uid
// and gid, which new entries record. The actor and the door are the
// view's.
type Caller struct {
	Uid, Gid uint32
}

// At is an inode as the calling door reached it: its store number and its
// zone, which never change, and how the door's view names it.
type At struct {
	Ino  uint64
	Zone shedfs.Zone
	// Paths names the inode and its entries as the view shows them, for
	// the audit trail and the trash; asked only when one needs them.
	Paths Paths
}

// Paths names an inode (name "") and its entries as a view shows them:
// a path from the view root, "/"-rooted. Only the door knows it (a FUSE
// view asks its kernel tree).
type Paths interface {
	PathOf(name string) string
}

// pathOf is at's path, with name inside it when given.
func (at At) pathOf(name string) string {
	if at.Paths == nil {
		return "/" + name
	}
	return at.Paths.PathOf(name)
}

// Reserved is what a name of the view root stands for beside the store's
// entries.
type Reserved int

const (
	// NotReserved: an entry of the store.
	NotReserved Reserved = iota
	// ReservedRoot: the root of a zone (home/, output/, uploads/, share/).
	ReservedRoot
	// ReservedGroups: groups/, the user's groups, with no record.
	ReservedGroups
	// ReservedTrash: trash/, the kept files, with no record.
	ReservedTrash
	// ReservedSnapshots: snapshots/, the view's snapshots, with no
	// record.
	ReservedSnapshots
)

// Reserve resolves name in dir when dir is the view root: a zone root
// (with its inode), groups/ or trash/; NotReserved for every other name
// or directory.
func (v *View) Reserve(dir uint64, name string) (uint64, Reserved) {
	if dir != v.root {
		return 0, NotReserved
	}
	switch name {
	case zones.NameHome:
		if v.session != "" {
			return v.roots.Private, ReservedRoot
		}
	case zones.NameOutput:
		return v.roots.Output, ReservedRoot
	case zones.NameUploads:
		return v.uploads, ReservedRoot
	case zones.NameShare:
		return v.c.store.ShareRoot(), ReservedRoot
	case zones.NameGroups:
		return 0, ReservedGroups
	case zones.NameTrash:
		return 0, ReservedTrash
	case zones.NameSnapshots:
		return SnapshotsIno, ReservedSnapshots
	}
	return 0, NotReserved
}

// synthetic reports whether name in dir is groups/ or trash/ of the view
// root, the directories without a store record.
func (v *View) synthetic(dir uint64, name string) bool {
	_, r := v.Reserve(dir, name)
	return r == ReservedGroups || r == ReservedTrash || r == ReservedSnapshots
}

// SnapshotsIno is the number snapshots/ is shown with; the doors number
// what is in it from SnapshotsIno+1 up. Below 2^32, which the store never
// assigns to new inodes, below trash/'s numbers and far above the
// sequential numbers of old stores.
const SnapshotsIno = 0xfe000000

// GroupsIno is the number groups/ is shown with: one the store never
// assigns.
const GroupsIno = metadata.SyntheticIno

// Deny records a refusal of op at path p in zone z through the view (the
// audit trail, the denials metric) and returns its errno. An Unsupported
// decision (acl.Decision.Refused is false) is answered but neither counted
// nor recorded: it is no refusal of a rule.
func (v *View) Deny(op acl.Op, p string, z shedfs.Zone, d acl.Decision) syscall.Errno {
	return v.DenyScan(op, p, z, d, "")
}

// DenyScan is Deny of an open refused by the content's scan state.
func (v *View) DenyScan(op acl.Op, p string, z shedfs.Zone, d acl.Decision, scan string) syscall.Errno {
	if v.onRefusal != nil && d.Refused() {
		v.onRefusal(d)
	}
	return v.c.refused(shedfs.Event{
		Time: time.Now(), User: v.user, Zone: z, Path: p, Op: op.String(),
		Scan: scan, Session: v.session, Door: v.door, Token: v.token, TokenReason: v.tokenReason,
	}, d)
}

// deny is Deny of op on name in at (or on at itself).
func (v *View) deny(op acl.Op, at At, name string, d acl.Decision) syscall.Errno {
	return v.Deny(op, at.pathOf(name), at.Zone, d)
}

// Changed records a change op made at path p of zone z through the view.
func (v *View) Changed(op, p string, z shedfs.Zone, bytes int64) {
	v.c.Record(shedfs.Event{
		Time: time.Now(), User: v.user, Zone: z, Path: p, Op: op, Bytes: bytes,
		Session: v.session, Door: v.door, Token: v.token, TokenReason: v.tokenReason,
	})
}

// changed records a change op made to name in at (or to at).
func (v *View) changed(op string, at At, name string, bytes int64) {
	if !v.c.Recording() {
		return
	}
	v.Changed(op, at.pathOf(name), at.Zone, bytes)
}

// refused records a refusal (the audit trail, the denials metric) once,
// for whichever door, and returns its errno.
func (c *Core) refused(e shedfs.Event, d acl.Decision) syscall.Errno {
	if !d.Refused() {
		c.log.Debug("unsupported", "user", e.User, "op", e.Op, "path", e.Path, "reason", d.Reason, "errno", d.Errno)
		return d.Errno
	}
	if f := c.countDenial; f != nil {
		f(d.Reason)
	}
	e.Errno, e.Reason = d.Errno, d.Reason
	c.Record(e)
	c.log.Debug("denied", "user", e.User, "op", e.Op, "path", e.Path, "reason", d.Reason, "errno", d.Errno, "door", e.Door)
	return d.Errno
}

// CountDenials sets what counts a refusal by its reason (the
// shedfs_denials_total counter); set before any view is served.
func (c *Core) CountDenials(count func(reason string)) { c.countDenial = count }

// ViewPath is where rel, a path within zone z, appears in this view.
func (v *View) ViewPath(z shedfs.Zone, rel string) string {
	if v.session != "" {
		return zones.SessionViewPath(v.user, v.session, z, rel)
	}
	return zones.ViewPath(v.user, z, rel)
}

// ZonePath is the inverse of ViewPath.
func (v *View) ZonePath(p string) (shedfs.Zone, string, bool) {
	if v.session != "" {
		return zones.SessionZonePath(v.user, v.session, p)
	}
	return zones.ZonePath(v.user, p)
}

// TrashHolders are the holders whose kept files this view's trash/
// shows: the user's, share's, the groups', and a session view's own.
func (v *View) TrashHolders(groups []string) []shedfs.Holder {
	holders := []shedfs.Holder{shedfs.HolderOf(zones.PrivateZone(v.user)), shedfs.HolderOf(zones.ShareZone())}
	for _, g := range groups {
		holders = append(holders, shedfs.HolderOf(zones.GroupZone(g)))
	}
	if v.session != "" {
		holders = append(holders, shedfs.HolderOf(zones.SessionZone(v.user, v.session)))
	}
	return holders
}
