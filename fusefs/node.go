package fusefs

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// node is one stored inode as one view sees it. It holds the inode number
// and the zone, which is fixed at creation; everything else is read from
// the store, so every view reads the same truth.
type node struct {
	fs.Inode
	v    *View
	ino  uint64
	zone shedfs.Zone
	// seen is the content version this view's kernel last opened the
	// inode at (see contentVersions).
	seen atomic.Uint64
	// gen counts the changes made through this view (own), which the
	// content version does not count in a zone no other view shows: a
	// directory's listings compare it (listings.go).
	gen atomic.Uint64
}

// load reads the node's record with the not yet persisted state of an open
// file laid over it (vfs.View.Load).
func (n *node) load() (*shedfs.Inode, syscall.Errno) { return n.v.vv.Load(n.at()) }

// visible checks that the view may still reach this node
// (vfs.View.Visible).
func (n *node) visible(op acl.Op) syscall.Errno { return n.v.vv.Visible(n.at(), op) }

// own moves this view's content versions of the nodes an operation
// through it changed: its kernel saw the change and may keep its cache.
func own(vs []vfs.Version, nodes ...*node) {
	for _, n := range nodes {
		n.gen.Add(1)
	}
	for _, v := range vs {
		for _, n := range nodes {
			if n.ino == v.Ino {
				n.seen.CompareAndSwap(v.Before, v.After)
			}
		}
	}
}

// fillAttr copies a record into the kernel's attribute struct, presenting
// the view's forced owner when it has one.
func (v *View) fillAttr(rec *shedfs.Inode, out *fuse.Attr) {
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
	if o, ok := v.presentedOwner(); ok {
		out.Owner = o
	}
	out.SetTimes(&rec.Atime, &rec.Mtime, &rec.Ctime)
}

// entry fills an EntryOut and returns the kernel-side inode for rec,
// reusing the one this view already has for the same inode number.
func (n *node) entry(ctx context.Context, rec *shedfs.Inode, out *fuse.EntryOut) *fs.Inode {
	return n.v.entryUnder(ctx, &n.Inode, rec, out)
}

// entryUnder is entry for a child of any kernel-side parent, such as the
// synthetic groups/ folder.
func (v *View) entryUnder(ctx context.Context, parent *fs.Inode, rec *shedfs.Inode, out *fuse.EntryOut) *fs.Inode {
	rec = v.learn(rec)
	v.fillAttr(rec, &out.Attr)
	out.SetEntryTimeout(v.fs.opts.EntryTimeout)
	out.SetAttrTimeout(v.fs.opts.AttrTimeout)
	child := &node{v: v, ino: rec.Ino, zone: rec.Zone}
	return parent.NewInode(ctx, child, fs.StableAttr{Mode: rec.Mode & syscall.S_IFMT, Ino: rec.Ino})
}

// learn counts an entry of a shared inode that this view's kernel is
// about to be given, and returns its record read after that: a change
// committed later finds the view among the holders and invalidates the
// entry, one committed before is in the record.
func (v *View) learn(rec *shedfs.Inode) *shedfs.Inode {
	if !v.fs.sharedIn(rec.Zone) {
		return rec
	}
	v.fs.known.learn(v, rec.Ino)
	since := v.fs.core.Clock()
	fresh, err := v.fs.store.GetInode(rec.Ino)
	if err != nil {
		return rec
	}
	return v.vv.Overlaid(fresh, since)
}

// Lookup implements fs.NodeLookuper.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.v.fs.track("lookup", n.zone, time.Now(), &errno)
	return n.resolve(ctx, name, nil, n.v.fs.core.Clock(), out)
}

// resolve answers for name in n: a LOOKUP, or one entry of a READDIRPLUS
// reply. known, when not nil, is name's record as a batch just read it
// (readdirplus.go); otherwise the store is asked. since is the persist
// clock before either was read (vfs/hold.go).
func (n *node) resolve(ctx context.Context, name string, known *shedfs.Inode, since uint64, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if ch := n.v.lookupReserved(ctx, n, name, out); ch != nil {
		return ch, 0
	}
	vv := n.v.vv
	if e := vv.CheckLookup(n.at(), name); e != 0 {
		return nil, e
	}
	neg := n.expectAbsent(name)
	rec, stored, e := vv.Resolve(n.at(), name, known, since)
	if !stored {
		n.missed(name, neg, e, out)
		return nil, e
	}
	if neg {
		n.v.fs.negatives.found(n.v, n.ino, name)
	}
	if e != 0 {
		return nil, e
	}
	return n.entry(ctx, rec, out), 0
}

// Getattr implements fs.NodeGetattrer.
func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.v.fs.track("getattr", n.zone, time.Now(), &errno)
	return n.attr(out)
}

// attr answers with n's attributes: a GETATTR, and the reply of a SETATTR
// or of an fstat through a handle, each counted once as its own request.
func (n *node) attr(out *fuse.AttrOut) syscall.Errno {
	if e := n.visible(acl.OpRead); e != 0 {
		return e
	}
	rec, e := n.load()
	if e != 0 {
		return e
	}
	n.v.fillAttr(rec, &out.Attr)
	out.SetTimeout(n.v.fs.opts.AttrTimeout)
	return 0
}

// Setattr implements fs.NodeSetattrer: chmod, chown, truncate, utimens,
// and the set-ID bits these clear (killpriv.go).
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.v.fs.track("setattr", n.zone, time.Now(), &errno)
	if e := n.setattr(fh, in, out); e != 0 {
		return e
	}
	return n.killSetIDAfter(in, out)
}

// setattr is a SETATTR but for the set-ID bits it clears.
func (n *node) setattr(fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	vv := n.v.vv
	rec, e := n.load()
	if e != 0 {
		return e
	}
	if fh == nil {
		if e := vv.RefuseKept(n.at(), acl.OpSetattr, rec); e != 0 {
			return e
		}
	}
	if size, ok := in.GetSize(); ok {
		vs, e := vv.Truncate(n.at(), rec, size)
		if e != 0 {
			return e
		}
		own(vs, n)
	}
	var s vfs.SetAttr
	s.Mode, s.SetMode = in.GetMode()
	s.Uid, s.SetUID = in.GetUID()
	s.Gid, s.SetGID = in.GetGID()
	s.Atime, s.SetAtime = in.GetATime()
	s.Mtime, s.SetMtime = in.GetMTime()
	if e := vv.Setattr(n.at(), rec, s); e != 0 {
		return e
	}
	return n.attr(out)
}

// caller is who calls, for the core: the calling process's uid and gid,
// which new entries record.
func caller(ctx context.Context) vfs.Caller {
	if c, ok := fuse.FromContext(ctx); ok {
		return vfs.Caller{Uid: c.Uid, Gid: c.Gid}
	}
	return vfs.Caller{}
}

// openNew opens the first handle of a file just created below n as name
// ("" for O_TMPFILE), creating its blob; if that fails, the file goes.
func (n *node) openNew(ctx context.Context, name string, rec *shedfs.Inode, flags uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	vh, vs, e := n.v.vv.OpenNew(n.at(), name, rec, flags)
	if e != 0 {
		return nil, nil, 0, e
	}
	own(vs, n)
	ch := n.entry(ctx, rec, out)
	cn := ch.Operations().(*node)
	fh, fuseFlags, e := cn.newHandle(vh, flags)
	if e != 0 {
		vh.Release()
		return nil, nil, 0, e
	}
	return ch, fh, fuseFlags | cn.keepCache(fh), 0
}

// Create implements fs.NodeCreater.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (_ *fs.Inode, _ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.v.fs.track("create", n.zone, time.Now(), &errno)
	rec, e := n.v.vv.Create(caller(ctx), n.at(), name, mode)
	if e != 0 {
		return nil, nil, 0, e
	}
	return n.openNew(ctx, name, rec, flags, out)
}

// Tmpfile implements fs.NodeTmpfiler (open with O_TMPFILE): a file in n's
// zone that no directory names until linkat gives it one. It is admitted
// and charged like a create.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (_ *fs.Inode, _ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.v.fs.track("tmpfile", n.zone, time.Now(), &errno)
	rec, e := n.v.vv.Create(caller(ctx), n.at(), "", mode)
	if e != 0 {
		return nil, nil, 0, e
	}
	return n.openNew(ctx, "", rec, flags, out)
}

// Open implements fs.NodeOpener (vfs.View.Open): opening for writing is
// decided like a write, so a file its mode forbids fails at open as on a
// local disk.
func (n *node) Open(ctx context.Context, flags uint32) (_ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.v.fs.track("open", n.zone, time.Now(), &errno)
	var vh *vfs.Handle
	var vs []vfs.Version
	var e syscall.Errno
	if n.v.restoring.Load() {
		// A handle the kernel holds from before a takeover (takeover.go).
		vh, e = n.v.vv.Reopen(n.at(), flags)
	} else {
		vh, vs, e = n.v.vv.Open(ctx, n.at(), flags)
	}
	if e != 0 {
		return nil, 0, e
	}
	own(vs, n)
	fh, fuseFlags, e := n.newHandle(vh, flags)
	if e != 0 {
		vh.Release()
		return nil, 0, e
	}
	return fh, fuseFlags | n.keepCache(fh), 0
}

// keepCache is FOPEN_KEEP_CACHE when the kernel's pages of the file (or
// listing of the directory) are still good: nothing changed the content
// since this view last opened it, other than this view itself.
func (n *node) keepCache(fh fs.FileHandle) uint32 {
	switch h := fh.(type) {
	case *ptHandle:
		return 0
	case *handle:
		if h.mode != modeCached {
			return 0
		}
	}
	cur := n.v.fs.core.ContentVersion(n.ino)
	if n.seen.Swap(cur) == cur {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// made answers for an entry the core made below n.
func (n *node) made(ctx context.Context, rec *shedfs.Inode, vs []vfs.Version, e syscall.Errno, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e != 0 {
		return nil, e
	}
	own(vs, n)
	return n.entry(ctx, rec, out), 0
}

// Mkdir implements fs.NodeMkdirer.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.v.fs.track("mkdir", n.zone, time.Now(), &errno)
	rec, vs, e := n.v.vv.Mkdir(caller(ctx), n.at(), name, mode)
	return n.made(ctx, rec, vs, e, out)
}

// Mknod implements fs.NodeMknoder: fifos, sockets and empty regular files.
// Device nodes are refused by acl (a sandbox hands out no devices), so no
// device number is ever stored.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.v.fs.track("mknod", n.zone, time.Now(), &errno)
	rec, vs, e := n.v.vv.Mknod(caller(ctx), n.at(), vfs.Make{Op: acl.OpCreate, Name: name, Mode: mode})
	return n.made(ctx, rec, vs, e, out)
}

// Symlink implements fs.NodeSymlinker.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.v.fs.track("symlink", n.zone, time.Now(), &errno)
	rec, vs, e := n.v.vv.Symlink(caller(ctx), n.at(), name, target)
	return n.made(ctx, rec, vs, e, out)
}

// Readlink implements fs.NodeReadlinker (vfs.View.Readlink).
func (n *node) Readlink(ctx context.Context) (_ []byte, errno syscall.Errno) {
	defer n.v.fs.track("readlink", n.zone, time.Now(), &errno)
	target, e := n.v.vv.Readlink(n.at(), n.parentIno())
	if e != 0 {
		return nil, e
	}
	return []byte(target), 0
}

// parentIno is the store inode of the directory the kernel found n in.
func (n *node) parentIno() uint64 {
	_, p := n.Parent()
	if p == nil {
		return 0
	}
	if pn, ok := p.Operations().(*node); ok {
		return pn.ino
	}
	return 0
}

// Link implements fs.NodeLinker.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.v.fs.track("link", n.zone, time.Now(), &errno)
	var src *vfs.At
	if t, ok := target.(*node); ok {
		at := t.at()
		src = &at
	} // else groups/, the only other kind of inode
	rec, vs, e := n.v.vv.Link(n.at(), src, name)
	return n.made(ctx, rec, vs, e, out)
}

// Unlink implements fs.NodeUnlinker.
func (n *node) Unlink(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.v.fs.track("unlink", n.zone, time.Now(), &errno)
	vs, e := n.v.vv.Remove(n.at(), acl.OpUnlink, name)
	own(vs, n)
	return e
}

// Rmdir implements fs.NodeRmdirer.
func (n *node) Rmdir(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.v.fs.track("rmdir", n.zone, time.Now(), &errno)
	vs, e := n.v.vv.Remove(n.at(), acl.OpRmdir, name)
	own(vs, n)
	return e
}

// Rename implements fs.NodeRenamer (rename, RENAME_NOREPLACE,
// RENAME_EXCHANGE).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) (errno syscall.Errno) {
	defer n.v.fs.track("rename", n.zone, time.Now(), &errno)
	vv := n.v.vv
	if _, toTrash := newParent.(*trashDir); toTrash {
		return vv.RefuseTrash(acl.OpRename, n.at(), name)
	}
	np, ok := newParent.(*node)
	if !ok {
		// groups/ is the only other kind of directory.
		_, e := vv.Rename(n.at(), name, vfs.At{Ino: vfs.GroupsIno}, newName, flags)
		return e
	}
	vs, e := vv.Rename(n.at(), name, np.at(), newName, flags)
	own(vs, n, np)
	return e
}

// OpendirHandle implements fs.NodeOpendirHandler.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (_ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.v.fs.track("opendir", n.zone, time.Now(), &errno)
	// A handle the kernel holds from before a takeover was decided then.
	if e := n.visible(acl.OpRead); e != 0 && !n.v.restoring.Load() {
		return nil, 0, e
	}
	n.v.vv.DirOpened(n.ino)
	// The kernel keeps the listing across opens: a change made in
	// another view or by the admin invalidates it (dirOf); one made in
	// this view, the kernel's own check (listings.go).
	dh := &dirHandle{node: n}
	return dh, n.v.lists.openFlags(n, dh), 0
}

// Statfs implements fs.NodeStatfser.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) (errno syscall.Errno) {
	defer n.v.fs.track("statfs", n.zone, time.Now(), &errno)
	return n.v.statfs(n.zone, out)
}

// Fsync implements fs.NodeFsyncer for directories (fsyncdir) and for files
// synced without a handle: every committed change becomes durable.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) (errno syscall.Errno) {
	defer n.v.fs.track("fsync", n.zone, time.Now(), &errno)
	if h, ok := fh.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	if err := n.v.fs.store.Sync(); err != nil {
		return n.v.fs.errno("fsync", err)
	}
	return 0
}
