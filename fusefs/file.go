package fusefs

import (
	"context"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// openInode is the state of a regular file while any view holds it open:
// one blob descriptor shared by every handle, and the size and times that
// writes have moved ahead of the store. They are persisted at flush, fsync
// and the last release, so a stream of writes costs no transaction each.
type openInode struct {
	ino    uint64
	holder shedfs.Holder

	mu   sync.Mutex
	blob *os.File
	refs int // handles, guarded by FS.mu
	// entry is what acl needs to decide a write; ownership changes made
	// while the file is open update it.
	entry acl.Entry
	// dirty is set when size or mtime differ from the store.
	dirty bool
	// newBlob is set until the blob's directory entry has been made
	// durable by an fsync.
	newBlob   bool
	size      uint64
	persisted uint64 // the size the store has
	// pendingCharge is what this file adds to its holder's pending bytes:
	// Charge(size) - Charge(persisted).
	pendingCharge int64
	mtime         time.Time
	// modes counts the handles of each view by kernel I/O mode (see
	// newHandle).
	modes map[*View]*ioCounts
	// writeErr is the first write error since the last flush, reported
	// to the closer as close(2) expects.
	writeErr syscall.Errno
	// changed is set when the content changed since it was last handed
	// to the content service; writer is the view's user that changed it.
	changed bool
	writer  string
	// digest hashes the content while it is written in order (digest.go);
	// known is the content the last persist recorded with its digest, nil
	// when it left the file pending for the content worker.
	digest *runningDigest
	known  *shedfs.Content
	// retired are blob descriptors replaced while open (a version kept
	// in the trash), closed with the last handle.
	retired []*os.File
	// held are attributes a SETATTR set while dirty (hold.go).
	held heldAttrs
}

// setSize moves the in-memory size and keeps the holder's pending charge
// in step. oi.mu must be held.
func (f *FS) setSizeLocked(oi *openInode, size uint64) {
	oi.size = size
	pc := shedfs.Charge(size) - shedfs.Charge(oi.persisted)
	f.acct.Add(oi.holder, pc-oi.pendingCharge)
	oi.pendingCharge = pc
}

// acquire returns the open state of n, opening the blob on first use.
// The blob is opened outside f.mu, so that opens of different files run
// in parallel; of two first opens of one file, the second closes its
// descriptor and shares the first's. create says n was just made by
// newChild for openNew (a new blob; marked open in a shared store).
func (f *FS) acquire(n *shedfs.Inode, create bool) (*openInode, syscall.Errno) {
	f.mu.Lock()
	if oi := f.open[n.Ino]; oi != nil {
		oi.refs++
		f.mu.Unlock()
		return oi, 0
	}
	// A ghost's blob may be gone already; never make an empty one.
	_, isGhost := f.ghosts[n.Ino]
	f.mu.Unlock()
	blob, err := f.blobs.OpenFile(n.Ino, !isGhost)
	if err != nil {
		if create {
			// Its create marked it open (newChild): take that back
			// before uncreate frees it.
			f.unhold(n.Ino)
		}
		return nil, f.errno("open blob", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if oi := f.open[n.Ino]; oi != nil {
		blob.Close()
		oi.refs++
		return oi, 0
	}
	oi := &openInode{
		ino:       n.Ino,
		holder:    shedfs.HolderOf(n.Zone),
		blob:      blob,
		refs:      1,
		entry:     acl.EntryOf(n),
		size:      n.Size,
		persisted: n.Size,
		mtime:     n.Mtime,
		newBlob:   create,
		modes:     make(map[*View]*ioCounts),
	}
	f.open[n.Ino] = oi
	if f.store.Shared() && !create {
		// Marked open in the store for the other daemons (remote.go),
		// outside f.mu; a file just created was marked by its create.
		f.mu.Unlock()
		f.hold(n.Ino)
		f.mu.Lock()
	}
	return oi, 0
}

// lookupOpen returns the open state of ino, or nil.
func (f *FS) lookupOpen(ino uint64) *openInode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open[ino]
}

// release drops one handle; the last one persists, closes the blob and
// reclaims the inode if it was unlinked and nothing else holds it.
func (f *FS) release(oi *openInode) {
	f.mu.Lock()
	oi.refs--
	last := oi.refs == 0
	orphan := f.orphans[oi.ino]
	f.mu.Unlock()
	if !last {
		return
	}
	if !orphan {
		// Persisted while every view still finds it open, so that none
		// reads the record behind what a flush held (hold.go).
		oi.mu.Lock()
		f.persistLocked(oi)
		oi.mu.Unlock()
	}
	f.mu.Lock()
	if oi.refs > 0 || f.open[oi.ino] != oi {
		f.mu.Unlock()
		return // opened again meanwhile, or closed by that opener
	}
	delete(f.open, oi.ino)
	f.mu.Unlock()
	f.closeOpen(oi)
}

// closeOpen ends the open state of an inode no handle holds any more.
func (f *FS) closeOpen(oi *openInode) {
	f.unhold(oi.ino)
	f.mu.Lock()
	orphan := f.orphans[oi.ino]
	f.mu.Unlock()
	oi.mu.Lock()
	if orphan {
		// Its charge goes with the inode at reclaim.
		f.acct.Add(oi.holder, -oi.pendingCharge)
		oi.pendingCharge = 0
	} else if f.persistLocked(oi) == 0 && oi.changed && f.opts.Content != nil {
		oi.changed = false
		if oi.known == nil {
			f.opts.Content.Changed(oi.ino, nil)
		}
	}
	oi.blob.Close()
	for _, b := range oi.retired {
		b.Close()
	}
	oi.mu.Unlock()
	f.reclaimIfIdle(oi.ino)
}

// persistLocked writes the in-memory size and mtime to the store, moving
// the pending charge into the stored usage. oi.mu must be held.
func (f *FS) persistLocked(oi *openInode) syscall.Errno {
	if !oi.dirty {
		return 0
	}
	size, mtime, held := oi.size, oi.mtime, oi.held
	unlock := f.acct.Lock(oi.holder)
	defer unlock()
	err := f.persistWritten(oi, func(n *shedfs.Inode) error {
		n.Size = size
		n.Mtime = mtime
		n.Ctime = mtime
		held.apply(n)
		return nil
	})
	if err != nil {
		return f.errno("persist size", err)
	}
	f.persists.tick(oi.ino)
	f.acct.Add(oi.holder, -oi.pendingCharge)
	oi.pendingCharge = 0
	oi.persisted = size
	oi.dirty = false
	oi.held = heldAttrs{}
	return 0
}

// overlay puts the not yet persisted size and times of an open inode over
// a stored record.
func (f *FS) overlay(n *shedfs.Inode) {
	if !n.IsRegular() {
		return
	}
	oi := f.lookupOpen(n.Ino)
	if oi == nil {
		return
	}
	oi.mu.Lock()
	if oi.dirty {
		n.Size = oi.size
		n.Mtime = oi.mtime
		n.Ctime = oi.mtime
		oi.held.apply(n)
	}
	oi.mu.Unlock()
}

// resize admits and applies a size change of an open file (write,
// truncate, fallocate) under its holder's lock: grow is checked against
// the mode, the max file size and the quota; the new size is reserved as
// pending before the lock is dropped. blocks is how much disk apply may
// allocate on the host (holes filled included), which the store's disk
// must have room for. apply does the blob work; on failure nothing is
// charged. oi.mu must be held.
func (n *node) resizeLocked(oi *openInode, op acl.Op, newSize uint64, blocks int64, apply func() (uint64, error)) syscall.Errno {
	f := n.v.fs
	a := n.v.actor()
	grows := shedfs.Charge(newSize) > shedfs.Charge(oi.size) || newSize > oi.size
	decide := func(q acl.Quota) acl.Decision {
		if op != acl.OpWrite {
			return acl.Truncate(a, oi.entry, q, oi.size, newSize)
		}
		if !grows {
			return acl.Write(a, oi.entry, q, oi.size, oi.size)
		}
		return acl.Write(a, oi.entry, q, oi.size, newSize)
	}
	g := vfs.Growth{Disk: blocks, Decide: decide}
	if grows {
		// Charged to the holder, pending until persisted, and seen by
		// other daemons sharing the store in this one's allotment.
		g.Holder, g.Bytes, g.Allot = oi.holder, shedfs.Charge(newSize)-shedfs.Charge(oi.size), true
	}
	adm, d, aerr := f.core.Admit(g)
	if aerr != nil {
		return f.errno("quota", aerr)
	}
	if !d.Allowed() {
		return n.deny(op, "", d)
	}
	old := oi.size
	if grows {
		// Pending before the blob grows, so a concurrent admission
		// counts this write.
		f.setSizeLocked(oi, newSize)
	}
	adm.Done()
	if !oi.changed {
		// The first change since the content was persisted: no reader
		// may go by the old verdict from here on. Marked after the
		// holder's lock is given back: it is a store commit (an etcd
		// round trip on a shared store).
		if e := f.contentChanging(n, oi.ino); e != 0 {
			if oi.size != old {
				f.setSizeLocked(oi, old) // nothing was written
			}
			return e
		}
	}
	got, err := apply()
	if got != oi.size {
		// A short write gives back what it reserved; a shrink lands.
		f.setSizeLocked(oi, got)
	}
	if err != nil {
		return f.errno(op.String(), err)
	}
	if op != acl.OpWrite {
		f.resizedLocked(oi, got)
	}
	oi.mtime = time.Now()
	oi.dirty = true
	oi.changed = true
	oi.writer = n.v.user
	return 0
}

// handle is one open(2) of a regular file in one view.
type handle struct {
	node  *node
	oi    *openInode
	flags uint32
	mode  ioMode
	// locks are the lock owners that acted through this handle.
	locks lockRefs
}

// ioMode is how the kernel does I/O on one open file.
type ioMode uint8

const (
	// modeCached: reads and writes through the daemon and the kernel's
	// page cache.
	modeCached ioMode = iota
	// modePassthrough: reads go straight to the blob (FUSE passthrough),
	// never through the daemon.
	modePassthrough
)

// ioCounts are the open handles of one inode in one view, by I/O mode.
// The kernel keeps one I/O mode per inode and connection: once a
// passthrough handle is open, every further open must be passthrough too
// (or it fails with EIO), and the other way round.
type ioCounts struct {
	passthrough, cached int
}

// ptHandle is a read-only handle whose reads bypass the daemon. It is a
// type of its own because go-fuse gives passthrough to every handle of an
// inode that has the PassthroughFd method once one of them has it.
type ptHandle struct {
	*handle
}

// PassthroughFd implements fs.FilePassthroughFder.
func (h *ptHandle) PassthroughFd() (int, bool) {
	return int(h.oi.blob.Fd()), true
}

// newHandle opens a handle on oi, choosing the kernel I/O mode per inode
// and view. Passthrough skips the daemon, and with it every per-write
// check, and the kernel then forces it on every later open of the inode in
// the view. So it is chosen only for a read-only open of a file this view
// may not write at all (uploads/, owner_ro, another's owner-mode file):
// no writer of this view can come after it. A write open that still meets
// passthrough readers (the mode changed since they opened) fails with
// ETXTBSY, as writing to a running executable does, rather than letting the
// kernel fail it with EIO or the write bypass the quota.
func (n *node) newHandle(oi *openInode, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	h := &handle{node: n, oi: oi, flags: flags}
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	oi.mu.Lock()
	defer oi.mu.Unlock()
	c := oi.modes[n.v]
	if c == nil {
		c = &ioCounts{}
		oi.modes[n.v] = c
	}
	switch {
	case write && c.passthrough > 0:
		return nil, 0, n.deny(acl.OpWrite, "", acl.WriteOpen(c.passthrough))
	case !write && n.v.fs.opts.Passthrough && c.cached == 0 && acl.Passthrough(n.v.actor(), oi.entry):
		c.passthrough++
		h.mode = modePassthrough
		return &ptHandle{h}, 0, 0
	default:
		c.cached++
		h.mode = modeCached
		return h, 0, 0
	}
}

// closeHandle undoes newHandle's count.
func (h *handle) closeHandle() {
	oi := h.oi
	oi.mu.Lock()
	defer oi.mu.Unlock()
	c := oi.modes[h.node.v]
	if c == nil {
		return
	}
	if h.mode == modePassthrough {
		c.passthrough--
	} else {
		c.cached--
	}
	if c.passthrough == 0 && c.cached == 0 {
		delete(oi.modes, h.node.v)
	}
}

// Read implements fs.FileReader.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (_ fuse.ReadResult, errno syscall.Errno) {
	defer h.node.v.fs.track("read", h.node.zone, time.Now(), &errno)
	if e := h.lockLost(acl.OpRead, false); e != 0 {
		return nil, e
	}
	oi := h.oi
	oi.mu.Lock()
	entry, size, blob := oi.entry, oi.size, oi.blob
	oi.mu.Unlock()
	if d := acl.Read(h.node.v.actor(), entry); !d.Allowed() {
		return nil, h.node.deny(acl.OpRead, "", d)
	}
	if off < 0 || uint64(off) >= size {
		return fuse.ReadResultData(nil), 0
	}
	n := min(uint64(len(dest)), size-uint64(off))
	h.node.v.fs.countRead(h.node.zone, int(n))
	// The kernel gets the bytes spliced from the blob, without a copy
	// through the daemon where the kernel allows it.
	return fuse.ReadResultFd(blob.Fd(), off, int(n)), 0
}

// Write implements fs.FileWriter.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (_ uint32, errno syscall.Errno) {
	defer h.node.v.fs.track("write", h.node.zone, time.Now(), &errno)
	if e := h.lockLost(acl.OpWrite, false); e != 0 {
		return 0, e
	}
	if e := h.killSetIDOnWrite(ctx); e != 0 {
		return 0, e
	}
	oi := h.oi
	oi.mu.Lock()
	if h.flags&syscall.O_APPEND != 0 {
		off = int64(oi.size)
	}
	old := oi.size
	end := max(uint64(off)+uint64(len(data)), old)
	var written int
	e := h.node.resizeLocked(oi, acl.OpWrite, end, int64(len(data)), func() (uint64, error) {
		n, err := oi.blob.WriteAt(data, off)
		written = n
		return max(uint64(off)+uint64(n), old), err
	})
	if written > 0 {
		h.node.v.fs.wroteLocked(oi, off, old, data[:written])
	}
	if e != 0 && written > 0 && oi.writeErr == 0 {
		oi.writeErr = e
	}
	oi.mu.Unlock()
	if written == 0 && e != 0 {
		return 0, e
	}
	h.node.v.fs.countWrite(h.node.zone, written)
	h.node.v.fs.changedContent(h.node, oi.ino)
	// Outside the inode lock: delivery may wait on the other views'
	// kernels, which may wait on a write of theirs that needs the lock.
	h.node.v.fs.invalidate(h.node.v, h.node.zone, dataOf(oi.ino, off, int64(written)))
	return uint32(written), 0
}

// Flush implements fs.FileFlusher: close(2) of one descriptor makes the
// size seen by every view: held in the open inode for the last release
// to persist (hold.go), or persisted now.
func (h *handle) Flush(ctx context.Context) (errno syscall.Errno) {
	defer h.node.v.fs.track("flush", h.node.zone, time.Now(), &errno)
	oi := h.oi
	oi.mu.Lock()
	defer oi.mu.Unlock()
	if !h.node.v.fs.flushHeldLocked(h.node, oi) {
		if e := h.node.v.fs.persistLocked(oi); e != 0 {
			return e
		}
		if oi.changed {
			oi.changed = false
			h.node.v.fs.contentChanged(h.node, oi.ino, true, int64(oi.size), oi.known)
		}
	}
	e := oi.writeErr
	oi.writeErr = 0
	return e
}

// Fsync implements fs.FileFsyncer: the blob first, then the metadata that
// describes it, then the metadata log, so that a synced size never points
// past synced content.
func (h *handle) Fsync(ctx context.Context, flags uint32) (errno syscall.Errno) {
	defer h.node.v.fs.track("fsync", h.node.zone, time.Now(), &errno)
	f := h.node.v.fs
	oi := h.oi
	oi.mu.Lock()
	defer oi.mu.Unlock()
	if err := unix.Fdatasync(int(oi.blob.Fd())); err != nil {
		return f.errno("fsync blob", err)
	}
	if oi.newBlob {
		if err := f.blobs.SyncDir(oi.ino); err != nil {
			return f.errno("fsync blob dir", err)
		}
		oi.newBlob = false
	}
	if e := f.persistLocked(oi); e != 0 {
		return e
	}
	if err := f.store.Sync(); err != nil {
		return f.errno("fsync metadata", err)
	}
	return 0
}

// Release implements fs.FileReleaser.
func (h *handle) Release(ctx context.Context) (errno syscall.Errno) {
	defer h.node.v.fs.track("release", h.node.zone, time.Now(), &errno)
	h.releaseLocks()
	h.closeHandle()
	h.node.v.fs.release(h.oi)
	return 0
}

// Getattr implements fs.FileGetattrer so fstat of an unlinked file works.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) (errno syscall.Errno) {
	defer h.node.v.fs.track("getattr", h.node.zone, time.Now(), &errno)
	return h.node.attr(out)
}

// Allocate implements fs.FileAllocater (fallocate(2)). acl decides the
// mode and the size it leads to; growing the file is then admitted like a
// truncate, and allocating blocks needs room on the store's disk.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) (errno syscall.Errno) {
	defer h.node.v.fs.track("fallocate", h.node.zone, time.Now(), &errno)
	if e := h.lockLost(acl.OpTruncate, false); e != 0 {
		return e
	}
	oi := h.oi
	oi.mu.Lock()
	old := oi.size
	newSize, d := acl.Allocate(mode, old, off, size)
	if !d.Allowed() {
		oi.mu.Unlock()
		return h.node.deny(acl.OpTruncate, "", d)
	}
	var blocks int64 // what the host allocates: nothing for a hole punch
	if mode&unix.FALLOC_FL_PUNCH_HOLE == 0 {
		blocks = int64(min(size, acl.MaxSize))
	}
	e := h.node.resizeLocked(oi, acl.OpTruncate, newSize, blocks, func() (uint64, error) {
		if err := unix.Fallocate(int(oi.blob.Fd()), mode, int64(off), int64(size)); err != nil {
			return old, err
		}
		return newSize, nil
	})
	oi.mu.Unlock()
	if e == 0 {
		h.node.v.fs.changedContent(h.node, oi.ino)
		h.node.v.fs.invalidate(h.node.v, h.node.zone, dataOf(oi.ino, int64(off), int64(size)))
	}
	return e
}

// Lseek implements fs.FileLseeker for SEEK_DATA and SEEK_HOLE.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (_ uint64, errno syscall.Errno) {
	defer h.node.v.fs.track("lseek", h.node.zone, time.Now(), &errno)
	n, err := unix.Seek(int(h.oi.blob.Fd()), int64(off), int(whence))
	if err != nil {
		return 0, h.node.v.fs.errno("lseek", err)
	}
	return uint64(n), 0
}

// truncate sets the size of a regular file, through its open state so
// concurrent writers and this agree, and persists it at once.
func (n *node) truncate(rec *shedfs.Inode, size uint64) syscall.Errno {
	f := n.v.fs
	oi, e := f.acquire(rec, false)
	if e != 0 {
		return e
	}
	defer f.release(oi)
	oi.mu.Lock()
	old := oi.size
	e = n.resizeLocked(oi, acl.OpTruncate, size, 0, func() (uint64, error) {
		if err := oi.blob.Truncate(int64(size)); err != nil {
			return old, err
		}
		return size, nil
	})
	if e == 0 {
		e = f.persistLocked(oi)
	}
	known := oi.known
	if e == 0 {
		oi.changed = false
	}
	oi.mu.Unlock()
	if e != 0 {
		return e
	}
	n.changed("truncate", "", int64(size))
	f.contentChanged(n, oi.ino, false, 0, known)
	f.changedContent(n, oi.ino)
	f.invalidate(n.v, n.zone, dataOf(oi.ino, int64(size), 0))
	return 0
}
