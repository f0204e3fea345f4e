// Package fusefs is the kernel callback path of shedfs: go-fuse nodes and
// file handles for every view, the data path to blobs, and the bookkeeping
// that keeps several views of one store coherent. It asks zones and acl for
// every decision and never re-implements a rule; it returns errnos and never
// panics on what a caller sends.
package fusefs

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
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
	// Links makes the links getxattr user.shedfs.link returns; nil when
	// the daemon serves no links (no --http): ENOTSUP.
	Links Links
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

// FS is the state every view of one store shares: the metadata store, the
// blob store, and the table of open inodes whose size and times may be
// ahead of what is persisted.
type FS struct {
	// core admits every growth and fans changes made through other
	// doors out to the views (vfs).
	core  *vfs.Core
	store *metadata.Store
	blobs *blobs.Dir
	opts  Options
	log   *slog.Logger

	notify *notifier
	// known is which views' kernels hold each shared inode.
	known *knownInodes
	// sessions is what the views know of the open sessions (session.go).
	sessions sessionTable
	// negatives is which views' kernels hold a name as absent.
	negatives *negativeEntries
	// persists orders reads of records with persists of open files (hold.go).
	persists persistClock
	// memLimit keeps the soft memory limit in step with the views.
	memLimit *memLimit
	// versions numbers content changes, for FOPEN_KEEP_CACHE.
	versions *contentVersions
	acct     *quota.Accountant
	// locks are the file locks of every view.
	locks *lockTable
	// views numbers the views, for lock owners.
	views atomic.Uint64
	// requests counts FUSE requests for the status rate.
	requests atomic.Uint64

	mu   sync.Mutex
	open map[uint64]*openInode
	// stopSweep ends the ghost sweeper at Shutdown.
	stopSweep chan struct{}
	// orphans are inodes without links that an open handle still holds.
	orphans map[uint64]bool
	// holdMu orders the open marks of a shared store, per inode: a
	// stripe of holdStripes (remote.go).
	holdMu [holdStripes]sync.Mutex
	// marks are the open marks kept after the last release (marks.go).
	marks markTable
	// dirsOpen counts open directory handles per inode.
	dirsOpen map[uint64]int
	// ghosts are reclaimed inodes kept for requests under way.
	ghosts map[uint64]*ghost

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
		open:      make(map[uint64]*openInode),
		stopSweep: make(chan struct{}),
		orphans:   make(map[uint64]bool),
		dirsOpen:  make(map[uint64]int),
		ghosts:    make(map[uint64]*ghost),
		notify:    newNotifier(log),
		known:     newKnownInodes(),
		negatives: newNegativeEntries(opts.NegativeTimeout),
		memLimit:  &memLimit{base: opts.MemoryLimit},
		versions:  newContentVersions(),
		acct:      core.Accountant(),
		locks:     newLockTable(),
	}
	f.locks.share(f.store, log)
	f.SettingsChanged()
	go f.sweeper(f.stopSweep)
	go f.trashSweeper(f.stopSweep, f.trashCap)
	core.Attach(f)
	if f.store.Shared() {
		go f.markReleaser(f.stopSweep)
	}
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
func (f *FS) OpenFiles() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.open)
}

// errno turns an error from the store or the host into what the kernel
// understands. Anything without an errno is logged and becomes EIO, so a
// caller never sees a raw internal error and the operator sees the cause.
func (f *FS) errno(op string, err error) syscall.Errno {
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
	f.log.Error("internal error", "op", op, "err", err)
	return syscall.EIO
}

// An inode whose last link goes away lives on while a handle holds it
// open, in any view: reads, writes and fstat keep working, and its quota
// charge stays. At the last release (or at once, if nothing is open) the
// record is reclaimed and the charge freed. A kernel may still be about to
// use the inode without a handle: it looked the name up just before the
// unlink or rename and its OPEN or GETATTR is on the way. For those, a
// ghost copy of the record and the blob stay for ghostGrace, long enough
// for any request already under way; a read-only open in that time still
// finds the file (and keeps the ghost while it is open).

// ghostGrace is how long a reclaimed inode stays reachable by the requests
// of kernels that resolved it before it went.
const ghostGrace = 2 * time.Second

// ghost is a reclaimed inode kept for requests under way.
type ghost struct {
	rec   *shedfs.Inode
	until time.Time
}

// reclaimIfUnused notes that n lost its last link and reclaims it unless
// a handle still holds it.
func (f *FS) reclaimIfUnused(n *shedfs.Inode) {
	if n == nil || n.Nlink > 0 {
		return
	}
	f.mu.Lock()
	f.orphans[n.Ino] = true
	f.mu.Unlock()
	f.reclaimIfIdle(n.Ino)
}

// reclaimIfIdle reclaims ino if it is an orphan that no handle holds. The
// check happens under f.mu and puts a ghost in place before the lock is
// dropped, so an open that slips in before the reclaim commits can only
// read (Open refuses to write a ghost) and keeps the content until it
// closes. The store is never written under f.mu: its write transactions
// run one at a time and may take f.mu themselves (unused).
func (f *FS) reclaimIfIdle(ino uint64) {
	f.mu.Lock()
	if !f.orphans[ino] || f.open[ino] != nil || f.dirsOpen[ino] > 0 {
		f.mu.Unlock()
		return
	}
	delete(f.orphans, ino)
	rec, err := f.store.GetInode(ino)
	if err == nil {
		g := *rec
		g.Nlink = 0
		f.ghosts[ino] = &ghost{rec: &g, until: time.Now().Add(ghostGrace)}
	}
	f.mu.Unlock()
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) {
			f.log.Error("reclaim inode", "ino", ino, "err", err)
		}
		return
	}
	n, err := f.store.ReclaimIdle(ino)
	if err != nil {
		if !heldElsewhere(err) {
			f.log.Error("reclaim inode", "ino", ino, "err", err)
			// Not reclaimed (linked again): its content stays.
			f.dropGhost(ino)
		} else if errors.Is(err, metadata.ErrHeld) {
			f.dropGhost(ino)
		}
		return
	}
	f.mu.Lock()
	f.ghosts[ino] = &ghost{rec: n, until: time.Now().Add(ghostGrace)}
	f.mu.Unlock()
	if f.opts.Content != nil {
		f.opts.Content.Forget()
	}
}

// unused reports whether no handle holds ino open; the store asks it
// inside the unlink transaction (UnlinkFree).
func (f *FS) unused(ino uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open[ino] == nil && f.dirsOpen[ino] == 0
}

// addGhost keeps rec reachable for ghostGrace in case its record goes;
// dropGhost takes it back when it did not.
func (f *FS) addGhost(rec *shedfs.Inode) {
	g := *rec
	g.Nlink = 0
	f.mu.Lock()
	f.ghosts[rec.Ino] = &ghost{rec: &g, until: time.Now().Add(ghostGrace)}
	f.mu.Unlock()
}

func (f *FS) dropGhost(ino uint64) {
	f.mu.Lock()
	delete(f.ghosts, ino)
	f.mu.Unlock()
}

// ghostOf returns the last record of a reclaimed inode still in its grace
// period, or nil.
func (f *FS) ghostOf(ino uint64) *shedfs.Inode {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g := f.ghosts[ino]; g != nil {
		c := *g.rec
		return &c
	}
	return nil
}

// sweepGhosts removes the blobs of ghosts whose grace is over and that no
// handle holds; all of them when final.
func (f *FS) sweepGhosts(final bool) {
	now := time.Now()
	var gone []uint64
	f.mu.Lock()
	for ino, g := range f.ghosts {
		if final || now.After(g.until) && f.open[ino] == nil {
			delete(f.ghosts, ino)
			if g.rec.IsRegular() {
				gone = append(gone, ino)
			}
		}
	}
	f.mu.Unlock()
	for _, ino := range gone {
		f.removeBlob(ino)
	}
}

// sweeper runs sweepGhosts until stop closes.
func (f *FS) sweeper(stop <-chan struct{}) {
	t := time.NewTicker(ghostGrace / 2)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f.sweepGhosts(false)
		case <-stop:
			return
		}
	}
}

// dirOpened and dirClosed count open directory handles, which hold a
// removed directory like open files hold a file.
func (f *FS) dirOpened(ino uint64) {
	f.mu.Lock()
	f.dirsOpen[ino]++
	f.mu.Unlock()
}

func (f *FS) dirClosed(ino uint64) {
	f.mu.Lock()
	if f.dirsOpen[ino]--; f.dirsOpen[ino] <= 0 {
		delete(f.dirsOpen, ino)
	}
	f.mu.Unlock()
	f.reclaimIfIdle(ino)
}

func (f *FS) removeBlob(ino uint64) {
	if err := f.blobs.Remove(ino); err != nil {
		f.log.Error("remove blob", "ino", ino, "err", err)
	}
}

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
	f.mu.Lock()
	left := make([]*openInode, 0, len(f.open))
	for _, oi := range f.open {
		left = append(left, oi)
	}
	f.open = make(map[uint64]*openInode)
	f.mu.Unlock()
	for _, oi := range left {
		f.closeOpen(oi)
	}
	// No view is left to hold anything: every orphan and ghost goes.
	close(f.stopSweep)
	f.releaseMarks(true)
	f.mu.Lock()
	f.dirsOpen = make(map[uint64]int)
	f.mu.Unlock()
	orphans, err := f.store.Orphans()
	if err != nil {
		f.log.Error("list orphans at shutdown", "err", err)
	}
	for _, ino := range orphans {
		f.mu.Lock()
		f.orphans[ino] = true
		f.mu.Unlock()
		f.reclaimIfIdle(ino)
	}
	f.sweepGhosts(true)
}
