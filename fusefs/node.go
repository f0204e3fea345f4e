package fusefs

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
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
}

// load reads the node's record with the not yet persisted state of an open
// file laid over it.
func (n *node) load() (*shedfs.Inode, syscall.Errno) {
	f := n.v.fs
	since := f.persists.now()
	rec, err := f.store.GetInode(n.ino)
	if errors.Is(err, syscall.ENOENT) {
		if g := f.ghostOf(n.ino); g != nil {
			return g, 0
		}
	}
	if err != nil {
		return nil, f.errno("getattr", err)
	}
	return f.overlaid(rec, since), 0
}

// visible checks that the view may still reach this node: a user removed
// from a group loses the group's inodes even where the kernel still holds
// them.
func (n *node) visible(op acl.Op) syscall.Errno {
	if n.zone.Kind != shedfs.ZoneGroup {
		return 0
	}
	if d := acl.Read(n.v.actor(), acl.Entry{Zone: n.zone, Dir: true}); !d.Allowed() {
		return n.deny(op, "", d)
	}
	return 0
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
	since := v.fs.persists.now()
	fresh, err := v.fs.store.GetInode(rec.Ino)
	if err != nil {
		return rec
	}
	return v.fs.overlaid(fresh, since)
}

// Lookup implements fs.NodeLookuper.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.v.fs.track("lookup", n.zone, time.Now(), &errno)
	return n.resolve(ctx, name, nil, n.v.fs.persists.now(), out)
}

// resolve answers for name in n: a LOOKUP, or one entry of a READDIRPLUS
// reply. known, when not nil, is name's record as a batch just read it
// (readdirplus.go); otherwise the store is asked. since is the persist
// clock before either was read (hold.go).
func (n *node) resolve(ctx context.Context, name string, known *shedfs.Inode, since uint64, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if ch := n.v.lookupReserved(ctx, n, name, out); ch != nil {
		return ch, 0
	}
	if e := n.visible(acl.OpRead); e != 0 {
		return nil, e
	}
	if d := acl.CheckName(name); !d.Allowed() {
		return nil, n.deny(acl.OpLookup, name, d)
	}
	f := n.v.fs
	neg := n.expectAbsent(name)
	rec, err := known, error(nil)
	if rec == nil {
		rec, err = f.store.Lookup(n.ino, name)
	}
	if err != nil {
		e := f.errno("lookup", err)
		n.missed(name, neg, e, out)
		return nil, e
	}
	if neg {
		f.negatives.found(n.v, n.ino, name)
	}
	rec, errno := n.v.sessionOverlay(rec)
	if errno != 0 {
		return nil, errno
	}
	rec = f.overlaid(rec, since)
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
	f := n.v.fs
	rec, e := n.load()
	if e != 0 {
		return e
	}
	if fh == nil {
		if e := n.refuseKept(acl.OpSetattr, rec); e != 0 {
			return e
		}
	}
	if size, ok := in.GetSize(); ok {
		if rec.IsDir() {
			return syscall.EISDIR
		}
		if !rec.IsRegular() {
			return syscall.EINVAL
		}
		if size != 0 || !n.keepVersion(rec) {
			if e := n.truncate(rec, size); e != 0 {
				return e
			}
		} else {
			n.truncated(0)
		}
	}
	mode, setMode := in.GetMode()
	uid, setUID := in.GetUID()
	gid, setGID := in.GetGID()
	atime, setAtime := in.GetATime()
	mtime, setMtime := in.GetMTime()
	if setMode || setUID || setGID || setAtime || setMtime {
		timesOnly := !setMode && !setUID && !setGID
		if d := acl.Setattr(n.v.actor(), acl.EntryOf(rec), timesOnly); !d.Allowed() {
			return n.deny(acl.OpSetattr, "", d)
		}
		if !setAtime && !setMtime && attrsUnchanged(rec, mode, setMode, uid, setUID, gid, setGID) {
			return n.attr(out)
		}
		now := time.Now()
		update := f.store.Update
		if !setUID && !setGID {
			update = f.updateHeld // times and mode of a dirty open file (hold.go)
		}
		_, err := update(n.ino, func(rec *shedfs.Inode) error {
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
		// Times alone (touch, tar, cp -a) are not worth a record each;
		// permission and ownership changes are.
		switch {
		case setUID || setGID:
			n.changed("chown", "", 0)
		case setMode:
			n.changed("chmod", "", 0)
		}
		f.invalidate(n.v, n.zone, attrOf(n.ino))
	}
	return n.attr(out)
}

// caller returns the uid and gid new entries record: the calling process's.
func caller(ctx context.Context) (uint32, uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

// newChild creates an entry of any type below n with the zone, owner and
// default ownership mode a new entry gets, after acl admitted it. An empty
// name makes an O_TMPFILE file, which no directory names yet. open says
// the caller opens it at once (openNew), which marks it open in a shared
// store from its create on.
func (n *node) newChild(ctx context.Context, op acl.Op, name string, mode, rdev uint32, target string, open bool) (*shedfs.Inode, syscall.Errno) {
	f := n.v.fs
	parent, e := n.load()
	if e != 0 {
		return nil, e
	}
	a := n.v.actor()
	decide := func(q acl.Quota) acl.Decision {
		switch {
		case op == acl.OpSymlink:
			return acl.Symlink(a, acl.EntryOf(parent), name, target, n.v.depth(parent), f.opts.Zones.Symlinks, q)
		case name == "":
			return acl.Tmpfile(a, acl.EntryOf(parent), q)
		default:
			return acl.Mknod(a, acl.EntryOf(parent), name, mode, q)
		}
	}
	h := shedfs.HolderOf(parent.Zone)
	adm, d, err := f.core.Admit(vfs.Growth{Holder: h, Inodes: 1, Disk: entryBytes + int64(len(target)), DiskInodes: 1, Decide: decide})
	if err != nil {
		return nil, f.errno("quota", err)
	}
	if !d.Allowed() {
		return nil, n.deny(op, name, d)
	}
	// The store's transaction admits the inode again, exactly.
	adm.Done()
	uid, gid := caller(ctx)
	if parent.Mode&syscall.S_ISGID != 0 {
		// BSD group semantics, as ext4 does for setgid directories.
		gid = parent.Gid
		if mode&syscall.S_IFMT == syscall.S_IFDIR {
			mode |= syscall.S_ISGID
		}
	}
	tmpl := &shedfs.Inode{
		Mode:    mode,
		Uid:     uid,
		Gid:     gid,
		Rdev:    rdev,
		Target:  target,
		Zone:    parent.Zone,
		Owner:   n.v.user,
		OwnMode: f.opts.Zones.Policy(parent.Zone.Kind).DefaultMode,
	}
	// Admitted again inside the transaction, so concurrent creates never
	// pass the limit; a refusal there is acl's decision like any other.
	var rec *shedfs.Inode
	refused, err := f.core.InTxn(h, 0, 1, func() (d acl.Decision, err error) {
		if open {
			// Opened at once (openNew; every O_TMPFILE file is):
			// marked open by its create.
			rec, err = f.store.CreateOpen(n.ino, name, tmpl, vfs.AdmitInodes(&d, 1))
		} else {
			rec, err = f.store.Create(n.ino, name, tmpl, vfs.AdmitInodes(&d, 1))
		}
		return d, err
	})
	if !refused.Allowed() {
		return nil, n.deny(op, name, refused)
	}
	if err != nil {
		return nil, f.errno("create", err)
	}
	if name == "" {
		// Nothing names it: it goes with its last handle unless
		// linkat gives it a name first.
		f.mu.Lock()
		f.orphans[rec.Ino] = true
		f.mu.Unlock()
	}
	return rec, 0
}

// created records and announces a new entry name in n, once it is whole.
func (n *node) created(op acl.Op, name string) {
	n.changed(op.String(), name, 0)
	n.v.fs.changedContent(n, n.ino)
	n.v.fs.invalidate(n.v, n.zone, nameWas(n.ino, name, noneBefore), dirOf(n.ino))
}

// uncreate takes back a file newChild made whose blob could not be
// created (a full disk): a failed create leaves no entry behind.
func (n *node) uncreate(name string, rec *shedfs.Inode) {
	f := n.v.fs
	if name == "" {
		f.reclaimIfIdle(rec.Ino)
		return
	}
	if _, _, err := f.store.UnlinkFree(n.ino, name, false, f.unused); err != nil {
		f.log.Error("undo a failed create", "ino", rec.Ino, "err", err)
	}
}

// openNew opens the first handle of a file just created below n as name
// ("" for O_TMPFILE), creating its blob; if that fails, the file goes.
func (n *node) openNew(ctx context.Context, name string, rec *shedfs.Inode, flags uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	oi, e := n.v.fs.acquire(rec, true)
	if e != 0 {
		n.uncreate(name, rec)
		return nil, nil, 0, e
	}
	if name != "" {
		n.created(acl.OpCreate, name)
	}
	ch := n.entry(ctx, rec, out)
	cn := ch.Operations().(*node)
	fh, fuseFlags, e := cn.newHandle(oi, flags)
	if e != 0 {
		n.v.fs.release(oi)
		return nil, nil, 0, e
	}
	return ch, fh, fuseFlags | cn.keepCache(fh), 0
}

// depth counts the directories between dir and its zone root, for the
// symlink policy.
func (v *View) depth(dir *shedfs.Inode) int {
	d := 0
	for p := dir.Parent; p != 0 && d < 4096; d++ {
		rec, err := v.fs.store.GetInode(p)
		if err != nil {
			break
		}
		p = rec.Parent
	}
	return d
}

// Create implements fs.NodeCreater.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (_ *fs.Inode, _ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.v.fs.track("create", n.zone, time.Now(), &errno)
	rec, e := n.newChild(ctx, acl.OpCreate, name, syscall.S_IFREG|mode&07777, 0, "", true)
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
	rec, e := n.newChild(ctx, acl.OpCreate, "", syscall.S_IFREG|mode&07777, 0, "", true)
	if e != 0 {
		return nil, nil, 0, e
	}
	return n.openNew(ctx, "", rec, flags, out)
}

// Open implements fs.NodeOpener. Opening for writing is decided like a
// write, so a file its mode forbids fails at open as on a local disk.
func (n *node) Open(ctx context.Context, flags uint32) (_ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.v.fs.track("open", n.zone, time.Now(), &errno)
	if e := n.visible(acl.OpRead); e != 0 {
		return nil, 0, e
	}
	rec, e := n.load()
	if e != 0 {
		return nil, 0, e
	}
	if !rec.IsRegular() {
		return nil, 0, syscall.EINVAL
	}
	if e := n.admitContent(ctx, acl.OpRead); e != 0 {
		return nil, 0, e
	}
	if rec.Nlink == 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY && n.v.fs.ghostOf(n.ino) != nil {
		// Reclaimed, with its charge freed: nothing may grow it again.
		return nil, 0, syscall.ENOENT
	}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if e := n.refuseKept(acl.OpWrite, rec); e != 0 {
			return nil, 0, e
		}
		if d := acl.Write(n.v.actor(), acl.EntryOf(rec), acl.Quota{}, rec.Size, rec.Size); !d.Allowed() {
			return nil, 0, n.deny(acl.OpWrite, "", d)
		}
		if flags&syscall.O_TRUNC != 0 && rec.Size > 0 && n.keepVersion(rec) {
			n.truncated(0)
			rec.Size = 0
		} else if flags&syscall.O_TRUNC != 0 && rec.Size > 0 {
			if e := n.truncate(rec, 0); e != 0 {
				return nil, 0, e
			}
		}
	}
	oi, e := n.v.fs.acquire(rec, false)
	if e != 0 {
		return nil, 0, e
	}
	fh, fuseFlags, e := n.newHandle(oi, flags)
	if e != 0 {
		n.v.fs.release(oi)
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
	cur := n.v.fs.versions.current(n.ino)
	if n.seen.Swap(cur) == cur {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// Mkdir implements fs.NodeMkdirer.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.v.fs.track("mkdir", n.zone, time.Now(), &errno)
	rec, e := n.newChild(ctx, acl.OpCreate, name, syscall.S_IFDIR|mode&07777, 0, "", false)
	if e != 0 {
		return nil, e
	}
	n.created(acl.OpCreate, name)
	return n.entry(ctx, rec, out), 0
}

// Mknod implements fs.NodeMknoder: fifos, sockets and empty regular files.
// Device nodes are refused by acl (a sandbox hands out no devices), so no
// device number is ever stored.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.v.fs.track("mknod", n.zone, time.Now(), &errno)
	rec, e := n.newChild(ctx, acl.OpCreate, name, mode, 0, "", false)
	if e != 0 {
		return nil, e
	}
	n.created(acl.OpCreate, name)
	return n.entry(ctx, rec, out), 0
}

// Symlink implements fs.NodeSymlinker.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.v.fs.track("symlink", n.zone, time.Now(), &errno)
	rec, e := n.newChild(ctx, acl.OpSymlink, name, syscall.S_IFLNK|0o777, 0, target, false)
	if e != 0 {
		return nil, e
	}
	n.created(acl.OpSymlink, name)
	return n.entry(ctx, rec, out), 0
}

// Readlink implements fs.NodeReadlinker. The target is checked again
// against the symlink policy at the link's current depth: a directory
// moved closer to the zone root must not let an old link climb out.
func (n *node) Readlink(ctx context.Context) (_ []byte, errno syscall.Errno) {
	defer n.v.fs.track("readlink", n.zone, time.Now(), &errno)
	if e := n.visible(acl.OpRead); e != 0 {
		return nil, e
	}
	rec, e := n.load()
	if e != 0 {
		return nil, e
	}
	if rec.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return nil, syscall.EINVAL
	}
	if up, ok := zones.SymlinkClimb(rec.Target); !ok || up > 0 {
		parent, err := n.v.fs.store.GetInode(n.parentIno())
		depth := 0
		if err == nil {
			depth = n.v.depth(parent)
		}
		if d := acl.SymlinkTarget(n.v.fs.opts.Zones.Symlinks, rec.Zone.Kind, rec.Target, depth); !d.Allowed() {
			return nil, n.deny(acl.OpRead, "", d)
		}
	}
	return []byte(rec.Target), 0
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
	f := n.v.fs
	dir, e := n.load()
	if e != 0 {
		return nil, e
	}
	t, ok := target.(*node)
	if !ok {
		// groups/ is the only other kind of inode.
		return nil, n.deny(acl.OpLink, name, acl.Link(n.v.actor(), acl.GroupsDir(), acl.EntryOf(dir), name))
	}
	src, e := t.load()
	if e != 0 {
		return nil, e
	}
	if e := t.refuseKept(acl.OpLink, src); e != 0 {
		return nil, e
	}
	// A link charges no quota (the inode is charged once), but its
	// entry takes room on the store's disk.
	decide := func(acl.Quota) acl.Decision { return acl.Link(n.v.actor(), acl.EntryOf(src), acl.EntryOf(dir), name) }
	adm, d, err := f.core.Admit(vfs.Growth{Disk: entryBytes, Decide: decide})
	if err != nil {
		return nil, f.errno("link", err)
	}
	if !d.Allowed() {
		return nil, n.deny(acl.OpLink, name, d)
	}
	adm.Done()
	since := f.persists.now()
	rec, err := f.store.LinkTrash(t.ino, n.ino, name, n.linkNote(name))
	if err != nil {
		return nil, f.errno("link", err)
	}
	f.mu.Lock()
	delete(f.orphans, rec.Ino)
	f.mu.Unlock()
	rec = f.overlaid(rec, since)
	n.changed("link", name, 0)
	f.changedContent(n, n.ino)
	f.invalidate(n.v, n.zone, nameWas(n.ino, name, noneBefore), dirOf(n.ino), attrOf(t.ino))
	return n.entry(ctx, rec, out), 0
}

// Unlink implements fs.NodeUnlinker.
func (n *node) Unlink(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.v.fs.track("unlink", n.zone, time.Now(), &errno)
	return n.remove(acl.OpUnlink, name)
}

// Rmdir implements fs.NodeRmdirer.
func (n *node) Rmdir(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.v.fs.track("rmdir", n.zone, time.Now(), &errno)
	return n.remove(acl.OpRmdir, name)
}

// child returns the record of name in n, and the reserved zone roots of
// the view root as what they are.
func (n *node) child(name string) (*shedfs.Inode, syscall.Errno) {
	f := n.v.fs
	if ino, ok := n.v.reservedIno(n, name); ok {
		rec, err := f.store.GetInode(ino)
		if err != nil {
			return nil, f.errno("lookup", err)
		}
		return rec, 0
	}
	rec, err := f.store.Lookup(n.ino, name)
	if err != nil {
		return nil, f.errno("lookup", err)
	}
	return n.v.sessionTarget(rec), 0
}

func (n *node) remove(op acl.Op, name string) syscall.Errno {
	f := n.v.fs
	dir, e := n.load()
	if e != 0 {
		return e
	}
	var d acl.Decision
	rec, e := n.child(name)
	switch {
	case e == syscall.ENOENT && n.v.isGroupsName(n, name):
		d = acl.CheckDir(n.v.actor(), op, acl.EntryOf(dir), name)
	case e != 0:
		return e
	case op == acl.OpRmdir:
		d = acl.Rmdir(n.v.actor(), acl.EntryOf(dir), name, acl.EntryOf(rec))
	default:
		d = acl.Unlink(n.v.actor(), acl.EntryOf(dir), name, acl.EntryOf(rec))
	}
	if !d.Allowed() {
		return n.deny(op, name, d)
	}
	// The ghost is in place before the record can go, so a request of a
	// kernel that resolved the name just before finds it either way.
	f.settle(rec.Ino)
	f.addGhost(rec)
	p := n.pathOf(name) // for the trash and the audit trail
	out, freed, kept, err := f.store.UnlinkTrash(n.ino, name, op == acl.OpRmdir, f.unused, n.trashNoteAt(metadata.TrashUnlink, p))
	if !freed {
		f.dropGhost(rec.Ino)
	}
	if err != nil {
		return f.errno(op.String(), err)
	}
	if kept {
		f.kept()
	}
	n.changedPath(op.String(), p, 0)
	f.changedContent(n, n.ino)
	f.invalidate(n.v, n.zone, nameWas(n.ino, name, rec.Ino), dirOf(n.ino), attrOf(out.Ino))
	if !freed && !kept {
		f.reclaimIfUnused(out)
	}
	return 0
}

// Rename implements fs.NodeRenamer (rename, RENAME_NOREPLACE,
// RENAME_EXCHANGE).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) (errno syscall.Errno) {
	defer n.v.fs.track("rename", n.zone, time.Now(), &errno)
	f := n.v.fs
	a := n.v.actor()
	np, ok := newParent.(*node)
	if _, toTrash := newParent.(*trashDir); toTrash {
		return n.deny(acl.OpRename, name, acl.TrashChange())
	}
	if !ok {
		// groups/ is the only other kind of directory.
		return n.deny(acl.OpRename, name, acl.CheckDir(a, acl.OpRename, acl.GroupsDir(), newName))
	}
	srcDir, e := n.load()
	if e != 0 {
		return e
	}
	dstDir, e := np.load()
	if e != 0 {
		return e
	}
	src, e := n.child(name)
	if e != 0 {
		if e == syscall.ENOENT && n.v.isGroupsName(n, name) {
			return n.deny(acl.OpRename, name, acl.CheckDir(a, acl.OpRename, acl.EntryOf(srcDir), name))
		}
		return e
	}
	var dst *acl.Entry
	dstRec, e := np.child(newName)
	switch {
	case e == 0:
		de := acl.EntryOf(dstRec)
		dst = &de
	case e == syscall.ENOENT && np.v.isGroupsName(np, newName):
		return n.deny(acl.OpRename, newName, acl.CheckDir(a, acl.OpRename, acl.EntryOf(dstDir), newName))
	case e != syscall.ENOENT:
		return e
	}
	se := acl.EntryOf(src)
	d := acl.Rename(a, acl.EntryOf(srcDir), name, se, acl.EntryOf(dstDir), newName, dst)
	if d.Allowed() && flags&metadata.RenameExchange != 0 && dst != nil {
		d = acl.Rename(a, acl.EntryOf(dstDir), newName, *dst, acl.EntryOf(srcDir), name, &se)
	}
	if !d.Allowed() {
		return n.deny(acl.OpRename, name, d)
	}
	if dst != nil {
		f.settle(dstRec.Ino)
	}
	replaced, kept, err := f.store.RenameTrash(n.ino, name, np.ino, newName, flags, np.trashNote(metadata.TrashRenameOver, newName), n.renameNote(name, np, newName))
	if err != nil {
		return f.errno("rename", err)
	}
	if kept {
		f.kept()
	}
	n.changedPath("rename", n.pathOf(name)+" -> "+np.pathOf(newName), 0)
	f.changedContent(n, n.ino)
	f.changedContent(np, np.ino)
	dstWas := uint64(noneBefore)
	if dst != nil {
		dstWas = dstRec.Ino
	}
	items := []inval{nameWas(n.ino, name, src.Ino), nameWas(np.ino, newName, dstWas), dirOf(n.ino), dirOf(np.ino), attrOf(src.Ino)}
	if replaced != nil {
		items = append(items, attrOf(replaced.Ino))
	}
	f.invalidate(n.v, n.zone, items...)
	if !kept {
		f.reclaimIfUnused(replaced)
	}
	return 0
}

// OpendirHandle implements fs.NodeOpendirHandler.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (_ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.v.fs.track("opendir", n.zone, time.Now(), &errno)
	if e := n.visible(acl.OpRead); e != 0 {
		return nil, 0, e
	}
	n.v.fs.dirOpened(n.ino)
	// The kernel keeps the listing across opens: a change made in
	// another view or by the admin invalidates it (dirOf).
	dh := &dirHandle{node: n}
	return dh, fuse.FOPEN_CACHE_DIR | n.keepCache(dh), 0
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
