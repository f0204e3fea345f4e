// Package fusefs is the FUSE door of shedfs: go-fuse nodes and file
// handles for every view, which convert a request, call the core (vfs)
// and convert its answer, and the bookkeeping that keeps several views'
// kernels coherent. It never re-implements a rule; it returns errnos and
// never panics on what a caller sends.
package fusefs

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/content"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/quota"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
)

// Options are the settings shared by every view of one daemon.
type Options struct {
	// EntryTimeout, AttrTimeout and NegativeTimeout are how long the
	// kernel may cache names, attributes and names found missing. Every
	// change passes through the daemon, which invalidates what a view's
	// kernel did not see itself, so they are long and correctness never
	// rests on them; zero means the defaults below.
	EntryTimeout    time.Duration
	AttrTimeout     time.Duration
	NegativeTimeout time.Duration
	// Logger receives errors the kernel cannot be told about in detail.
	Logger *slog.Logger
	// Zones holds the configurable zone policy: default ownership modes
	// of share and groups, and the symlink policy.
	Zones zones.Config
	// Metrics counts requests, bytes and denials; nil counts nothing.
	Metrics *Metrics
	// Passthrough lets read-only opens read the blob directly in the
	// kernel (FUSE passthrough, Linux 6.9+, root). Reads then bypass the
	// daemon and are not counted in the byte metrics.
	Passthrough bool
	// MemoryLimit is the soft limit of the daemon's Go heap without the
	// views' FUSE read buffers, which the FS adds for every mounted view
	// (memlimit.go); 0: the FS leaves the process's limit alone.
	MemoryLimit int64
	// MemoryLimitMax is the most the nodes the views' kernels hold may
	// raise the limit to (with MemoryLimit, not counting the views'
	// buffers); 0: no ceiling (memlimit.go).
	MemoryLimitMax int64
	// Content takes files whose content changed for their digest and
	// scan, and decides opens by the scan verdict; nil: neither.
	Content *content.Service
	// Transport, when set, may serve each view over another channel
	// than reads of /dev/fuse (FUSE over io_uring, package fuseuring):
	// it adjusts the view's mount options and wraps its file system
	// before the mount. nil: /dev/fuse.
	Transport Transport
}

const (
	defaultEntryTimeout    = time.Hour
	defaultAttrTimeout     = time.Hour
	defaultNegativeTimeout = time.Hour
)

// FS is the state every FUSE view of one store shares beside the core:
// the invalidation of their kernels, who holds what, request metrics.
type FS struct {
	// core holds the rules, the operations and the open files, and fans
	// changes made through other doors out to the views (vfs).
	core  *vfs.Core
	store *metadata.Store
	blobs *blobs.Dir
	opts  Options
	log   *slog.Logger

	notify *notifier
	// known is which views' kernels hold each shared inode.
	known *knownInodes
	// negatives is which views' kernels hold a name as absent.
	negatives *negativeEntries
	// memLimit keeps the soft memory limit in step with the views.
	memLimit *memLimit
	acct     *quota.Accountant
	// requests counts FUSE requests for the status rate.
	requests atomic.Uint64

	// stopSweep ends the trash sweeper at Shutdown.
	stopSweep chan struct{}

	// trash is the retention and generation of the trash (trash.go).
	trash trashState
}

// New prepares the shared state for views of the core's store and
// attaches them to the core, which tells them of every change made
// through another door. The caller keeps ownership of the store and
// closes it after every view is unmounted.
func New(core *vfs.Core, opts Options) *FS {
	if opts.EntryTimeout == 0 {
		opts.EntryTimeout = defaultEntryTimeout
	}
	if opts.AttrTimeout == 0 {
		opts.AttrTimeout = defaultAttrTimeout
	}
	if opts.NegativeTimeout == 0 {
		opts.NegativeTimeout = defaultNegativeTimeout
	}
	log := opts.Logger
	if log == nil {
		log = core.Logger()
	}
	f := &FS{
		core:      core,
		store:     core.Store(),
		blobs:     core.Blobs(),
		opts:      opts,
		log:       log,
		stopSweep: make(chan struct{}),
		notify:    newNotifier(log),
		known:     newKnownInodes(),
		negatives: newNegativeEntries(opts.NegativeTimeout),
		memLimit:  newMemLimit(opts),
		acct:      core.Accountant(),
	}
	core.SetZones(opts.Zones)
	core.SetContent(opts.Content)
	core.CountDenials(f.countDenial)
	f.SettingsChanged()
	go f.trashSweeper(f.stopSweep, f.trashCap)
	core.Attach(f)
	core.ServeFiles()
	return f
}

// SettingsChanged reloads the store-wide settings (the max file size);
// the daemon calls it after changing them.
func (f *FS) SettingsChanged() {
	st, err := f.store.GetSettings()
	if err != nil {
		f.log.Error("read store settings", "err", err)
		return
	}
	f.trashSettings(st)
}

// OpenFiles is the number of inodes with at least one open handle.
func (f *FS) OpenFiles() int { return f.core.OpenFiles() }

// errno turns an error from the store or the host into what the kernel
// understands (vfs.Core.Errno).
func (f *FS) errno(op string, err error) syscall.Errno { return f.core.Errno(op, err) }

// Statfs figures for a zone are filled from the backing disk until the
// quota holder has a limit.
func statfsDisk(path string, out *syscall.Statfs_t) error {
	if err := syscall.Statfs(path, out); err != nil {
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	return nil
}

// Shutdown persists and closes whatever is still open once every view is
// unmounted, and reclaims inodes that were unlinked while open.
func (f *FS) Shutdown() {
	f.notify.close()
	close(f.stopSweep)
	f.core.CloseFiles()
}
