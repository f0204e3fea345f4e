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

	"github.com/shedfs/shedfs/metadata"
)

// openInode is the state of a regular file while any view holds it open:
// one blob descriptor shared by every handle, and the size and times that
// writes have moved ahead of the store. They are persisted at flush, fsync
// and the last release, so a stream of writes costs no transaction each.
type openInode struct {
	ino uint64

	mu       sync.Mutex
	blob     *os.File
	refs     int // handles, guarded by FS.mu
	unlinked bool
	// dirty is set when size or mtime differ from the store.
	dirty bool
	// newBlob is set until the blob's directory entry has been made
	// durable by an fsync.
	newBlob bool
	size    uint64
	mtime   time.Time
	// writeErr is the first write error since the last flush, reported
	// to the closer as close(2) expects.
	writeErr syscall.Errno
}

// acquire returns the open state of ino, opening the blob on first use.
func (f *FS) acquire(n *metadata.Inode, create bool) (*openInode, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if oi := f.open[n.Ino]; oi != nil {
		oi.refs++
		return oi, 0
	}
	blob, err := f.blobs.OpenFile(n.Ino, true)
	if err != nil {
		return nil, f.errno("open blob", err)
	}
	oi := &openInode{ino: n.Ino, blob: blob, refs: 1, size: n.Size, mtime: n.Mtime, newBlob: create}
	f.open[n.Ino] = oi
	return oi, 0
}

// lookupOpen returns the open state of ino, or nil.
func (f *FS) lookupOpen(ino uint64) *openInode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open[ino]
}

// release drops one handle; the last one persists, closes the blob and
// reclaims the inode if it was unlinked meanwhile.
func (f *FS) release(oi *openInode) {
	f.mu.Lock()
	oi.refs--
	last := oi.refs == 0
	if last {
		delete(f.open, oi.ino)
	}
	f.mu.Unlock()
	if !last {
		return
	}
	oi.mu.Lock()
	if !oi.unlinked {
		f.persistLocked(oi)
	}
	oi.blob.Close()
	unlinked := oi.unlinked
	oi.mu.Unlock()
	if unlinked {
		f.reclaim(oi.ino)
	}
}

// persistLocked writes the in-memory size and mtime to the store.
// oi.mu must be held.
func (f *FS) persistLocked(oi *openInode) syscall.Errno {
	if !oi.dirty {
		return 0
	}
	size, mtime := oi.size, oi.mtime
	_, err := f.store.Update(oi.ino, func(n *metadata.Inode) error {
		n.Size = size
		n.Mtime = mtime
		n.Ctime = mtime
		return nil
	}, nil)
	if err != nil {
		return f.errno("persist size", err)
	}
	oi.dirty = false
	return 0
}

// overlay puts the not yet persisted size and times of an open inode over
// a stored record.
func (f *FS) overlay(n *metadata.Inode) {
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
	}
	oi.mu.Unlock()
}

// handle is one open(2) of a regular file in one view.
type handle struct {
	node  *node
	oi    *openInode
	flags uint32
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
)

// Read implements fs.FileReader.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.oi.blob.ReadAt(dest, off)
	if err != nil && n == 0 && !isEOF(err) {
		return nil, h.node.v.fs.errno("read", err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write implements fs.FileWriter.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	oi := h.oi
	oi.mu.Lock()
	defer oi.mu.Unlock()
	if h.flags&syscall.O_APPEND != 0 {
		off = int64(oi.size)
	}
	n, err := oi.blob.WriteAt(data, off)
	if end := uint64(off) + uint64(n); end > oi.size {
		oi.size = end
	}
	if n > 0 {
		oi.mtime = time.Now()
		oi.dirty = true
	}
	if err != nil {
		e := h.node.v.fs.errno("write", err)
		if oi.writeErr == 0 {
			oi.writeErr = e
		}
		if n == 0 {
			return 0, e
		}
	}
	return uint32(n), 0
}

// Flush implements fs.FileFlusher: close(2) of one descriptor persists the
// size so that another view's stat sees it.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	oi := h.oi
	oi.mu.Lock()
	defer oi.mu.Unlock()
	if e := h.node.v.fs.persistLocked(oi); e != 0 {
		return e
	}
	e := oi.writeErr
	oi.writeErr = 0
	return e
}

// Fsync implements fs.FileFsyncer: the blob first, then the metadata that
// describes it, then the metadata log, so that a synced size never points
// past synced content.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
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
func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.node.v.fs.release(h.oi)
	return 0
}

// Getattr implements fs.FileGetattrer so fstat of an unlinked file works.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.node.Getattr(ctx, nil, out)
}

// Allocate implements fs.FileAllocater (fallocate(2)).
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	oi := h.oi
	oi.mu.Lock()
	defer oi.mu.Unlock()
	if err := unix.Fallocate(int(oi.blob.Fd()), mode, int64(off), int64(size)); err != nil {
		return h.node.v.fs.errno("fallocate", err)
	}
	if mode&unix.FALLOC_FL_KEEP_SIZE == 0 && off+size > oi.size {
		oi.size = off + size
	}
	oi.mtime = time.Now()
	oi.dirty = true
	return 0
}

// Lseek implements fs.FileLseeker for SEEK_DATA and SEEK_HOLE.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	n, err := unix.Seek(int(h.oi.blob.Fd()), int64(off), int(whence))
	if err != nil {
		return 0, h.node.v.fs.errno("lseek", err)
	}
	return uint64(n), 0
}

// truncate sets the size of a regular file, through its open state when it
// has one so concurrent writers and this agree.
func (f *FS) truncate(n *metadata.Inode, size uint64) syscall.Errno {
	oi, e := f.acquire(n, false)
	if e != 0 {
		return e
	}
	defer f.release(oi)
	oi.mu.Lock()
	defer oi.mu.Unlock()
	if err := oi.blob.Truncate(int64(size)); err != nil {
		return f.errno("truncate", err)
	}
	oi.size = size
	oi.mtime = time.Now()
	oi.dirty = true
	return f.persistLocked(oi)
}
