package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
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
	defer l.sessions.lock(sessionKey(req.User, req.ID))()
	ss, forked, err := l.openForked(ctx, req, expires)
	if err != nil {
		return nil, err
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
	info.Forked = forked
	return info, nil
}

// openSession makes the session in the store, under l.mu (so that its
// user is not removed meanwhile), which a view's mount is not.
func (l *Local) openSession(req SessionOpenRequest, expires time.Time, start string) (*metadata.Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.st.Meta.GetUser(req.User); err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", req.User))
	}
	tmpl := metadata.Session{User: req.User, ID: req.ID, Expires: expires, From: req.From, Fork: req.Fork, Base: req.Base, Start: start}
	if err := checkpointsOf(req, &tmpl); err != nil {
		return nil, err
	}
	ss, err := l.st.Meta.OpenSessionAs(tmpl, shedfs.Limit{Bytes: req.Quota.Bytes, Inodes: req.Quota.Inodes})
	if err != nil {
		return nil, asError(err, fmt.Sprintf("session %s of %s: it is open, or home/sessions/%s exists", req.ID, req.User, req.ID))
	}
	if err := l.core.Admin(req.User).SessionOpened(ss); err != nil {
		return nil, asError(err, "uploads/"+req.ID)
	}
	return ss, nil
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
	info := &SessionInfo{ID: ss.ID, User: ss.User, Created: ss.Created, Quota: limitAmount(lim), Usage: amount(used), From: ss.From, Fork: ss.Fork, Base: ss.Base}
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
// of the scratch are open, unless Force, which aborts the view's
// connection), then the scratch tree becomes home/sessions/ID of the
// user's private tree (metadata.Store.CloseSession), which without Keep
// goes to the trash at once, so that trash restore or shedfs restore
// brings it back. Only this session's lock is held: other sessions open
// and close meanwhile. Once the view is gone the close is marked in the
// store, so that a daemon that dies before it is done finishes it at its
// next start (finishSessionCloses).
func (l *Local) CloseSession(ctx context.Context, req SessionCloseRequest) (*SessionInfo, error) {
	if err := ValidPrincipalName("user", req.User); err != nil {
		return nil, err
	}
	if err := ValidPrincipalName("session id", req.ID); err != nil {
		return nil, err
	}
	defer l.sessions.lock(sessionKey(req.User, req.ID))()
	ss, err := l.st.Meta.GetSession(req.User, req.ID)
	if errors.Is(err, syscall.ENOENT) {
		return l.retryClose(req)
	}
	if err != nil {
		return nil, asError(err, fmt.Sprintf("no open session %s of %s", req.ID, req.User))
	}
	info, err := l.sessionInfo(ss)
	if err != nil {
		return nil, err
	}
	if sh, ok := l.mount.(sessionHooks); ok {
		if err := sh.sessionClosing(ctx, ss, req.Force); err != nil {
			return nil, asError(err, "unmount the session's view")
		}
	}
	if err := l.st.Meta.BeginSessionClose(ss, req.Keep); err != nil {
		return nil, asError(err, "close the session")
	}
	if info.Kept, err = l.finishClose(ss, req.Keep); err != nil {
		return nil, err
	}
	info.Mountpoint = ""
	l.log.Info("session closed", "user", req.User, "session", req.ID, "kept", info.Kept)
	return info, nil
}

// retryClose finishes the close of a session that is no longer open but
// whose close is still marked (it failed half-way): close again is how
// to retry it without a restart. NotFound when there is none.
func (l *Local) retryClose(req SessionCloseRequest) (*SessionInfo, error) {
	closes, err := l.st.Meta.SessionCloses(req.User)
	if err != nil {
		return nil, asError(err, "list session closes")
	}
	for _, c := range closes {
		if c.Session.ID != req.ID {
			continue
		}
		kept, err := l.finishClose(&c.Session, c.Keep)
		if err != nil {
			return nil, err
		}
		l.log.Info("session close finished", "user", req.User, "session", req.ID, "kept", kept)
		return &SessionInfo{ID: c.Session.ID, User: c.Session.User, Created: c.Session.Created, Kept: kept}, nil
	}
	return nil, errorf(CodeNotFound, "no open session %s of %s", req.ID, req.User)
}

// finishClose does a close marked in the store, or what is left of it:
// the scratch tree into home/sessions/ID (if the session is still open),
// then, without keep, that tree into the trash; then it drops the mark.
// Each step is resumable, so the mark makes the close complete. It
// returns where the files went.
func (l *Local) finishClose(ss *metadata.Session, keep bool) (string, error) {
	sc := vfs.SessionClose{Session: ss, Keep: keep, Step: l.trashStep}
	if sh, ok := l.mount.(sessionHooks); ok {
		sc.Closed = func() {
			sh.sessionsChanged()
			sh.sessionClosed()
		}
	}
	kept, err := l.core.Admin(ss.User).CloseSession(sc)
	var ae *vfs.AdminError
	if errors.As(err, &ae) {
		return "", asError(err, "close the session")
	}
	if err != nil {
		// The trash step's own error (tests), as it is.
		return "", err
	}
	if err := l.dropStart(ss); err != nil {
		return "", err
	}
	return kept, nil
}

// finishSessionCloses finishes, at a daemon's start, the closes a
// previous run marked but did not complete (it died meanwhile), and
// closes the sessions whose fork it did not complete (abandonForks). On a
// store other daemons serve it leaves them: one may be doing them now.
func (l *Local) finishSessionCloses() error {
	closes, err := l.st.Meta.SessionCloses("")
	if err != nil {
		return err
	}
	if peers, err := l.st.Meta.Peers(); err != nil || len(peers) > 0 {
		if len(closes) > 0 {
			l.log.Warn("session closes under way left for a start without other daemons", "closes", len(closes), "daemons", peers, "err", err)
		}
		return nil
	}
	if err := l.abandonForks(); err != nil {
		return err
	}
	for _, c := range closes {
		ss := c.Session
		unlock := l.sessions.lock(sessionKey(ss.User, ss.ID))
		kept, err := l.finishClose(&ss, c.Keep)
		unlock()
		if err != nil {
			return fmt.Errorf("finish the close of session %s of %s: %w", ss.ID, ss.User, err)
		}
		l.log.Info("session close finished after a restart", "user", ss.User, "session", ss.ID, "kept", kept)
	}
	return nil
}

// noSessions refuses, as busy, removing a user who has open sessions or
// a session close under way.
func (l *Local) noSessions(user string) error {
	list, err := l.st.Meta.ListSessions(user)
	if err != nil {
		return asError(err, "list sessions")
	}
	if len(list) > 0 {
		return errorf(CodeBusy, "user %s has %d open session(s) (%s first); close them before removing the user", user, len(list), list[0].ID)
	}
	closes, err := l.st.Meta.SessionCloses(user)
	if err != nil {
		return asError(err, "list session closes")
	}
	if len(closes) > 0 {
		return errorf(CodeBusy, "user %s has a session close under way (%s); retry when it is done", user, closes[0].Session.ID)
	}
	return nil
}

// TrashSessionClose is why the files of a closed session went to the
// trash.
const TrashSessionClose = vfs.TrashSessionClose

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
	if err := d.reloadSessions(); err != nil {
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
	d.mu.Lock()
	mounted, err := d.mountableLocked(key)
	d.mu.Unlock()
	if err != nil || mounted {
		// Stopping, or mounted already (taken over): not checked as a
		// mountpoint.
		return mnt, err
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
	w := d.watchLocked(key, mnt, v, managed)
	w.conn, _ = fuseConnection(mnt)
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
	var err error
	if force {
		err = d.abortUnmount(ctx, v)
	} else {
		err = d.unmount(ctx, v, false)
	}
	if err != nil {
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
	if err := d.reloadSessions(); err != nil {
		d.log.Error("reload sessions", "err", err)
	}
}

// reloadSessions tells the views the open sessions, one reload at a time.
func (d *Daemon) reloadSessions() error {
	d.sessionsMu.Lock()
	defer d.sessionsMu.Unlock()
	return d.core.SessionsChanged()
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
	d.wg.Add(2)
	go func() {
		defer d.wg.Done()
		d.expireSessions(stop)
	}()
	go func() {
		defer d.wg.Done()
		d.purgeExpired(stop)
	}()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.checkpoints(stop)
	}()
	return nil
}

// purgeEvery is how often the daemon deletes the records of expired edit
// locks and tokens, and tokenGrace how long an expired token stays listed
// (as expired) before it goes.
const (
	purgeEvery = time.Minute
	tokenGrace = 24 * time.Hour
)

// purgeExpired deletes, until stop closes, the records of edit locks past
// their expiry (they bind nobody already) and of tokens expired for
// tokenGrace, so that neither piles up in the store.
func (d *Daemon) purgeExpired(stop <-chan struct{}) {
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if n, err := d.core.PurgeEditLocks(now); err != nil {
				d.log.Warn("purge expired edit locks", "err", err)
			} else if n > 0 {
				d.log.Debug("expired edit locks purged", "locks", n)
			}
			if n, err := d.cfg.Store.Meta.DropTokens(func(t metadata.Token) bool { return now.Sub(t.Expires) > tokenGrace }); err != nil {
				d.log.Warn("purge expired tokens", "err", err)
			} else if n > 0 {
				d.log.Info("expired tokens purged", "tokens", n)
			}
		}
	}
}

// expiryEvery is how often the daemon looks for sessions whose time is up.
const expiryEvery = 500 * time.Millisecond

// expireSessions closes, until stop closes, every session whose TTL has
// passed, as close without --keep but forced: its time is up. Each close
// runs on its own, so that one slow close (a big tree, a view that will
// not go) delays no other; a session is not tried again while its close
// runs.
func (d *Daemon) expireSessions(stop <-chan struct{}) {
	t := time.NewTicker(expiryEvery)
	defer t.Stop()
	var mu sync.Mutex
	running := map[string]bool{}
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
				key := sessionKey(ss.User, ss.ID)
				mu.Lock()
				busy := running[key]
				if !busy && ss.Expired(now) {
					running[key] = true
				}
				mu.Unlock()
				if busy || !ss.Expired(now) {
					continue
				}
				d.wg.Add(1)
				go func() {
					defer d.wg.Done()
					defer func() {
						mu.Lock()
						delete(running, key)
						mu.Unlock()
					}()
					_, err := d.local.CloseSession(context.Background(), SessionCloseRequest{User: ss.User, ID: ss.ID, Force: true})
					if err != nil {
						d.log.Error("close an expired session", "user", ss.User, "session", ss.ID, "err", err)
						return
					}
					d.log.Info("session expired", "user", ss.User, "session", ss.ID)
				}()
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

// keyedLocks is one mutex per key, made while someone wants it.
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	mu      sync.Mutex
	waiters int
}

// lock takes key's mutex and returns its unlock.
func (k *keyedLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyedLock{}
		k.m[key] = l
	}
	l.waiters++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.waiters--; l.waiters == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
