package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/content"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// Config is what a Daemon serves.
type Config struct {
	// Store is the open store; the caller closes it after Stop.
	Store *Store
	// MountRoot, when set, makes the daemon mount one view per user at
	// MountRoot/<user> and follow users as they are added and removed
	// (shedfs serve). Empty means views are mounted explicitly with Mount
	// (shedfs mount).
	MountRoot string
	// DefaultView is the presentation of views whose user has no owner of
	// its own (serve --uid/--gid).
	DefaultView vfs.ViewOptions
	// Recorder receives every change and denial (the audit trail); nil
	// records nothing.
	Recorder shedfs.Recorder
	// Content hashes and scans what is written and imported; nil: the
	// admin operations hash imports themselves.
	Content *content.Service
	// Core is the core every door of the daemon calls, when the caller
	// built it first (for a door made before the daemon, such as the
	// link server); nil: the daemon makes one (NewCore).
	Core *vfs.Core
	// Views builds what serves the users' views on the daemon's core
	// (fusefs.New); nil: the daemon mounts nothing.
	Views  func(core *vfs.Core) Views
	Logger *slog.Logger
	// Doors are more handlers the admin socket serves beside the admin
	// API, behind the same peer check (the MCP server of shedfs mcp).
	Doors []Route
	// Transport is how the views' requests reach the daemon, as status
	// shows it ("io_uring", "/dev/fuse (why)").
	Transport string
}

// Views serves the users' views through a kernel transport, attached to
// the daemon's core: fusefs.FS. The daemon mounts and unmounts them and
// reads their figures; what their caches must learn of a change made
// through another door reaches them through the core.
type Views interface {
	MountView(user, mountpoint string, opts vfs.ViewOptions) (vfs.MountedView, error)
	MountSessionView(ss *metadata.Session, mountpoint string, opts vfs.ViewOptions) (vfs.MountedView, error)
	// OpenFiles is the number of inodes open in any view; OpenSessions
	// the number of open sessions; Requests the requests served.
	OpenFiles() int
	OpenSessions() int
	Requests() uint64
	// Foreign takes a change another daemon sharing the store made.
	Foreign(c metadata.Change)
	// StoreCollector is the store's gauges for the metrics registry.
	StoreCollector(maxHolders int) prometheus.Collector
	// Shutdown persists and closes what is still open once every view
	// is unmounted.
	Shutdown()
}

// mountedView is what the daemon keeps of a view; tests of the view
// manager substitute a fake, so they need no FUSE.
type mountedView = vfs.MountedView

// view is one view the daemon serves.
type view struct {
	user       string
	mountpoint string
	// managed views live under the mount root and follow the user; the
	// others were mounted explicitly and a user removal refuses to touch
	// them.
	managed bool
	mv      mountedView
	// opts is how a managed view presents entries (its owner): a
	// change of the user's uid/gid by another daemon remounts it
	// (remote.go).
	opts vfs.ViewOptions
	// closing is set when the daemon itself unmounts the view.
	closing atomic.Bool
	// done closes once the view stops serving, whoever unmounted it.
	done chan struct{}
	// conn is the FUSE connection of a session's view, found when it
	// was mounted, so that a forced close can abort it even once it is
	// detached; 0 when unknown.
	conn int
}

// Daemon serves views of one store and its admin API. It keeps the set of
// views in step with the set of users: adding a user through the admin API
// mounts its view at once, removing one unmounts it before its data goes.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	core  *vfs.Core
	fs    Views
	local *Local

	// mount mounts one view; the real one is Views, unit tests replace it.
	mount func(user, mountpoint string, opts vfs.ViewOptions) (mountedView, error)

	// rate is the request rate shown by status.
	rate *requestRate

	// sessionCloses counts closed sessions; stopExpiry ends the loop
	// that closes expired ones (session.go).
	sessionCloses atomic.Uint64
	stopExpiry    chan struct{}
	// sessionsMu runs one reload of the views' session table at a time:
	// sessions open and close concurrently, and a reload that listed
	// the store before another must not be the last to apply.
	sessionsMu sync.Mutex

	// usersMu runs one reconciliation of the views with the users
	// another daemon changed at a time (remote.go).
	usersMu sync.Mutex

	mu      sync.Mutex
	views   map[string]*view
	server  *Server
	stopped bool
	// started is set once Start (or StartAdmin) finished: every view
	// that should be mounted was (Ready).
	started bool
	wg      sync.WaitGroup
	// adopted are the views taken over from another daemon (takeover.go).
	adopted []*view
}

// New prepares a daemon for the store in cfg; nothing is mounted or
// listened on before Start.
func New(cfg Config) (*Daemon, error) {
	if cfg.Store == nil {
		return nil, errors.New("daemon: no store")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.MountRoot != "" {
		abs, err := filepath.Abs(cfg.MountRoot)
		if err != nil {
			return nil, fmt.Errorf("mount root: %w", err)
		}
		cfg.MountRoot = abs
	}
	if cfg.Store.Space != nil {
		// A serving daemon watches the disk: the reserve goes when
		// something else fills it and comes back when space returns.
		cfg.Store.Space.Start()
	}
	// One core for the views and the admin API: an import is admitted
	// against what open files have pending, quota show counts it, and a
	// change made through either reaches the other.
	core := cfg.Core
	if core == nil {
		core = NewCore(cfg.Store, cfg.Recorder, log)
	}
	views := Views(noViews{})
	if cfg.Views != nil {
		views = cfg.Views(core)
	}
	d := &Daemon{
		cfg:   cfg,
		log:   log,
		core:  core,
		fs:    views,
		views: make(map[string]*view),
	}
	// Other daemons sharing a store on etcd: their changes reach the
	// views' kernels, and their orphans are reclaimed when they go.
	cfg.Store.Meta.Follow(d.foreign)
	cfg.Store.Meta.FollowDepartures(func() {
		log.Info("a daemon sharing the store stopped; reclaiming what it held")
		if err := cfg.Store.reclaimOrphans(log); err != nil {
			log.Error("reclaim the orphans of a departed daemon", "err", err)
		}
	})
	// Room this daemon holds allotted and does not use goes to another
	// daemon that asks for it (quota.Accountant.Cover).
	cfg.Store.Meta.FollowWants(core.Accountant().GiveBack)
	cfg.Store.Meta.FollowLease(func() {
		core.LeaseRenewed()
		core.Accountant().LeaseRenewed()
	})
	d.rate = newRequestRate(d.fs.Requests)
	d.mount = func(user, mnt string, opts vfs.ViewOptions) (mountedView, error) {
		return d.fs.MountView(user, mnt, opts)
	}
	d.local = newLocal(cfg.Store, core, log)
	if cfg.Content != nil {
		d.local.content = cfg.Content
	}
	d.local.mount = d
	if err := core.SessionsChanged(); err != nil {
		return nil, err
	}
	return d, nil
}

// Admin is the daemon's admin operations, which keep the views in step.
func (d *Daemon) Admin() Admin { return d.local }

// Core is the core every door of the daemon calls.
func (d *Daemon) Core() *vfs.Core { return d.core }

// Start finishes the session closes a previous run left under way,
// prepares the mount root (clearing mounts a crash left behind), mounts a
// view for every user when a mount root is configured, and opens the
// admin socket. On error, whatever was mounted is unmounted again.
func (d *Daemon) Start(ctx context.Context) error {
	if err := d.local.finishSessionCloses(); err != nil {
		return err
	}
	if d.cfg.MountRoot != "" {
		if err := d.prepareMountRoot(); err != nil {
			return err
		}
		users, err := d.cfg.Store.Meta.ListUsers()
		if err != nil {
			return fmt.Errorf("list users: %w", err)
		}
		if err := d.mountAll(users); err != nil {
			d.Stop(ctx)
			return err
		}
		if err := d.startSessions(ctx); err != nil {
			d.Stop(ctx)
			return err
		}
	}
	path := d.cfg.Store.Location().SocketPath()
	if path == "" {
		d.markStarted()
		return nil // a store on etcd without --admin-socket
	}
	srv, err := Listen(path, d.local, d.log, d.cfg.Doors...)
	if err != nil {
		d.Stop(ctx)
		return err
	}
	d.mu.Lock()
	d.server = srv
	d.started = true
	d.mu.Unlock()
	return nil
}

// markStarted records that Start or StartAdmin finished (Ready).
func (d *Daemon) markStarted() {
	d.mu.Lock()
	d.started = true
	d.mu.Unlock()
}

// StartAdmin finishes the session closes a previous run left under way
// and opens only the admin socket (shedfs mount, where the one view is
// mounted with Mount).
func (d *Daemon) StartAdmin() error {
	if err := d.local.finishSessionCloses(); err != nil {
		return err
	}
	// The view is mounted already; without the admin API it still
	// serves (shedfs mount warns), so it is ready either way.
	defer d.markStarted()
	path := d.cfg.Store.Location().SocketPath()
	if path == "" {
		return nil
	}
	srv, err := Listen(path, d.local, d.log, d.cfg.Doors...)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.server = srv
	d.mu.Unlock()
	return nil
}

// Mount mounts the view of user at mountpoint outside the mount root. The
// returned channel closes when the view stops serving, for instance after
// an external umount.
func (d *Daemon) Mount(user, mountpoint string, opts vfs.ViewOptions) (<-chan struct{}, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.views[user]; ok {
		return nil, fmt.Errorf("view of %s is already mounted", user)
	}
	v, err := d.mountLocked(user, mountpoint, opts, false)
	if err != nil {
		return nil, err
	}
	return v.done, nil
}

// viewOptions is the presentation of a user's view: the user's own
// owner if it has one, else the daemon's default.
func (d *Daemon) viewOptions(u *shedfs.User) vfs.ViewOptions {
	return vfs.OwnerOptions(d.cfg.DefaultView, u)
}

// mountParallel is how many views mountAll mounts at once: a mount spends
// its time waiting for the kernel's round trips, not on the CPU.
const mountParallel = 16

// mountAll mounts the views of users under the mount root, several at a
// time, and returns the first error.
func (d *Daemon) mountAll(users []shedfs.User) error {
	errs := make([]error, len(users))
	sem := make(chan struct{}, mountParallel)
	var wg sync.WaitGroup
	for i := range users {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = d.mountManaged(&users[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// mountManaged mounts a user's view under the mount root. The mount itself
// runs outside d.mu, so that several go on at once.
func (d *Daemon) mountManaged(u *shedfs.User) error {
	mnt := filepath.Join(d.cfg.MountRoot, u.Name)
	// A view mounted already (taken over) is not checked as a mountpoint.
	d.mu.Lock()
	mounted, err := d.mountableLocked(u.Name)
	d.mu.Unlock()
	if err != nil || mounted {
		return err
	}
	if err := os.Mkdir(mnt, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("view of %s: %w", u.Name, err)
	}
	if err := CheckMountpoint(mnt); err != nil {
		return fmt.Errorf("view of %s: %w", u.Name, err)
	}
	opts := d.viewOptions(u)
	mv, err := d.mount(u.Name, mnt, opts)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if mounted, err := d.mountableLocked(u.Name); err != nil || mounted {
		// Stopped, or mounted by another caller meanwhile.
		if uerr := mv.Unmount(); uerr != nil {
			d.log.Error("unmount a view mounted twice", "user", u.Name, "err", uerr)
		}
		return err
	}
	d.watchLocked(u.Name, mnt, mv, true).opts = opts
	d.log.Info("view mounted", "user", u.Name, "mountpoint", mnt, "force_owner", opts.ForceOwner)
	return nil
}

// mountableLocked refuses a view while the daemon stops, and reports
// whether the user's view is mounted already; d.mu is held.
func (d *Daemon) mountableLocked(user string) (mounted bool, err error) {
	if d.stopped {
		return false, fmt.Errorf("view of %s: the daemon is stopping", user)
	}
	_, ok := d.views[user]
	return ok, nil
}

// mountLocked mounts a view and watches it; d.mu is held.
func (d *Daemon) mountLocked(user, mnt string, opts vfs.ViewOptions, managed bool) (*view, error) {
	mv, err := d.mount(user, mnt, opts)
	if err != nil {
		return nil, err
	}
	d.log.Info("view mounted", "user", user, "mountpoint", mnt, "force_owner", opts.ForceOwner)
	return d.watchLocked(user, mnt, mv, managed), nil
}

// watchLocked registers a mounted view and follows it until it stops
// serving; d.mu is held.
func (d *Daemon) watchLocked(user, mnt string, mv mountedView, managed bool) *view {
	v := &view{user: user, mountpoint: mnt, managed: managed, mv: mv, done: make(chan struct{})}
	d.views[user] = v
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		mv.Wait()
		close(v.done)
		d.mu.Lock()
		if d.views[user] == v {
			delete(d.views, user)
			if !v.closing.Load() {
				d.log.Warn("view unmounted from outside", "user", user, "mountpoint", mnt)
			}
		}
		d.mu.Unlock()
	}()
	return v
}

// unmount ends one view and waits for it to stop serving, until ctx ends.
// A view still busy with open files is refused unless lazy, which detaches
// it from the namespace and lets it die with its last user.
func (d *Daemon) unmount(ctx context.Context, v *view, lazy bool) error {
	v.closing.Store(true)
	// The view's Unmount returns only once the view stops serving, which
	// a mount of the same file system elsewhere (a bind into a container
	// or a pod) holds off for as long as it lasts: it runs apart, and is
	// waited for until ctx ends (a stop), or boundGrace (a refusal).
	unmounted := make(chan error, 1)
	go func() { unmounted <- v.mv.Unmount() }()
	wait := ctx
	if !lazy {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, boundGrace)
		defer cancel()
	}
	var err error
	select {
	case err = <-unmounted:
	case <-wait.Done():
		d.log.Warn("view unmounted but still serving: it is mounted elsewhere too", "user", v.user, "mountpoint", v.mountpoint)
		if lazy {
			return errorf(CodeBusy, "view of %s at %s is still mounted elsewhere (a bind into a container or a pod): that mount fails (ENOTCONN) once this daemon exits", v.user, v.mountpoint)
		}
		return errorf(CodeBusy, "view of %s at %s is still mounted elsewhere (a bind into a container or a pod); unmount that, or close with --force", v.user, v.mountpoint)
	}
	if err != nil {
		v.closing.Store(false)
		if !lazy {
			select {
			case <-v.done:
				return nil
			default:
			}
			d.log.Warn("unmount refused", "user", v.user, "mountpoint", v.mountpoint, "err", err)
			return errorf(CodeBusy, "view of %s at %s is in use (open files or working directories); close them and retry", v.user, v.mountpoint)
		}
		d.log.Warn("unmount failed; detaching lazily", "user", v.user, "mountpoint", v.mountpoint, "err", err)
		if err := unix.Unmount(v.mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("detach view of %s: %w", v.user, err)
		}
	}
	return d.awaitStopped(ctx, v)
}

// awaitStopped waits, until ctx ends, for v to stop serving, and forgets
// it then.
func (d *Daemon) awaitStopped(ctx context.Context, v *view) error {
	select {
	case <-v.done:
		d.mu.Lock()
		if d.views[v.user] == v {
			delete(d.views, v.user)
		}
		d.mu.Unlock()
		d.log.Info("view unmounted", "user", v.user, "mountpoint", v.mountpoint)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("view of %s at %s still serving: %w", v.user, v.mountpoint, ctx.Err())
	}
}

// abortUnmount ends a view whatever holds it: unmounted if idle,
// otherwise detached and its FUSE connection aborted, so that it stops
// serving at once and the processes holding its files get ENOTCONN
// (a lazy detach alone keeps it serving until the last of them lets go).
// It waits, until ctx ends, for the view to stop.
func (d *Daemon) abortUnmount(ctx context.Context, v *view) error {
	// Found before the detach takes the mount out of the table.
	conn, found := v.conn, v.conn != 0
	if !found {
		conn, found = fuseConnection(v.mountpoint)
	}
	v.closing.Store(true)
	// The view's Unmount returns once the view stops serving, which a
	// mount of the same file system elsewhere (a bind into a container,
	// a pod's volume) holds off: it runs apart, and a view still serving
	// after boundGrace is aborted.
	unmounted := make(chan error, 1)
	go func() { unmounted <- v.mv.Unmount() }()
	var err error
	select {
	case err = <-unmounted:
	case <-time.After(boundGrace):
		if !found {
			return fmt.Errorf("view of %s at %s still serving through another mount, and no FUSE connection known to abort", v.user, v.mountpoint)
		}
		d.log.Warn("view still serving through another mount (a bind); aborting its connection", "user", v.user, "mountpoint", v.mountpoint)
		if err := abortConnection(conn); err != nil {
			return fmt.Errorf("view of %s: %w", v.user, err)
		}
		return d.awaitStopped(ctx, v)
	}
	if err != nil {
		d.log.Warn("view busy; detaching it and aborting its connection", "user", v.user, "mountpoint", v.mountpoint, "err", err)
		if err := unix.Unmount(v.mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("detach view of %s: %w", v.user, err)
		}
		if !found {
			return fmt.Errorf("view of %s at %s: no FUSE connection in the mount table to abort", v.user, v.mountpoint)
		}
		if err := abortConnection(conn); err != nil {
			return fmt.Errorf("view of %s: %w", v.user, err)
		}
	}
	return d.awaitStopped(ctx, v)
}

// stopLocked marks the daemon stopped, ends its session expiry and takes
// its admin server and views out, for Stop or HandOver to end or hand
// over. d.mu is held.
func (d *Daemon) stopLocked() (*Server, []*view) {
	d.stopped = true
	if d.stopExpiry != nil {
		close(d.stopExpiry)
		d.stopExpiry = nil
	}
	srv := d.server
	d.server = nil
	views := make([]*view, 0, len(d.views))
	for _, v := range d.views {
		views = append(views, v)
	}
	return srv, views
}

// boundGrace is how long a forced unmount waits for a view to stop
// before it takes the view for mounted elsewhere and aborts its
// connection: a view mounted only at its mountpoint stops in
// milliseconds, and a busy one is refused (after go-fuse's retries,
// under 300 ms) well within it.
const boundGrace = 2 * time.Second

// Stop closes the admin socket, unmounts every view as soon as nothing
// uses it, saying meanwhile which views are in use and by what; views
// still in use when ctx ends are detached lazily and their connections
// aborted (drain.go). Then it persists what is still open. The
// store stays open for the caller to close. Stop may be called more than
// once.
func (d *Daemon) Stop(ctx context.Context) error {
	d.mu.Lock()
	srv, views := d.stopLocked()
	d.mu.Unlock()

	var errs []error
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Each view unmounts once nothing uses it; until ctx ends, the stop
	// says what it waits for, then detaches the rest (drain.go).
	if err := d.drain(ctx, views); err != nil {
		d.log.Error("unmount", "err", err)
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		d.wg.Wait()
	}
	d.fs.Shutdown()
	d.rate.close()
	return errors.Join(errs...)
}

// Views lists the mounted views, sorted by user.
func (d *Daemon) Views() []ViewInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]ViewInfo, 0, len(d.views))
	for _, v := range d.views {
		out = append(out, ViewInfo{User: v.user, Mountpoint: v.mountpoint})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	return out
}

// OpenFiles is the number of inodes open through any view.
func (d *Daemon) OpenFiles() int { return d.fs.OpenFiles() }

// userAdded mounts the new user's view when the daemon follows users.
func (d *Daemon) userAdded(ctx context.Context, u *shedfs.User) error {
	if d.cfg.MountRoot == "" {
		return nil
	}
	return d.mountManaged(u)
}

// userRemoving unmounts the view of a user about to be removed, and its
// mountpoint directory. A view mounted explicitly (shedfs mount) belongs
// to whoever mounted it: the removal is refused.
func (d *Daemon) userRemoving(ctx context.Context, name string) error {
	d.mu.Lock()
	v := d.views[name]
	d.mu.Unlock()
	if v == nil {
		return nil
	}
	if !v.managed {
		return errorf(CodeBusy, "the view of %s is mounted at %s by a running shedfs mount; stop it before removing the user", name, v.mountpoint)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := d.unmount(ctx, v, false); err != nil {
		return asError(err, "unmount")
	}
	if err := os.Remove(v.mountpoint); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("remove mountpoint", "path", v.mountpoint, "err", err)
	}
	return nil
}

// viewOf is the mountpoint of a user's view, "" if none.
func (d *Daemon) viewOf(name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v := d.views[name]; v != nil {
		return v.mountpoint
	}
	return ""
}

// fillStatus adds the daemon's side to a status.
func (d *Daemon) fillStatus(st *Status) {
	st.Daemon = true
	st.PID = os.Getpid()
	st.MountRoot = d.cfg.MountRoot
	st.Views = d.Views()
	st.OpenFiles = d.OpenFiles()
	st.Locks = d.Locks()
	st.Requests = d.rate.current()
	st.Transport = d.cfg.Transport
}

// Locks lists the file locks held through the views and, on a store
// several daemons share, those the other daemons hold: a lock that blocks
// a file may be held on any host. A store that cannot say is logged, and
// this daemon's are listed.
func (d *Daemon) Locks() []LockInfo {
	held, err := d.core.PeerLocks()
	if err != nil {
		d.log.Error("list the locks of the other daemons", "err", err)
	}
	out := make([]LockInfo, 0, len(held))
	for _, l := range held {
		typ := "read"
		if l.Write {
			typ = "write"
		}
		out = append(out, LockInfo{User: l.User, Path: l.Path, Ino: l.Ino, Kind: l.Kind, Type: typ, Start: l.Start, Len: l.Len, PID: l.Pid, Daemon: l.Daemon})
	}
	return out
}
