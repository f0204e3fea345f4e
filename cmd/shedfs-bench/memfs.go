package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/fuseuring"
)

// serveMemfsArg is the hidden first argument that turns this binary into the
// in-memory FUSE server of target memfs.
const serveMemfsArg = "-serve-memfs"

// memfsTimeout is how long the kernel may keep memfs's entries, attributes
// and negative entries: a view's (fusefs's defaults), so that memfs is asked
// exactly what a view is asked.
const memfsTimeout = time.Hour

// serveMemfs mounts an empty in-memory filesystem at mnt (with the kernel's
// writeback cache if writeback) and serves it until SIGTERM or SIGINT, or
// until someone unmounts it.
func serveMemfs(mnt string, writeback, uring bool) error {
	server, err := mountMemfsOver(mnt, writeback, uring)
	if err != nil {
		return err
	}
	serveUntilSignal("memfs", server, mnt)
	return nil
}

// mountMemfs mounts an empty memfs at mnt.
//
// memfs is the ceiling of the bench, not a product: every name, attribute
// and byte lives in the daemon's memory and nothing is written anywhere, so
// what it costs is go-fuse and the kernel's FUSE round trips and nothing
// else. It is mounted as a view is (hour-long entry, attribute and negative
// timeouts, kernel permission checks, 1 MiB writes, no passthrough), so a
// workload sends it the requests it sends a view. No filesystem served
// through go-fuse on this kernel, shedfs included, can beat it by much; the
// ratio memfs/loopback says how far above the loopback a FUSE daemon can get
// at all (docs/performance.md, "The ceiling"). With writeback the kernel
// also keeps written pages and sizes itself and sends WRITEs in page-cache
// batches (FUSE_WRITEBACK_CACHE), which views do not negotiate.
func mountMemfs(mnt string, writeback bool) (*fuse.Server, error) {
	return mountMemfsOver(mnt, writeback, false)
}

// mountMemfsOver mounts memfs, served over FUSE io_uring if uring (target
// memfs-uring: the transport's own gain, apart from shedfs's work). The
// kernel's switch must be on; the bench never turns it on.
func mountMemfsOver(mnt string, writeback, uring bool) (*fuse.Server, error) {
	mfs := &memfs{}
	root := mfs.newNode(syscall.S_IFDIR|0o755, 0, 0)
	timeout := memfsTimeout
	opts := &fs.Options{
		AttrTimeout:     &timeout,
		EntryTimeout:    &timeout,
		NegativeTimeout: &timeout,
		NullPermissions: true,
		RootStableAttr:  &fs.StableAttr{Ino: root.ino, Mode: syscall.S_IFDIR},
		MountOptions: fuse.MountOptions{
			DirectMount: true,
			FsName:      "memfs",
			Name:        "shedfs-bench-memfs",
			Options:     []string{"default_permissions"},
			MaxWrite:    1 << 20,
		},
	}
	if writeback {
		opts.MountOptions.ExtraCapabilities = fuse.CAP_WRITEBACK_CACHE
	}
	if !uring {
		server, err := fs.Mount(mnt, root, opts)
		if err != nil {
			return nil, fmt.Errorf("mount memfs at %s: %w", mnt, err)
		}
		return server, nil
	}
	if err := fuseuring.Enabled(); err != nil {
		return nil, err
	}
	var trErr error
	raw := fuseuring.Wrap(fs.NewNodeFS(root, opts), &opts.MountOptions, fuseuring.Options{MaxWrite: opts.MaxWrite}, func(_ *fuseuring.Transport, err error) { trErr = err })
	server, err := fuse.NewServer(raw, mnt, &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount memfs at %s: %w", mnt, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, fmt.Errorf("mount memfs at %s: %w", mnt, err)
	}
	if trErr != nil {
		server.Unmount()
		return nil, fmt.Errorf("memfs over io_uring: %w", trErr)
	}
	return server, nil
}

// memfs numbers the nodes of one in-memory tree.
type memfs struct {
	lastIno atomic.Uint64
}

// newNode is a node not yet in the tree, owned by uid:gid.
func (m *memfs) newNode(mode, uid, gid uint32) *memNode {
	now := time.Now()
	n := &memNode{fs: m, ino: m.lastIno.Add(1)}
	n.attr.Ino = n.ino
	n.attr.Mode = mode
	n.attr.Nlink = 1
	n.attr.Owner = fuse.Owner{Uid: uid, Gid: gid}
	n.attr.SetTimes(&now, &now, &now)
	return n
}

// memNode is a directory, file or symlink of memfs. The tree itself (which
// name is where) is go-fuse's: an Inode's children are the entries, looked
// up, listed, added and removed by go-fuse's bridge. Nodes are persistent
// inodes, so that a FORGET from the kernel (a dropped dentry cache, as the
// cold-read workloads do) does not take the entry out of the tree.
type memNode struct {
	fs.Inode
	fs  *memfs
	ino uint64

	mu   sync.Mutex
	attr fuse.Attr
	data []byte // file content or symlink target
}

var (
	_ fs.NodeGetattrer  = (*memNode)(nil)
	_ fs.NodeSetattrer  = (*memNode)(nil)
	_ fs.NodeCreater    = (*memNode)(nil)
	_ fs.NodeMkdirer    = (*memNode)(nil)
	_ fs.NodeSymlinker  = (*memNode)(nil)
	_ fs.NodeLinker     = (*memNode)(nil)
	_ fs.NodeReadlinker = (*memNode)(nil)
	_ fs.NodeUnlinker   = (*memNode)(nil)
	_ fs.NodeRmdirer    = (*memNode)(nil)
	_ fs.NodeRenamer    = (*memNode)(nil)
	_ fs.NodeOpener     = (*memNode)(nil)
	_ fs.NodeReader     = (*memNode)(nil)
	_ fs.NodeWriter     = (*memNode)(nil)
	_ fs.NodeFlusher    = (*memNode)(nil)
	_ fs.NodeFsyncer    = (*memNode)(nil)
	_ fs.NodeStatfser   = (*memNode)(nil)
)

// The methods below are go-fuse's node interfaces, listed above.

// fillLocked copies n's attributes to out; n.mu is held (or n is not in
// the tree yet).
func (n *memNode) fillLocked(out *fuse.Attr) {
	*out = n.attr
	out.Size = uint64(len(n.data))
	out.Blocks = (out.Size + 511) / 512
	out.Blksize = 4096
}

func (n *memNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fillLocked(&out.Attr)
	out.SetTimeout(memfsTimeout)
	return 0
}

func (n *memNode) Setattr(_ context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if mode, ok := in.GetMode(); ok {
		n.attr.Mode = n.attr.Mode&syscall.S_IFMT | mode&^syscall.S_IFMT
	}
	if uid, ok := in.GetUID(); ok {
		n.attr.Uid = uid
	}
	if gid, ok := in.GetGID(); ok {
		n.attr.Gid = gid
	}
	if size, ok := in.GetSize(); ok {
		if size > uint64(len(n.data)) {
			n.data = append(n.data, make([]byte, int(size)-len(n.data))...)
		}
		n.data = n.data[:size]
		n.attr.SetTimes(nil, &now, nil)
	}
	if atime, ok := in.GetATime(); ok {
		n.attr.SetTimes(&atime, nil, nil)
	}
	if mtime, ok := in.GetMTime(); ok {
		n.attr.SetTimes(nil, &mtime, nil)
	}
	n.attr.SetTimes(nil, nil, &now)
	n.fillLocked(&out.Attr)
	out.SetTimeout(memfsTimeout)
	return 0
}

// child makes the node of a new entry of n, a directory, file or symlink
// by mode, and fills out.
func (n *memNode) child(ctx context.Context, mode uint32, data []byte, out *fuse.EntryOut) *fs.Inode {
	uid, gid := uint32(0), uint32(0)
	if c, ok := fuse.FromContext(ctx); ok {
		uid, gid = c.Uid, c.Gid
	}
	ch := n.fs.newNode(mode, uid, gid)
	ch.data = data
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		ch.attr.Nlink = 2
	}
	ch.fillLocked(&out.Attr)
	out.SetEntryTimeout(memfsTimeout)
	out.SetAttrTimeout(memfsTimeout)
	n.touch()
	return n.NewPersistentInode(ctx, ch, fs.StableAttr{Mode: mode & syscall.S_IFMT, Ino: ch.ino})
}

// touch moves a directory's mtime and ctime, as a change of its entries does.
func (n *memNode) touch() {
	now := time.Now()
	n.mu.Lock()
	n.attr.SetTimes(nil, &now, &now)
	n.mu.Unlock()
}

func (n *memNode) Create(ctx context.Context, _ string, _ uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return n.child(ctx, syscall.S_IFREG|mode&0o7777, nil, out), nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *memNode) Mkdir(ctx context.Context, _ string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.child(ctx, syscall.S_IFDIR|mode&0o7777, nil, out), 0
}

func (n *memNode) Symlink(ctx context.Context, target, _ string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.child(ctx, syscall.S_IFLNK|0o777, []byte(target), out), 0
}

func (n *memNode) Link(_ context.Context, target fs.InodeEmbedder, _ string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*memNode)
	if !ok {
		return nil, syscall.EXDEV
	}
	t.mu.Lock()
	t.attr.Nlink++
	t.fillLocked(&out.Attr)
	t.mu.Unlock()
	out.SetEntryTimeout(memfsTimeout)
	out.SetAttrTimeout(memfsTimeout)
	n.touch()
	return t.EmbeddedInode(), 0
}

func (n *memNode) Readlink(context.Context) ([]byte, syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]byte(nil), n.data...), 0
}

func (n *memNode) Unlink(_ context.Context, name string) syscall.Errno {
	ch := n.GetChild(name)
	if ch == nil {
		return syscall.ENOENT
	}
	dropLink(ch)
	n.touch()
	return 0
}

// dropLink counts one name of a file fewer, for an unlink or a rename
// over it.
func dropLink(in *fs.Inode) {
	if m, ok := in.Operations().(*memNode); ok {
		m.mu.Lock()
		m.attr.Nlink--
		m.mu.Unlock()
	}
}

func (n *memNode) Rmdir(_ context.Context, name string) syscall.Errno {
	if ch := n.GetChild(name); ch != nil && len(ch.Children()) > 0 {
		return syscall.ENOTEMPTY
	}
	n.touch()
	return 0
}

func (n *memNode) Rename(_ context.Context, _ string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if flags != 0 {
		return syscall.EINVAL
	}
	if old := newParent.EmbeddedInode().GetChild(newName); old != nil {
		if old.IsDir() && len(old.Children()) > 0 {
			return syscall.ENOTEMPTY
		}
		if !old.IsDir() {
			dropLink(old)
		}
	}
	n.touch()
	if p, ok := newParent.(*memNode); ok && p != n {
		p.touch()
	}
	return 0
}

func (n *memNode) Open(context.Context, uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *memNode) Read(_ context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if off >= int64(len(n.data)) {
		return fuse.ReadResultData(nil), 0
	}
	k := copy(dest, n.data[off:])
	return fuse.ReadResultData(dest[:k]), 0
}

func (n *memNode) Write(_ context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if end := int(off) + len(data); end > len(n.data) {
		old := len(n.data)
		n.data = slices.Grow(n.data, end-old)[:end]
		// A hole, or bytes a truncate left in the capacity, reads as zeros.
		if int(off) > old {
			clear(n.data[old:off])
		}
	}
	copy(n.data[off:], data)
	now := time.Now()
	n.attr.SetTimes(nil, &now, &now)
	return uint32(len(data)), 0
}

func (n *memNode) Flush(context.Context, fs.FileHandle) syscall.Errno { return 0 }

func (n *memNode) Fsync(context.Context, fs.FileHandle, uint32) syscall.Errno { return 0 }

func (n *memNode) Statfs(_ context.Context, out *fuse.StatfsOut) syscall.Errno {
	const blocks = 1 << 30 // 4 TiB of 4 KiB blocks: never the limit
	out.Bsize, out.Frsize = 4096, 4096
	out.Blocks, out.Bfree, out.Bavail = blocks, blocks, blocks
	out.Files, out.Ffree = 1<<40, 1<<40
	out.NameLen = 255
	return 0
}
