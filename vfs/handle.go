package vfs

import (
	"context"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// Handle is one open of a regular file through a view, by any door: a
// FUSE view's file handle, or a tool call that opens, writes and closes.
// Every handle of one file shares the file's open state (openFile): one
// blob descriptor, and the size and times writes moved ahead of the
// store, persisted at flush, fsync and the last release.
type Handle struct {
	v     *View
	at    At
	of    *openFile
	flags uint32
	// locks are the lock owners that acted through this handle
	// (filelocks.go).
	locks lockRefs
	// flushed says the handle's descriptor was closed and nothing was
	// written through it since (closing.go); changed under
	// openTable.mu, as released is, which says the handle no longer
	// counts among its file's.
	flushed  atomic.Bool
	released bool
}

// Open opens regular file at with flags (the access mode, O_TRUNC,
// O_APPEND). It is decided as a read, after the content's scan state
// allows it (waiting for a pending verdict while ctx lasts); opening for
// writing is decided like a write, so that a file its mode forbids fails
// at open as on a local disk. O_TRUNC keeps the old content in the trash
// when the trash is on. The versions are those of the truncate.
func (v *View) Open(ctx context.Context, at At, flags uint32) (*Handle, []Version, syscall.Errno) {
	c := v.c
	if e := v.Visible(at, acl.OpRead); e != 0 {
		return nil, nil, e
	}
	rec, e := v.Load(at)
	if e != 0 {
		return nil, nil, e
	}
	if !rec.IsRegular() {
		return nil, nil, syscall.EINVAL
	}
	if e := v.admitContent(ctx, at, acl.OpRead); e != 0 {
		return nil, nil, e
	}
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	if rec.Nlink == 0 && write && c.Ghost(at.Ino) != nil {
		// Reclaimed, with its charge freed: nothing may grow it again.
		return nil, nil, syscall.ENOENT
	}
	var vs []Version
	if write {
		if e := v.RefuseKept(at, acl.OpWrite, rec); e != 0 {
			return nil, nil, e
		}
		if d := acl.Write(v.Actor(), acl.EntryOf(rec), acl.Quota{}, rec.Size, rec.Size); !d.Allowed() {
			return nil, nil, v.deny(acl.OpWrite, at, "", d)
		}
		if d := v.editLocked(at.Ino, true); !d.Allowed() {
			return nil, nil, v.deny(acl.OpWrite, at, "", d)
		}
		if flags&syscall.O_TRUNC != 0 && rec.Size > 0 && v.keepVersion(at, rec) {
			vs = v.truncated(at, 0)
			rec.Size = 0
		} else if flags&syscall.O_TRUNC != 0 && rec.Size > 0 {
			if vs, e = v.truncate(at, rec, 0); e != 0 {
				return nil, nil, e
			}
		}
	}
	oi, e := c.acquire(rec, false)
	if e != 0 {
		return nil, nil, e
	}
	h := &Handle{v: v, at: at, of: oi, flags: flags}
	if e := v.keep(h); e != 0 {
		return nil, nil, e
	}
	return h, vs, 0
}

// Reopen opens at again for a handle its door's kernel still holds from
// before a takeover (the daemon that opened it handed the view over):
// the open was decided then, so nothing is decided again, and a file
// unlinked since opens as well.
func (v *View) Reopen(at At, flags uint32) (*Handle, syscall.Errno) {
	rec, e := v.Load(at)
	if e != 0 {
		return nil, e
	}
	if !rec.IsRegular() {
		return nil, syscall.EINVAL
	}
	oi, e := v.c.acquire(rec, false)
	if e != 0 {
		return nil, e
	}
	h := &Handle{v: v, at: at, of: oi, flags: flags}
	if e := v.keep(h); e != 0 {
		return nil, e
	}
	return h, 0
}

// OpenNew opens the first handle of rec, a file Create just made as name
// in dir ("" for O_TMPFILE), creating its blob, and announces it; if the
// blob cannot be made, the file goes. The door names the handle's file
// (Bind) once it has its own node for it.
func (v *View) OpenNew(dir At, name string, rec *shedfs.Inode, flags uint32) (*Handle, []Version, syscall.Errno) {
	oi, e := v.c.acquire(rec, true)
	if e != 0 {
		v.Uncreate(dir, name, rec)
		return nil, nil, e
	}
	var vs []Version
	if name != "" {
		vs = v.Created(dir, acl.OpCreate, name)
	}
	h := &Handle{v: v, at: At{Ino: rec.Ino, Zone: rec.Zone}, of: oi, flags: flags}
	if e := v.keep(h); e != 0 {
		return nil, nil, e
	}
	return h, vs, 0
}

// Bind names the handle's file as the door's view shows it, for the
// audit trail.
func (h *Handle) Bind(paths Paths) { h.at.Paths = paths }

// Entry is what acl decides by for the open file now (its ownership and
// mode, updated when they change while it is open).
func (h *Handle) Entry() acl.Entry {
	h.of.mu.Lock()
	defer h.of.mu.Unlock()
	return h.of.entry
}

// Fd is the descriptor of the file's blob, for a door that lets its
// kernel read it directly (FUSE passthrough) or seeks in it.
func (h *Handle) Fd() uintptr {
	h.of.mu.Lock()
	defer h.of.mu.Unlock()
	return h.of.blob.Fd()
}

// SeekData answers lseek(2) with SEEK_DATA or SEEK_HOLE from the blob's
// holes. A bucket's cache has holes where it evicted or never fetched
// data, so there the whole file is data, as on a filesystem without hole
// reporting.
func (h *Handle) SeekData(off int64, whence int) (int64, syscall.Errno) {
	if h.Spliceable() {
		n, err := unix.Seek(int(h.Fd()), off, whence)
		if err != nil {
			return 0, h.v.c.Errno("lseek", err)
		}
		return n, 0
	}
	h.of.mu.Lock()
	size := int64(h.of.size)
	h.of.mu.Unlock()
	switch {
	case off < 0 || off >= size:
		return 0, syscall.ENXIO
	case whence == unix.SEEK_DATA:
		return off, 0
	case whence == unix.SEEK_HOLE:
		return size, 0
	}
	return 0, syscall.EINVAL
}

// ReadSpan decides a read of up to n bytes at off and returns the blob's
// descriptor and how many bytes from off it holds, for a door that
// splices them to its kernel without a copy (0: at or past the end).
func (h *Handle) ReadSpan(off int64, n int) (uintptr, int, syscall.Errno) {
	if e := h.lockLost(acl.OpRead, false); e != 0 {
		return 0, 0, e
	}
	oi := h.of
	oi.mu.Lock()
	entry, size, blob := oi.entry, oi.size, oi.blob
	oi.mu.Unlock()
	if d := acl.Read(h.v.Actor(), entry); !d.Allowed() {
		return 0, 0, h.v.deny(acl.OpRead, h.at, "", d)
	}
	if off < 0 || uint64(off) >= size {
		return 0, 0, 0
	}
	return blob.Fd(), int(min(uint64(n), size-uint64(off))), 0
}

// Spliceable reports whether the door may read the descriptor ReadSpan
// returns after the call, as a splice does: not on a store whose blobs
// are a bucket's cache, which may evict what was read before the door
// reads it (Read holds it).
func (h *Handle) Spliceable() bool { return h.v.c.blobs.Remote() == nil }

// Read reads into dest at off, for a door that copies the bytes.
func (h *Handle) Read(dest []byte, off int64) (int, syscall.Errno) {
	fd, n, e := h.ReadSpan(off, len(dest))
	if e != 0 || n == 0 {
		return 0, e
	}
	done, err := h.v.c.blobs.Reading(h.of.ino, off, int64(n))
	if err != nil {
		return 0, h.v.c.Errno("read blob", err)
	}
	defer done()
	got, err := unix.Pread(int(fd), dest[:n], off)
	if err != nil {
		return 0, h.v.c.Errno("read", err)
	}
	return got, 0
}

// Write writes data at off (at the end with O_APPEND), admitted like any
// growth; a short write reports what it wrote, and its error reaches the
// next Flush. The versions are the caller's own cache's to keep.
func (h *Handle) Write(data []byte, off int64) (int, []Version, syscall.Errno) {
	c := h.v.c
	oi := h.of
	c.used(h)
	if e := h.lockLost(acl.OpWrite, false); e != 0 {
		return 0, nil, e
	}
	if d := h.v.editLocked(oi.ino, false); !d.Allowed() {
		return 0, nil, h.v.deny(acl.OpWrite, h.at, "", d)
	}
	oi.mu.Lock()
	if h.flags&syscall.O_APPEND != 0 {
		off = int64(oi.size)
	}
	old := oi.size
	end := max(uint64(off)+uint64(len(data)), old)
	var written int
	e := h.v.resizeLocked(h.at, oi, acl.OpWrite, end, int64(len(data)), func() (uint64, error) {
		done, err := c.blobs.Changing(oi.ino, off, int64(len(data)))
		if err != nil {
			return old, err
		}
		defer done()
		n, err := oi.blob.WriteAt(data, off)
		written = n
		return max(uint64(off)+uint64(n), old), err
	})
	if written > 0 {
		c.wroteLocked(oi, off, old, data[:written])
	}
	if e != 0 && written > 0 && oi.writeErr == 0 {
		oi.writeErr = e
	}
	oi.mu.Unlock()
	if written == 0 && e != 0 {
		return 0, nil, e
	}
	vs := c.contentChanged(h.at.Zone, oi.ino, nil)
	// Outside the file's lock: delivery may wait on the other views'
	// kernels, which may wait on a write of theirs that needs the lock.
	c.fanOut(h.v, h.at.Zone, DataOf(oi.ino, off, int64(written)))
	return written, vs, 0
}

// Allocate is fallocate(2): acl decides the mode and the size it leads
// to; growing the file is then admitted like a truncate, and allocating
// blocks needs room on the store's disk.
func (h *Handle) Allocate(off, size uint64, mode uint32) ([]Version, syscall.Errno) {
	c := h.v.c
	oi := h.of
	c.used(h)
	if e := h.lockLost(acl.OpTruncate, false); e != 0 {
		return nil, e
	}
	if d := h.v.editLocked(oi.ino, false); !d.Allowed() {
		return nil, h.v.deny(acl.OpTruncate, h.at, "", d)
	}
	oi.mu.Lock()
	old := oi.size
	newSize, d := acl.Allocate(mode, old, off, size)
	if !d.Allowed() {
		oi.mu.Unlock()
		return nil, h.v.deny(acl.OpTruncate, h.at, "", d)
	}
	var blocks int64 // what the host allocates: nothing for a hole punch
	if mode&unix.FALLOC_FL_PUNCH_HOLE == 0 {
		blocks = int64(min(size, acl.MaxSize))
	}
	e := h.v.resizeLocked(h.at, oi, acl.OpTruncate, newSize, blocks, func() (uint64, error) {
		done, err := c.blobs.Changing(oi.ino, int64(off), int64(size))
		if err != nil {
			return old, err
		}
		defer done()
		if err := unix.Fallocate(int(oi.blob.Fd()), mode, int64(off), int64(size)); err != nil {
			return old, err
		}
		return newSize, nil
	})
	oi.mu.Unlock()
	if e != 0 {
		return nil, e
	}
	vs := c.contentChanged(h.at.Zone, oi.ino, nil)
	c.fanOut(h.v, h.at.Zone, DataOf(oi.ino, int64(off), int64(size)))
	return vs, 0
}

// Flush is a close of one descriptor: the size is seen by every view,
// held in the open state for the last release to persist (hold.go), or
// persisted now. It reports the first write error since the last flush.
// The handle counts as closing from then on (closing.go).
func (h *Handle) Flush() syscall.Errno {
	c := h.v.c
	oi := h.of
	defer c.flushed(h)
	oi.mu.Lock()
	defer oi.mu.Unlock()
	if !h.flushHeldLocked(oi) {
		if e := c.persistLocked(oi); e != 0 {
			return e
		}
		if oi.changed {
			oi.changed = false
			h.v.contentChanged(h.at, true, int64(oi.size), oi.known)
		}
	}
	c.blobs.Flushed(oi.ino)
	e := oi.writeErr
	oi.writeErr = 0
	return e
}

// Fsync makes the file durable: the blob first, then the metadata that
// describes it, then the metadata log, so that a synced size never points
// past synced content.
func (h *Handle) Fsync() syscall.Errno {
	c := h.v.c
	oi := h.of
	oi.mu.Lock()
	defer oi.mu.Unlock()
	if err := unix.Fdatasync(int(oi.blob.Fd())); err != nil {
		return c.Errno("fsync blob", err)
	}
	if oi.newBlob {
		if err := c.blobs.SyncDir(oi.ino); err != nil {
			return c.Errno("fsync blob dir", err)
		}
		oi.newBlob = false
	}
	if err := c.blobs.Durable(oi.ino); err != nil {
		return c.Errno("fsync blob upload", err)
	}
	if e := c.persistLocked(oi); e != 0 {
		return e
	}
	if err := c.store.Sync(); err != nil {
		return c.Errno("fsync metadata", err)
	}
	return 0
}

// Release ends the handle: the locks its owners took through it alone
// go; the file's last handle persists it, closes its blob and reclaims it
// if it lost its last link. It may be called more than once (the view's
// Close may have released it).
func (h *Handle) Release() {
	h.releaseLocks()
	if h.v.forget(h) {
		h.v.c.release(h.of, h)
	}
}

// keep counts h among the view's handles; a view closed meanwhile (its
// connection aborted) gets none: ENOTCONN, and h is released.
func (v *View) keep(h *Handle) syscall.Errno {
	o := &v.open
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		v.c.release(h.of, h)
		return syscall.ENOTCONN
	}
	if o.files == nil {
		o.files = make(map[*Handle]struct{})
	}
	o.files[h] = struct{}{}
	o.mu.Unlock()
	return 0
}

// forget takes h out of the view's handles, reporting whether it was
// there (not released yet).
func (v *View) forget(h *Handle) bool {
	o := &v.open
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.files[h]; !ok {
		return false
	}
	delete(o.files, h)
	return true
}

// DirOpened counts an open directory handle of the view, which holds a
// removed directory like an open file holds a file.
func (v *View) DirOpened(ino uint64) {
	o := &v.open
	o.mu.Lock()
	if o.dirs == nil {
		o.dirs = make(map[uint64]int)
	}
	o.dirs[ino]++
	o.mu.Unlock()
	v.c.DirOpened(ino)
}

// DirClosed is DirOpened's end.
func (v *View) DirClosed(ino uint64) {
	o := &v.open
	o.mu.Lock()
	if o.dirs[ino] <= 0 {
		o.mu.Unlock()
		return // released by Close
	}
	if o.dirs[ino]--; o.dirs[ino] == 0 {
		delete(o.dirs, ino)
	}
	o.mu.Unlock()
	v.c.DirClosed(ino)
}

// Close ends the view: the locks taken through it and whatever its
// handles still hold are released, as their door will release nothing
// any more (a FUSE view whose connection was aborted by a forced session
// close gets no RELEASE from its kernel). Files and directories unlinked
// meanwhile go then.
func (v *View) Close() {
	v.dropLocks()
	o := &v.open
	o.mu.Lock()
	o.closed = true
	files, dirs := o.files, o.dirs
	o.files, o.dirs = nil, nil
	o.mu.Unlock()
	for h := range files {
		v.c.release(h.of, h)
	}
	for ino, n := range dirs {
		for range n {
			v.c.DirClosed(ino)
		}
	}
}
