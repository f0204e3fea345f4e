package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
)

// sessionHooks is how a serving daemon follows sessions: it mounts a new
// session's view, unmounts it before the session closes, and tells the
// views. A Local without them (no daemon) only changes the store.
type sessionHooks interface {
	// sessionOpened mounts the session's view under the mount root and
	// returns its mountpoint ("" when the daemon has none).
	sessionOpened(ctx context.Context, ss *metadata.Session) (string, error)
	// sessionClosing unmounts the session's view; unless force, it is
	// refused while any file of the scratch tree is open in any view.
	sessionClosing(ctx context.Context, ss *metadata.Session, force bool) error
	// sessionsChanged reloads what the views know of the open sessions.
	sessionsChanged()
	// sessionClosed counts a close.
	sessionClosed()
	// sessionView is the mountpoint of a session's view, "" if none.
	sessionView(user, id string) string
}

var _ SessionAdmin = (*Local)(nil)

// OpenSession opens a session of a user: its record, scratch root and
// limit (metadata.Store.OpenSession), its uploads/ID, and with a daemon
// its view at <mount-root>/USER@ID.
func (l *Local) OpenSession(ctx context.Context, req SessionOpenRequest) (*SessionInfo, error) {
	if err := ValidPrincipalName("user", req.User); err != nil {
		return nil, err
	}
	if req.ID == "" {
		req.ID = randomSessionID()
	}
	if err := ValidPrincipalName("session id", req.ID); err != nil {
		return nil, err
	}
	var expires time.Time
	if req.TTL != "" {
		ttl, err := time.ParseDuration(req.TTL)
		if err != nil || ttl <= 0 {
			return nil, errorf(CodeInvalid, "ttl %q: give a positive duration (90s, 2h)", req.TTL)
		}
		expires = time.Now().Add(ttl)
	}
	if req.Quota.Bytes < 0 || req.Quota.Inodes < 0 {
		return nil, errorf(CodeInvalid, "session quota: must not be negative")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u, err := l.st.Meta.GetUser(req.User)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", req.User))
	}
	ss, err := l.st.Meta.OpenSession(req.User, req.ID, expires, shedfs.Limit{Bytes: req.Quota.Bytes, Inodes: req.Quota.Inodes})
	if err != nil {
		return nil, asError(err, fmt.Sprintf("session %s of %s: it is open, or home/sessions/%s exists", req.ID, req.User, req.ID))
	}
	if _, err := l.sessionDir(u, req.ID); err != nil {
		return nil, asError(err, "uploads/"+req.ID)
	}
	dir, err := l.st.Meta.GetInode(ss.Placeholder)
	if err == nil {
		l.core.EntryChanged(dir.Parent, req.ID, nil)
		l.core.EntryChanged(u.Roots.Private, zones.NameSessions, nil)
	}
	mnt := ""
	if sh, ok := l.mount.(sessionHooks); ok {
		sh.sessionsChanged()
		if mnt, err = sh.sessionOpened(ctx, ss); err != nil {
			return nil, asError(err, "mount the session's view")
		}
	}
	info, err := l.sessionInfo(ss)
	if err != nil {
		return nil, err
	}
	info.Mountpoint = mnt
	return info, nil
}

// randomSessionID is 8 lowercase hex digits, a valid principal name.
func randomSessionID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sessionInfo describes a session with its usage and limit.
func (l *Local) sessionInfo(ss *metadata.Session) (*SessionInfo, error) {
	h := shedfs.SessionHolder(ss.User, ss.ID)
	used, err := l.core.Accountant().Usage(h)
	if err != nil {
		return nil, asError(err, "session usage")
	}
	lim, err := l.st.Meta.GetLimit(h)
	if err != nil {
		return nil, asError(err, "session limit")
	}
	info := &SessionInfo{ID: ss.ID, User: ss.User, Created: ss.Created, Quota: limitAmount(lim), Usage: amount(used)}
	if !ss.Expires.IsZero() {
		t := ss.Expires
		info.Expires = &t
	}
	if sh, ok := l.mount.(sessionHooks); ok {
		info.Mountpoint = sh.sessionView(ss.User, ss.ID)
	}
	return info, nil
}

// ListSessions lists the open sessions of user (every user for "").
func (l *Local) ListSessions(ctx context.Context, user string) ([]SessionInfo, error) {
	if user != "" {
		if err := ValidPrincipalName("user", user); err != nil {
			return nil, err
		}
	}
	list, err := l.st.Meta.ListSessions(user)
	if err != nil {
		return nil, asError(err, "list sessions")
	}
	out := make([]SessionInfo, 0, len(list))
	for i := range list {
		info, err := l.sessionInfo(&list[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *info)
	}
	return out, nil
}

// CloseSession closes a session: its view goes first (refused while files
// of the scratch are open, unless Force), then the scratch tree becomes
// home/sessions/ID of the user's private tree (metadata.Store.
// CloseSession), which without Keep goes to the trash at once, so that
// trash restore or shedfs restore brings it back.
func (l *Local) CloseSession(ctx context.Context, req SessionCloseRequest) (*SessionInfo, error) {
	if err := ValidPrincipalName("user", req.User); err != nil {
		return nil, err
	}
	if err := ValidPrincipalName("session id", req.ID); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ss, err := l.st.Meta.GetSession(req.User, req.ID)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("no open session %s of %s", req.ID, req.User))
	}
	info, err := l.sessionInfo(ss)
	if err != nil {
		return nil, err
	}
	sh, hooked := l.mount.(sessionHooks)
	if hooked {
		if err := sh.sessionClosing(ctx, ss, req.Force); err != nil {
			return nil, asError(err, "unmount the session's view")
		}
	}
	if _, err := l.st.Meta.CloseSession(req.User, req.ID, l.st.Blobs); err != nil {
		return nil, asError(err, "close the session")
	}
	place, err := l.st.Meta.GetInode(ss.Placeholder)
	if err != nil {
		return nil, asError(err, "the closed session's directory")
	}
	if hooked {
		sh.sessionsChanged()
		sh.sessionClosed()
	}
	l.core.EntryChanged(place.Parent, req.ID, nil)
	// What the session removed is in the user's trash now.
	l.core.TrashChanged()
	info.Mountpoint = ""
	info.Kept = path.Join(zones.NameHome, zones.NameSessions, req.ID)
	if !req.Keep {
		rel := path.Join(zones.NameSessions, req.ID)
		if err := l.trashTree(req.User, place.Parent, req.ID, rel); err != nil {
			return nil, err
		}
		l.core.TrashChanged()
		info.Kept = zones.NameTrash
	}
	l.log.Info("session closed", "user", req.User, "session", req.ID, "kept", info.Kept)
	return info, nil
}

// noSessions refuses, as busy, removing a user who has open sessions.
func (l *Local) noSessions(user string) error {
	list, err := l.st.Meta.ListSessions(user)
	if err != nil {
		return asError(err, "list sessions")
	}
	if len(list) > 0 {
		return errorf(CodeBusy, "user %s has %d open session(s) (%s first); close them before removing the user", user, len(list), list[0].ID)
	}
	return nil
}

// TrashSessionClose is why the files of a closed session went to the
// trash.
const TrashSessionClose = "session-close"

// trashTree moves name in directory parent, and everything below it, to
// the trash; rel is its path in the user's private zone.
func (l *Local) trashTree(user string, parent uint64, name, rel string) error {
	n, err := l.st.Meta.Lookup(parent, name)
	if err != nil {
		return asError(err, "trash "+rel)
	}
	if n.IsDir() {
		entries, err := l.st.Meta.ReadDir(n.Ino)
		if err != nil {
			return asError(err, "trash "+rel)
		}
		for _, e := range entries {
			if err := l.trashTree(user, n.Ino, e.Name, path.Join(rel, e.Name)); err != nil {
				return err
			}
		}
	}
	var note *metadata.TrashNote
	if !l.trashOff() {
		note = &metadata.TrashNote{By: user, Why: TrashSessionClose, Path: rel}
	}
	out, freed, kept, err := l.st.Meta.UnlinkTrash(parent, name, n.IsDir(), l.core.Unused, note)
	if err != nil {
		return asError(err, "move "+rel+" to the trash")
	}
	switch {
	case freed && out.IsRegular():
		l.core.Freed([]*shedfs.Inode{out}, vfs.FreedPurge, false)
	case !kept && !freed:
		l.core.EntryChanged(parent, name, out)
		return nil
	}
	l.core.EntryChanged(parent, name, nil)
	return nil
}

// sessionKey is the key of a session's view among the daemon's views:
// user@id, which no user name can be.
func sessionKey(user, id string) string { return user + "@" + id }

// sessionOpened mounts the session's view at <mount-root>/USER@ID.
func (d *Daemon) sessionOpened(ctx context.Context, ss *metadata.Session) (string, error) {
	if d.cfg.MountRoot == "" {
		return "", nil
	}
	return d.mountSession(ss, filepath.Join(d.cfg.MountRoot, sessionKey(ss.User, ss.ID)), true)
}

// MountSession mounts the view of session id of user at mountpoint
// outside the mount root (shedfs mount --session). The returned channel
// closes when the view stops serving.
func (d *Daemon) MountSession(user, id, mountpoint string) (<-chan struct{}, error) {
	ss, err := d.cfg.Store.Meta.GetSession(user, id)
	if err != nil {
		return nil, fmt.Errorf("session %s of %s: %w", id, user, err)
	}
	if err := d.core.SessionsChanged(); err != nil {
		return nil, err
	}
	if _, err := d.mountSession(ss, mountpoint, false); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.views[sessionKey(user, id)]
	if v == nil {
		return nil, fmt.Errorf("view of session %s of %s stopped", id, user)
	}
	return v.done, nil
}

// mountSession mounts a session's view and watches it like a user's.
func (d *Daemon) mountSession(ss *metadata.Session, mnt string, managed bool) (string, error) {
	key := sessionKey(ss.User, ss.ID)
	u, err := d.cfg.Store.Meta.GetUser(ss.User)
	if err != nil {
		return "", fmt.Errorf("view of %s: %w", key, err)
	}
	if managed {
		if err := os.Mkdir(mnt, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("view of %s: %w", key, err)
		}
	}
	if err := CheckMountpoint(mnt); err != nil {
		return "", fmt.Errorf("view of %s: %w", key, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if mounted, err := d.mountableLocked(key); err != nil || mounted {
		return mnt, err
	}
	v, err := d.fs.MountSessionView(ss, mnt, d.viewOptions(u))
	if err != nil {
		return "", err
	}
	d.watchLocked(key, mnt, v, managed)
	d.log.Info("session view mounted", "user", ss.User, "session", ss.ID, "mountpoint", mnt)
	return mnt, nil
}

// sessionClosing unmounts the session's view and its mountpoint.
func (d *Daemon) sessionClosing(ctx context.Context, ss *metadata.Session, force bool) error {
	if !force {
		if err := d.scratchIdle(ss); err != nil {
			return err
		}
	}
	d.mu.Lock()
	v := d.views[sessionKey(ss.User, ss.ID)]
	d.mu.Unlock()
	if v == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := d.unmount(ctx, v, force); err != nil {
		return err
	}
	if v.managed {
		if err := os.Remove(v.mountpoint); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("remove mountpoint", "path", v.mountpoint, "err", err)
		}
	}
	return nil
}

// scratchIdle refuses, as busy, a close while a file of the scratch tree
// is open in any view.
func (d *Daemon) scratchIdle(ss *metadata.Session) error {
	st := d.cfg.Store.Meta
	queue := []uint64{ss.Root}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		entries, err := st.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !d.core.Unused(e.Ino) {
				return errorf(CodeBusy, "session %s of %s has open files; close them, or close with --force", ss.ID, ss.User)
			}
			if e.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				queue = append(queue, e.Ino)
			}
		}
	}
	return nil
}

func (d *Daemon) sessionsChanged() {
	if err := d.core.SessionsChanged(); err != nil {
		d.log.Error("reload sessions", "err", err)
	}
}

func (d *Daemon) sessionClosed() { d.sessionCloses.Add(1) }

// sessionView is the mountpoint of a session's view, "" if none.
func (d *Daemon) sessionView(user, id string) string { return d.viewOf(sessionKey(user, id)) }

// startSessions, at the start of a daemon that serves a mount root,
// mounts the view of every open session and starts closing the sessions
// whose time is up.
func (d *Daemon) startSessions(ctx context.Context) error {
	list, err := d.cfg.Store.Meta.ListSessions("")
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	for i := range list {
		if _, err := d.sessionOpened(ctx, &list[i]); err != nil {
			return err
		}
	}
	stop := make(chan struct{})
	d.stopExpiry = stop
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.expireSessions(stop)
	}()
	return nil
}

// expiryEvery is how often the daemon looks for sessions whose time is up.
const expiryEvery = 500 * time.Millisecond

// expireSessions closes, until stop closes, every session whose TTL has
// passed, as close without --keep but forced: its time is up.
func (d *Daemon) expireSessions(stop <-chan struct{}) {
	t := time.NewTicker(expiryEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			list, err := d.cfg.Store.Meta.ListSessions("")
			if err != nil {
				d.log.Error("list sessions", "err", err)
				continue
			}
			for _, ss := range list {
				if !ss.Expired(now) {
					continue
				}
				_, err := d.local.CloseSession(context.Background(), SessionCloseRequest{User: ss.User, ID: ss.ID, Force: true})
				if err != nil {
					d.log.Error("close an expired session", "user", ss.User, "session", ss.ID, "err", err)
					continue
				}
				d.log.Info("session expired", "user", ss.User, "session", ss.ID)
			}
		}
	}
}

// registerSessionMetrics exports the open sessions and the closes.
func (d *Daemon) registerSessionMetrics(reg prometheus.Registerer) error {
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shedfs_sessions_open", Help: "Sessions open in the store."}, func() float64 {
			return float64(d.fs.OpenSessions())
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shedfs_session_closes_total", Help: "Sessions closed (by close or by their TTL)."}, func() float64 {
			return float64(d.sessionCloses.Load())
		}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("session metrics: %w", err)
		}
	}
	return nil
}
