package vfs

import (
	"errors"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/content"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/quota"
	"github.com/shedfs/shedfs/zones"
)

// Space is what the core needs of the store's disk guard (space.Guard):
// whether the store may grow by bytes and inodes, and whether the disk is
// down to what the metadata engine needs (where even bookkeeping that
// nobody waits for, such as a link's download count, is skipped).
type Space interface {
	Admit(bytes, inodes int64) acl.Decision
	Short() bool
}

// remeasurer is a Space that can be told to measure the disk afresh after
// the core freed room on it (space.Guard).
type remeasurer interface{ Remeasure() }

// Options are what a Core is built from beside the store.
type Options struct {
	// Logger receives what no caller can be told in detail.
	Logger *slog.Logger
	// Recorder receives every change and denial (the audit trail); nil
	// records nothing.
	Recorder shedfs.Recorder
	// Space admits growth of the store by the room left on its disk;
	// nil admits everything (a store opened read-only).
	Space Space
}

// Core is the state every door of one store shares: the store, its blobs,
// the quota accountant and the attached frontends.
type Core struct {
	store *metadata.Store
	blobs *blobs.Dir
	acct  *quota.Accountant
	opts  Options
	log   *slog.Logger

	// maxFileSize is the store's setting, reloaded by SettingsChanged.
	maxFileSize atomic.Uint64

	// trashRetention is the store's trash retention in nanoseconds (0:
	// the trash is off), reloaded by SettingsChanged.
	trashRetention atomic.Int64

	// sessions is what the views know of the open sessions (sessions.go).
	sessions sessionTable
	// versions numbers content changes, for the kernels' page caches.
	versions *contentVersions
	// afterBlobOpen, when a test sets it, runs in a first open between
	// the blob's open and the open state's entry in the table.
	afterBlobOpen func(ino uint64)
	// ft is the open-file table (files.go).
	ft openTable
	// content takes files whose content changed for their digest and
	// scan, and decides opens by the scan verdict; nil: neither
	// (SetContent).
	content *content.Service
	// zoneCfg is the configurable zone policy (SetZones).
	zoneCfg zones.Config
	// countDenial counts a refusal by its reason (CountDenials).
	countDenial func(reason string)

	mu        sync.Mutex
	frontends []Frontend

	// edits is the core's copy of the store's edit locks (editlocks.go).
	edits editLocks
	// links makes the links user.shedfs.link answers; nil: none
	// (SetLinks).
	links Links
	// locks are the file locks of every view (filelocks.go).
	locks *lockTable
	// viewIDs numbers the views, for lock owners.
	viewIDs atomic.Uint64
}

// New returns the core of an open store. The caller keeps ownership of
// store and blob directory.
func New(store *metadata.Store, blobDir *blobs.Dir, opts Options) *Core {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Core{store: store, blobs: blobDir, acct: quota.New(store), opts: opts, log: opts.Logger, versions: newContentVersions()}
	c.ft = newOpenTable()
	c.locks = newLockTable()
	c.locks.share(store, opts.Logger)
	c.acct.SetEvictor(c.evictTrash)
	c.loadSettings()
	return c
}

// Store is the metadata store the core serves.
func (c *Core) Store() *metadata.Store { return c.store }

// Blobs is the store's blob directory.
func (c *Core) Blobs() *blobs.Dir { return c.blobs }

// Accountant is the one quota accountant of the process: usage as stored
// plus what is pending (open files, streaming imports).
func (c *Core) Accountant() *quota.Accountant { return c.acct }

// Logger is the core's logger, for the frontends built on it.
func (c *Core) Logger() *slog.Logger { return c.log }

// DiskShort reports whether the store's disk is down to what the
// metadata engine needs (Space.Short); false without a guard.
func (c *Core) DiskShort() bool { return c.opts.Space != nil && c.opts.Space.Short() }

// MaxFileSize is the store's max file size (0: unlimited).
func (c *Core) MaxFileSize() uint64 { return c.maxFileSize.Load() }

// Record puts an event into the audit trail, if there is one.
func (c *Core) Record(e shedfs.Event) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Record(e)
	}
}

// Recording reports whether events are recorded at all, so that callers
// can skip building them.
func (c *Core) Recording() bool { return c.opts.Recorder != nil }

// FlushRecords returns once every event recorded before the call is
// stored, when the recorder writes in batches (audit.Recorder gathers
// them for up to its flush interval); at once otherwise. It is for a
// reader that wants to see what just happened (shedfs audit right after a
// refusal), never for a callback.
func (c *Core) FlushRecords() error {
	if f, ok := c.opts.Recorder.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// loadSettings reloads the store-wide settings the core applies.
func (c *Core) loadSettings() {
	st, err := c.store.GetSettings()
	if err != nil {
		c.log.Error("read store settings", "err", err)
		return
	}
	c.maxFileSize.Store(st.MaxFileSize)
	c.trashRetention.Store(int64(st.TrashRetention()))
}

// SetContent sets the content service (digests, scans, the open's
// wait); set before any view is served.
func (c *Core) SetContent(svc *content.Service) { c.content = svc }

// SetZones sets the configurable zone policy (default ownership modes,
// the symlink policy); set before any view is served.
func (c *Core) SetZones(z zones.Config) { c.zoneCfg = z }

func (c *Core) zones() zones.Config { return c.zoneCfg }

func (c *Core) symlinks() zones.SymlinkPolicy { return c.zoneCfg.Symlinks }

// trashOn reports whether the trash keeps what loses its last link.
func (c *Core) trashOn() bool { return c.trashRetention.Load() > 0 }

// Errno turns an error from the store or the host into an errno for a
// door. Anything without one is logged and becomes EIO, so a caller never
// sees a raw internal error and the operator sees the cause.
func (c *Core) Errno(op string, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	}
	c.log.Error("internal error", "op", op, "err", err)
	return syscall.EIO
}

// ContentVersion is ino's content version now (versions.go).
func (c *Core) ContentVersion(ino uint64) uint64 { return c.versions.current(ino) }

// BumpContent records a change of ino's content (data, or the entries of
// a directory) and returns its version before and after.
func (c *Core) BumpContent(ino uint64) (before, after uint64) { return c.versions.bump(ino) }

// Version is a content version an operation moved: the caller's own
// cache of Ino, if it was at Before, saw the change and is at After.
type Version struct{ Ino, Before, After uint64 }

// contentChanged records a change of ino's content made through a view in
// zone z: nothing when no other view may hold it (the caller's kernel saw
// the change).
func (c *Core) contentChanged(z shedfs.Zone, ino uint64, into []Version) []Version {
	if !c.SharedIn(z) {
		return into
	}
	b, a := c.versions.bump(ino)
	return append(into, Version{Ino: ino, Before: b, After: a})
}
