package fusefs

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/metadata"
)

// node is one stored inode as one view sees it. It holds only the inode
// number: the record lives in the store, so every view reads the same truth.
type node struct {
	fs.Inode
	v   *View
	ino uint64
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeGetxattrer     = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeListxattrer    = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
)

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// load reads the node's record with the not yet persisted state of an open
// file laid over it.
func (n *node) load() (*metadata.Inode, syscall.Errno) {
	f := n.v.fs
	rec, err := f.store.GetInode(n.ino)
	if err != nil {
		return nil, f.errno("getattr", err)
	}
	f.overlay(rec)
	return rec, 0
}

// fillAttr copies a record into the kernel's attribute struct, presenting
// the view's forced owner when it has one.
func (v *View) fillAttr(rec *metadata.Inode, out *fuse.Attr) {
	out.Ino = rec.Ino
	out.Mode = rec.Mode
	out.Nlink = rec.Nlink
	out.Size = rec.Size
	if rec.IsRegular() {
		out.Blocks = (rec.Size + 511) / 512
	}
	out.Blksize = 4096
	out.Rdev = rec.Rdev
	out.Owner = fuse.Owner{Uid: rec.Uid, Gid: rec.Gid}
	if v.opts.ForceOwner {
		out.Owner = fuse.Owner{Uid: v.opts.Uid, Gid: v.opts.Gid}
	}
	out.SetTimes(&rec.Atime, &rec.Mtime, &rec.Ctime)
}

// entry fills an EntryOut and returns the kernel-side inode for rec,
// reusing the one this view already has for the same inode number.
func (n *node) entry(ctx context.Context, rec *metadata.Inode, out *fuse.EntryOut) *fs.Inode {
	return n.entryUnder(ctx, &n.Inode, rec, out)
}

// entryUnder is entry for a child of any kernel-side parent, such as the
// synthetic groups/ folder.
func (n *node) entryUnder(ctx context.Context, parent *fs.Inode, rec *metadata.Inode, out *fuse.EntryOut) *fs.Inode {
	n.v.fillAttr(rec, &out.Attr)
	out.SetEntryTimeout(n.v.fs.opts.EntryTimeout)
	out.SetAttrTimeout(n.v.fs.opts.AttrTimeout)
	child := &node{v: n.v, ino: rec.Ino}
	return parent.NewInode(ctx, child, fs.StableAttr{Mode: rec.Mode & syscall.S_IFMT, Ino: rec.Ino})
}

// Lookup implements fs.NodeLookuper.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if ch := n.v.lookupReserved(ctx, n, name, out); ch != nil {
		return ch, 0
	}
	f := n.v.fs
	rec, err := f.store.Lookup(n.ino, name)
	if err != nil {
		return nil, f.errno("lookup", err)
	}
	f.overlay(rec)
	return n.entry(ctx, rec, out), 0
}

// Getattr implements fs.NodeGetattrer.
func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	rec, e := n.load()
	if e != 0 {
		return e
	}
	n.v.fillAttr(rec, &out.Attr)
	out.SetTimeout(n.v.fs.opts.AttrTimeout)
	return 0
}

// Setattr implements fs.NodeSetattrer: chmod, chown, truncate, utimens.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f := n.v.fs
	if size, ok := in.GetSize(); ok {
		rec, e := n.load()
		if e != 0 {
			return e
		}
		if rec.IsDir() {
			return syscall.EISDIR
		}
		if !rec.IsRegular() {
			return syscall.EINVAL
		}
		if e := f.truncate(rec, size); e != 0 {
			return e
		}
	}
	now := time.Now()
	mode, setMode := in.GetMode()
	uid, setUID := in.GetUID()
	gid, setGID := in.GetGID()
	atime, setAtime := in.GetATime()
	mtime, setMtime := in.GetMTime()
	if setMode || setUID || setGID || setAtime || setMtime {
		_, err := f.store.Update(n.ino, func(rec *metadata.Inode) error {
			if setMode {
				rec.Mode = rec.Mode&syscall.S_IFMT | mode&07777
			}
			if setUID {
				rec.Uid = uid
			}
			if setGID {
				rec.Gid = gid
			}
			if setAtime {
				rec.Atime = atime
			}
			if setMtime {
				rec.Mtime = mtime
				// A file being written keeps the time set here, not
				// the time of its last write.
				if oi := f.lookupOpen(rec.Ino); oi != nil {
					oi.mu.Lock()
					oi.mtime = mtime
					oi.mu.Unlock()
				}
			}
			rec.Ctime = now
			return nil
		}, nil)
		if err != nil {
			return f.errno("setattr", err)
		}
	}
	return n.Getattr(ctx, fh, out)
}

// caller returns the uid and gid new entries record: the calling process's.
func caller(ctx context.Context) (uint32, uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

// newChild creates an entry of any type below n with the zone, owner and
// default ownership mode a new entry gets.
func (n *node) newChild(ctx context.Context, name string, mode, rdev uint32, target string) (*metadata.Inode, syscall.Errno) {
	f := n.v.fs
	if e := n.v.checkCreate(n, name); e != 0 {
		return nil, e
	}
	parent, e := n.load()
	if e != 0 {
		return nil, e
	}
	uid, gid := caller(ctx)
	if parent.Mode&syscall.S_ISGID != 0 {
		// BSD group semantics, as ext4 does for setgid directories.
		gid = parent.Gid
		if mode&syscall.S_IFMT == syscall.S_IFDIR {
			mode |= syscall.S_ISGID
		}
	}
	tmpl := &metadata.Inode{
		Mode:    mode,
		Uid:     uid,
		Gid:     gid,
		Rdev:    rdev,
		Target:  target,
		Zone:    parent.Zone,
		Owner:   n.v.user,
		OwnMode: n.v.defaultOwnMode(parent.Zone),
	}
	rec, err := f.store.Create(n.ino, name, tmpl, nil)
	if err != nil {
		return nil, f.errno("create", err)
	}
	return rec, 0
}

// Create implements fs.NodeCreater.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	rec, e := n.newChild(ctx, name, syscall.S_IFREG|mode&07777, 0, "")
	if e != 0 {
		return nil, nil, 0, e
	}
	oi, e := n.v.fs.acquire(rec, true)
	if e != 0 {
		return nil, nil, 0, e
	}
	ch := n.entry(ctx, rec, out)
	return ch, &handle{node: ch.Operations().(*node), oi: oi, flags: flags}, 0, 0
}

// Open implements fs.NodeOpener.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	rec, e := n.load()
	if e != 0 {
		return nil, 0, e
	}
	if !rec.IsRegular() {
		return nil, 0, syscall.EINVAL
	}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if e := n.v.fs.truncate(rec, 0); e != 0 {
			return nil, 0, e
		}
	}
	oi, e := n.v.fs.acquire(rec, false)
	if e != 0 {
		return nil, 0, e
	}
	return &handle{node: n, oi: oi, flags: flags}, 0, 0
}

// Mkdir implements fs.NodeMkdirer.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	rec, e := n.newChild(ctx, name, syscall.S_IFDIR|mode&07777, 0, "")
	if e != 0 {
		return nil, e
	}
	return n.entry(ctx, rec, out), 0
}

// Mknod implements fs.NodeMknoder: fifos, sockets and empty regular files.
// Device nodes are refused: a sandbox hands out no devices.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFREG:
	default:
		return nil, syscall.EPERM
	}
	rec, e := n.newChild(ctx, name, mode, 0, "")
	if e != 0 {
		return nil, e
	}
	return n.entry(ctx, rec, out), 0
}

// Symlink implements fs.NodeSymlinker.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.v.checkSymlink(n, target); e != 0 {
		return nil, e
	}
	rec, e := n.newChild(ctx, name, syscall.S_IFLNK|0o777, 0, target)
	if e != 0 {
		return nil, e
	}
	return n.entry(ctx, rec, out), 0
}

// Readlink implements fs.NodeReadlinker.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	rec, e := n.load()
	if e != 0 {
		return nil, e
	}
	if rec.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return nil, syscall.EINVAL
	}
	return []byte(rec.Target), 0
}

// Link implements fs.NodeLinker.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	f := n.v.fs
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	if e := n.v.checkCreate(n, name); e != 0 {
		return nil, e
	}
	rec, err := f.store.Link(t.ino, n.ino, name)
	if err != nil {
		return nil, f.errno("link", err)
	}
	f.overlay(rec)
	return n.entry(ctx, rec, out), 0
}

// Unlink implements fs.NodeUnlinker.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, false)
}

// Rmdir implements fs.NodeRmdirer.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, true)
}

func (n *node) remove(name string, dir bool) syscall.Errno {
	f := n.v.fs
	if e := n.v.checkRemove(n, name); e != 0 {
		return e
	}
	rec, err := f.store.Unlink(n.ino, name, dir)
	if err != nil {
		return f.errno("unlink", err)
	}
	f.reclaimIfUnused(rec)
	return 0
}

// Rename implements fs.NodeRenamer (rename, RENAME_NOREPLACE,
// RENAME_EXCHANGE).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	f := n.v.fs
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if e := n.v.checkRename(n, name, np, newName); e != 0 {
		return e
	}
	replaced, err := f.store.Rename(n.ino, name, np.ino, newName, flags)
	if err != nil {
		return f.errno("rename", err)
	}
	f.reclaimIfUnused(replaced)
	return 0
}

// OpendirHandle implements fs.NodeOpendirHandler.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{node: n}, 0, 0
}

// Statfs implements fs.NodeStatfser.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return n.v.statfs(n, out)
}

// Fsync implements fs.NodeFsyncer for directories (fsyncdir) and for files
// synced without a handle: every committed change becomes durable.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	if err := n.v.fs.store.Sync(); err != nil {
		return n.v.fs.errno("fsync", err)
	}
	return 0
}
