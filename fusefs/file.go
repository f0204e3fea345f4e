package fusefs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// handle is one open(2) of a regular file in one view: the core's handle
// (vfs.Handle, which holds the file's open state) with what the kernel
// needs beside it.
type handle struct {
	node  *node
	vh    *vfs.Handle
	flags uint32
	mode  ioMode
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

// ioModes are the ioCounts of a view's open inodes.
type ioModes struct {
	mu sync.Mutex
	m  map[uint64]*ioCounts
}

// ptHandle is a read-only handle whose reads bypass the daemon. It is a
// type of its own because go-fuse gives passthrough to every handle of an
// inode that has the PassthroughFd method once one of them has it.
type ptHandle struct {
	*handle
}

// PassthroughFd implements fs.FilePassthroughFder.
func (h *ptHandle) PassthroughFd() (int, bool) {
	return int(h.vh.Fd()), true
}

// newHandle opens a kernel handle on vh, choosing the kernel I/O mode per
// inode and view. Passthrough skips the daemon, and with it every
// per-write check, and the kernel then forces it on every later open of
// the inode in the view. So it is chosen only for a read-only open of a
// file this view may not write at all (uploads/, owner_ro, another's
// owner-mode file): no writer of this view can come after it. A write
// open that still meets passthrough readers (the mode changed since they
// opened) fails with ETXTBSY, as writing to a running executable does,
// rather than letting the kernel fail it with EIO or the write bypass the
// quota.
func (n *node) newHandle(vh *vfs.Handle, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	h := &handle{node: n, vh: vh, flags: flags}
	vh.Bind(n)
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	io := &n.v.io
	io.mu.Lock()
	defer io.mu.Unlock()
	if io.m == nil {
		io.m = make(map[uint64]*ioCounts)
	}
	c := io.m[n.ino]
	if c == nil {
		c = &ioCounts{}
		io.m[n.ino] = c
	}
	switch {
	case write && c.passthrough > 0:
		return nil, 0, n.deny(acl.OpWrite, "", acl.WriteOpen(c.passthrough))
	case !write && n.v.fs.opts.Passthrough && vh.Spliceable() && c.cached == 0 && acl.Passthrough(n.v.actor(), vh.Entry()):
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
	io := &h.node.v.io
	io.mu.Lock()
	defer io.mu.Unlock()
	c := io.m[h.node.ino]
	if c == nil {
		return
	}
	if h.mode == modePassthrough {
		c.passthrough--
	} else {
		c.cached--
	}
	if c.passthrough == 0 && c.cached == 0 {
		delete(io.m, h.node.ino)
	}
}

// Read implements fs.FileReader.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (_ fuse.ReadResult, errno syscall.Errno) {
	defer h.node.v.fs.track("read", h.node.zone, time.Now(), &errno)
	if !h.vh.Spliceable() {
		n, e := h.vh.Read(dest, off)
		if e != 0 {
			return nil, e
		}
		h.node.v.fs.countRead(h.node.zone, n)
		return fuse.ReadResultData(dest[:n]), 0
	}
	fd, n, e := h.vh.ReadSpan(off, len(dest))
	if e != 0 {
		return nil, e
	}
	if n == 0 {
		return fuse.ReadResultData(nil), 0
	}
	h.node.v.fs.countRead(h.node.zone, n)
	// The kernel gets the bytes spliced from the blob, without a copy
	// through the daemon where the kernel allows it.
	return fuse.ReadResultFd(fd, off, n), 0
}

// Write implements fs.FileWriter.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (_ uint32, errno syscall.Errno) {
	defer h.node.v.fs.track("write", h.node.zone, time.Now(), &errno)
	if e := h.killSetIDOnWrite(ctx); e != 0 {
		return 0, e
	}
	written, vs, e := h.vh.Write(data, off)
	if e != 0 {
		return 0, e
	}
	h.node.v.fs.countWrite(h.node.zone, written)
	own(vs, h.node)
	return uint32(written), 0
}

// Flush implements fs.FileFlusher: close(2) of one descriptor makes the
// size seen by every view (vfs.Handle.Flush).
func (h *handle) Flush(ctx context.Context) (errno syscall.Errno) {
	defer h.node.v.fs.track("flush", h.node.zone, time.Now(), &errno)
	return h.vh.Flush()
}

// Fsync implements fs.FileFsyncer (vfs.Handle.Fsync).
func (h *handle) Fsync(ctx context.Context, flags uint32) (errno syscall.Errno) {
	defer h.node.v.fs.track("fsync", h.node.zone, time.Now(), &errno)
	return h.vh.Fsync()
}

// Release implements fs.FileReleaser.
func (h *handle) Release(ctx context.Context) (errno syscall.Errno) {
	defer h.node.v.fs.track("release", h.node.zone, time.Now(), &errno)
	h.closeHandle()
	h.vh.Release()
	return 0
}

// Getattr implements fs.FileGetattrer so fstat of an unlinked file works.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) (errno syscall.Errno) {
	defer h.node.v.fs.track("getattr", h.node.zone, time.Now(), &errno)
	return h.node.attr(out)
}

// Allocate implements fs.FileAllocater (fallocate(2), vfs.Handle.Allocate).
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) (errno syscall.Errno) {
	defer h.node.v.fs.track("fallocate", h.node.zone, time.Now(), &errno)
	vs, e := h.vh.Allocate(off, size, mode)
	own(vs, h.node)
	return e
}

// Lseek implements fs.FileLseeker for SEEK_DATA and SEEK_HOLE.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (_ uint64, errno syscall.Errno) {
	defer h.node.v.fs.track("lseek", h.node.zone, time.Now(), &errno)
	n, e := h.vh.SeekData(int64(off), int(whence))
	return uint64(n), e
}
