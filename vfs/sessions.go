package vfs

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// sessionTable is what the views need to know of the open sessions
// (docs/design.md, "Sessions"): each session's placeholder
// home/sessions/ID, which the main view shows as the session's scratch
// (read-only) and session views hide; the directories an open session
// relies on; and the users that had a session since the daemon started,
// whose per-user zones are then seen by more than one view and so are
// invalidated across views like shared ones.
type sessionTable struct {
	// open and anyMulti let the operations of a store without sessions
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

// Placeholder returns the open session whose placeholder is ino.
func (c *Core) Placeholder(ino uint64) (metadata.Session, bool) {
	t := &c.sessions
	if t.open.Load() == 0 {
		return metadata.Session{}, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	ss, ok := t.byPlaceholder[ino]
	return ss, ok
}

// pin returns the open session that relies on directory ino.
func (c *Core) pin(ino uint64) (metadata.Session, bool) {
	t := &c.sessions
	if t.open.Load() == 0 {
		return metadata.Session{}, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	ss, ok := t.pinned[ino]
	return ss, ok
}

// multiView reports whether user's per-user zones may be in more than one
// view.
func (c *Core) multiView(user string) bool {
	t := &c.sessions
	if !t.anyMulti.Load() {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.multi[user]
}

// OpenSessions is the number of open sessions.
func (c *Core) OpenSessions() int { return int(c.sessions.open.Load()) }

// SessionsChanged reloads the open sessions after one opened or closed,
// and tells the frontends which users have a session for the first time
// since the daemon started (their views then share their per-user zones).
func (c *Core) SessionsChanged() error {
	list, err := c.store.ListSessions("")
	if err != nil {
		return fmt.Errorf("load sessions: %w", err)
	}
	by := make(map[uint64]metadata.Session, len(list))
	pinned := make(map[uint64]metadata.Session, 3*len(list))
	for _, ss := range list {
		for _, ino := range c.sessionDirs(&ss) {
			pinned[ino] = ss
		}
	}
	var fresh []string
	t := &c.sessions
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
	for _, f := range c.attached() {
		f.SessionsChanged(fresh)
	}
	return nil
}

// sessionDirs are the directories session ss relies on: its
// placeholder, the directory holding that, and its uploads/ID.
func (c *Core) sessionDirs(ss *metadata.Session) []uint64 {
	dirs := []uint64{ss.Placeholder}
	if p, err := c.store.GetInode(ss.Placeholder); err == nil {
		dirs = append(dirs, p.Parent)
	}
	if u, err := c.store.GetUser(ss.User); err == nil {
		if up, err := c.store.Lookup(u.Roots.Uploads, ss.ID); err == nil {
			dirs = append(dirs, up.Ino)
		}
	}
	return dirs
}

// SharedIn reports whether more than one view may hold inodes of zone z:
// always for share and group zones, and for a user's own zones once the
// user has had a session.
func (c *Core) SharedIn(z shedfs.Zone) bool {
	if Shared(z) {
		return true
	}
	return c.multiView(ZoneUser(z))
}

// Shared reports whether inodes of zone z are visible in more than one
// user's views.
func Shared(z shedfs.Zone) bool {
	return z.Kind == shedfs.ZoneShare || z.Kind == shedfs.ZoneGroup
}

// ZoneUser is the user whose views show per-user zone z (her private
// tree, output/, uploads/, or one of her sessions' scratch).
func ZoneUser(z shedfs.Zone) string {
	if z.Kind == shedfs.ZoneSession {
		user, _ := shedfs.SplitSession(z.Principal)
		return user
	}
	return z.Principal
}
