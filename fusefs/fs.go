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

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/zones"
)

// Options are the settings shared by every view of one daemon.
type Options struct {
	// EntryTimeout and AttrTimeout are how long the kernel may cache names
	// and attributes. Views stay coherent through invalidation, so these
	// can be long; zero means the defaults below.
	EntryTimeout time.Duration
	AttrTimeout  time.Duration
	// Logger receives errors the kernel cannot be told about in detail.
	Logger *slog.Logger
	// Zones holds the configurable zone policy: default ownership modes
	// of share and groups, and the symlink policy.
	Zones zones.Config
	// Recorder receives every change and denial (the audit trail); nil
	// records nothing.
	Recorder Recorder
	// Metrics counts requests, bytes and denials; nil counts nothing.
	Metrics *Metrics
	// Passthrough lets read-only opens read the blob directly in the
	// kernel (FUSE passthrough, Linux 6.9+, root). Reads then bypass the
	// daemon and are not counted in the byte metrics.
	Passthrough bool
}

const (
	defaultEntryTimeout = time.Second
	defaultAttrTimeout  = time.Second
)

// FS is the state every view of one store shares: the metadata store, the
// blob store, and the table of open inodes whose size and times may be
// ahead of what is persisted.
type FS struct {
	store *metadata.Store
	blobs *blobs.Dir
	opts  Options
	log   *slog.Logger

	notify *notifier
	acct   *accountant
	// maxFileSize is the store's setting, reloaded by SettingsChanged.
	maxFileSize atomic.Uint64

	mu   sync.Mutex
	open map[uint64]*openInode
	// live counts the views whose kernel holds each inode.
	live map[uint64]int
	// orphans are inodes without links that something still holds.
	orphans map[uint64]bool
}

// New prepares the shared state for views of one store. The caller keeps
// ownership of store and blob directory and closes them after every view is
// unmounted.
func New(store *metadata.Store, blobDir *blobs.Dir, opts Options) *FS {
	if opts.EntryTimeout == 0 {
		opts.EntryTimeout = defaultEntryTimeout
	}
	if opts.AttrTimeout == 0 {
		opts.AttrTimeout = defaultAttrTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &FS{
		store:   store,
		blobs:   blobDir,
		opts:    opts,
		log:     log,
		open:    make(map[uint64]*openInode),
		live:    make(map[uint64]int),
		orphans: make(map[uint64]bool),
		notify:  newNotifier(),
		acct:    newAccountant(),
	}
	f.SettingsChanged()
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
	f.maxFileSize.Store(st.MaxFileSize)
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

// An inode whose last link goes away lives on while anything still holds
// it: an open handle in any view, or a kernel reference in any view (the
// kernel may open or fstat an inode it looked up before the unlink). It is
// reclaimed when the last of these goes: at the last release or the last
// forget.

// reclaimIfUnused notes that n lost its last link and reclaims it unless
// something still holds it.
func (f *FS) reclaimIfUnused(n *metadata.Inode) {
	if n == nil || n.Nlink > 0 {
		return
	}
	f.mu.Lock()
	f.orphans[n.Ino] = true
	f.mu.Unlock()
	f.reclaimIfIdle(n.Ino)
}

// reclaimIfIdle reclaims ino if it is an orphan that no handle and no
// kernel reference holds any more.
func (f *FS) reclaimIfIdle(ino uint64) {
	f.mu.Lock()
	idle := f.orphans[ino] && f.open[ino] == nil && f.live[ino] == 0
	if idle {
		delete(f.orphans, ino)
	}
	f.mu.Unlock()
	if idle {
		f.reclaim(ino)
	}
}

// nodeAdded and nodeForgotten count the kernel references to an inode
// across views.
func (f *FS) nodeAdded(ino uint64) {
	f.mu.Lock()
	f.live[ino]++
	f.mu.Unlock()
}

func (f *FS) nodeForgotten(ino uint64) {
	f.mu.Lock()
	if f.live[ino]--; f.live[ino] <= 0 {
		delete(f.live, ino)
	}
	f.mu.Unlock()
	f.reclaimIfIdle(ino)
}

// reclaim removes an unlinked inode and its blob. The blob goes after the
// metadata: a crash in between leaves a stray blob, which fsck removes,
// never an inode without its content.
func (f *FS) reclaim(ino uint64) {
	n, err := f.store.Reclaim(ino)
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) {
			f.log.Error("reclaim inode", "ino", ino, "err", err)
		}
		return
	}
	if n.IsRegular() {
		if err := f.blobs.Remove(ino); err != nil {
			f.log.Error("remove blob", "ino", ino, "err", err)
		}
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
	// No view is left to hold anything: every orphan goes.
	f.mu.Lock()
	f.live = make(map[uint64]int)
	f.mu.Unlock()
	orphans, err := f.store.Orphans()
	if err != nil {
		f.log.Error("list orphans at shutdown", "err", err)
	}
	for _, ino := range orphans {
		f.reclaim(ino)
	}
}
