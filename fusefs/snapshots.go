package fusefs

import (
	"context"
	"os"
	"path"
	"slices"
	"sync"
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

// snapshots/ of a view root (README, "Snapshots"): one read-only
// directory per snapshot of the user taken of this view (of the main
// view, or of this session), showing the frozen tree from the snapshot's
// records, its files read from the snapshot's own links to the blobs
// (blobs/snapshot.go). Nothing in it can change (acl.SnapshotChange).
// A snapshot never changes, so its tree is read once per view and its
// names and attributes are cached by the kernel; snapshots/ itself is
// looked up anew each time, as snapshots come and go.

// snapView is what a view keeps of its snapshots/: the trees it read
// and the numbers it gave their entries.
type snapView struct {
	mu    sync.Mutex
	trees map[string]*snapTree // by snapshot id
	inos  map[string]uint64    // by id NUL path
	next  uint64
}

// snapTree is one snapshot's entries by path and the names of each
// directory.
type snapTree struct {
	sn       metadata.Snapshot
	byPath   map[string]metadata.SnapEntry
	children map[string][]string
}

// snapIno is the number the view shows entry p of snapshot id with.
func (v *View) snapIno(id, p string) uint64 {
	s := &v.snaps
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inos == nil {
		s.inos = map[string]uint64{}
	}
	k := id + "\x00" + p
	if n, ok := s.inos[k]; ok {
		return n
	}
	s.next++
	n := vfs.SnapshotsIno + s.next
	s.inos[k] = n
	return n
}

// snapshot returns the view's snapshot name with its tree: one of the
// user's, taken of this view (its session's scratch, or the main view).
func (v *View) snapshot(name string) (*snapTree, syscall.Errno) {
	sn, err := v.fs.store.GetSnapshot(v.user, name)
	if err != nil || sn.Session != v.session || expired(sn) {
		return nil, syscall.ENOENT
	}
	s := &v.snaps
	s.mu.Lock()
	t := s.trees[sn.ID]
	s.mu.Unlock()
	if t != nil {
		return t, 0
	}
	es, err := v.fs.store.SnapshotEntries(sn.ID)
	if err != nil {
		return nil, v.fs.errno("read snapshot", err)
	}
	t = &snapTree{sn: *sn, byPath: make(map[string]metadata.SnapEntry, len(es)), children: map[string][]string{}}
	for _, e := range es {
		t.byPath[e.Path] = e
		if e.Path != "" {
			dir := path.Dir(e.Path)
			if dir == "." {
				dir = ""
			}
			t.children[dir] = append(t.children[dir], path.Base(e.Path))
		}
	}
	s.mu.Lock()
	if s.trees == nil {
		s.trees = map[string]*snapTree{}
	}
	s.trees[sn.ID] = t
	s.mu.Unlock()
	return t, 0
}

// snapshotByID is snapshot for the view's snapshot numbered id.
func (v *View) snapshotByID(id string) (*snapTree, syscall.Errno) {
	sns, err := v.fs.store.ListSnapshots(v.user)
	if err != nil {
		return nil, v.fs.errno("read snapshots", err)
	}
	for _, sn := range sns {
		if sn.ID == id {
			return v.snapshot(sn.Name)
		}
	}
	return nil, syscall.ENOENT
}

// expired reports whether sn's time is up: it is shown no more, and the
// next snapshot command deletes it.
func expired(sn *metadata.Snapshot) bool {
	return !sn.Expires.IsZero() && !time.Now().Before(sn.Expires)
}

// snapRoot is snapshots/.
type snapRoot struct {
	fs.Inode
	refuseCreates
	v *View
}

// lookupSnapshots returns snapshots/ for the view root.
func (v *View) lookupSnapshots(ctx context.Context, parent *node, out *fuse.EntryOut) *fs.Inode {
	d := &snapRoot{v: v}
	d.refuseCreates = refuseCreates{func(op acl.Op, name string) syscall.Errno { return v.refuseSnapshot(op, name) }}
	d.fillAttr(&out.Attr)
	out.SetEntryTimeout(uncached)
	out.SetAttrTimeout(uncached)
	return parent.NewInode(ctx, d, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: vfs.SnapshotsIno})
}

// refuseSnapshot denies a change at name in snapshots/ (recorded in the
// view root's zone: snapshots/ belongs to none).
func (v *View) refuseSnapshot(op acl.Op, p string) syscall.Errno {
	return v.deny(op, "/"+path.Join(zones.NameSnapshots, p), v.root.zone, acl.SnapshotChange())
}

func (d *snapRoot) fillAttr(out *fuse.Attr) {
	out.Ino = vfs.SnapshotsIno
	out.Mode = syscall.S_IFDIR | 0o555
	out.Nlink = 2
	out.Blksize = 4096
	if o, ok := d.v.presentedOwner(); ok {
		out.Owner = o
	}
	out.SetTimes(&startTime, &startTime, &startTime)
}

// Getattr implements fs.NodeGetattrer.
func (d *snapRoot) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fillAttr(&out.Attr)
	out.SetTimeout(uncached)
	return 0
}

// Lookup implements fs.NodeLookuper.
func (d *snapRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer d.v.fs.track("lookup", shedfs.Zone{}, time.Now(), &errno)
	t, e := d.v.snapshot(name)
	if e != 0 {
		out.SetEntryTimeout(uncached)
		return nil, e
	}
	return d.v.snapNode(ctx, &d.Inode, t, "", out), 0
}

// Readdir implements fs.NodeReaddirer.
func (d *snapRoot) Readdir(ctx context.Context) (_ fs.DirStream, errno syscall.Errno) {
	defer d.v.fs.track("readdir", shedfs.Zone{}, time.Now(), &errno)
	all, err := d.v.fs.store.ListSnapshots(d.v.user)
	if err != nil {
		return nil, d.v.fs.errno("list snapshots", err)
	}
	var list []fuse.DirEntry
	for _, sn := range all {
		if sn.Session == d.v.session && !expired(&sn) && !sn.Unlisted {
			list = append(list, fuse.DirEntry{Name: sn.Name, Ino: d.v.snapIno(sn.ID, ""), Mode: syscall.S_IFDIR})
		}
	}
	return fs.NewListDirStream(list), 0
}

// Rmdir implements fs.NodeRmdirer: a snapshot goes by the administrator's
// snapshot delete only.
func (d *snapRoot) Rmdir(ctx context.Context, name string) syscall.Errno {
	return d.v.refuseSnapshot(acl.OpRmdir, name)
}

// Rename implements fs.NodeRenamer.
func (d *snapRoot) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return d.v.refuseSnapshot(acl.OpRename, name)
}

// snapNode is one entry of a snapshot.
type snapNode struct {
	fs.Inode
	refuseCreates
	v *View
	t *snapTree
	e metadata.SnapEntry
}

func (v *View) snapNode(ctx context.Context, parent *fs.Inode, t *snapTree, p string, out *fuse.EntryOut) *fs.Inode {
	n := &snapNode{v: v, t: t, e: t.byPath[p]}
	n.refuseCreates = refuseCreates{func(op acl.Op, name string) syscall.Errno { return v.refuseSnapshot(op, n.path(name)) }}
	n.fillAttr(&out.Attr)
	// Frozen: the kernel may keep what it learns.
	out.SetEntryTimeout(time.Hour)
	out.SetAttrTimeout(time.Hour)
	return parent.NewInode(ctx, n, fs.StableAttr{Mode: n.e.Mode & syscall.S_IFMT, Ino: out.Attr.Ino})
}

// path is the path of name in n below snapshots/.
func (n *snapNode) path(name string) string {
	return path.Join(n.t.sn.Name, n.e.Path, name)
}

func (n *snapNode) fillAttr(out *fuse.Attr) {
	e := n.e
	out.Ino = n.v.snapIno(n.t.sn.ID, e.Path)
	out.Mode = e.Mode
	out.Size = uint64(e.Size)
	if e.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		out.Size = uint64(len(e.Target))
	}
	out.Blocks = (out.Size + 511) / 512
	out.Nlink = 1
	if e.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		out.Nlink = 2
	}
	out.Blksize = 4096
	out.Owner = fuse.Owner{Uid: e.Uid, Gid: e.Gid}
	if o, ok := n.v.presentedOwner(); ok {
		out.Owner = o
	}
	out.SetTimes(&e.Mtime, &e.Mtime, &e.Mtime)
}

// Getattr implements fs.NodeGetattrer.
func (n *snapNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fillAttr(&out.Attr)
	out.SetTimeout(time.Hour)
	return 0
}

// Lookup implements fs.NodeLookuper.
func (n *snapNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := path.Join(n.e.Path, name)
	if _, ok := n.t.byPath[p]; !ok || n.e.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, syscall.ENOENT
	}
	return n.v.snapNode(ctx, &n.Inode, n.t, p, out), 0
}

// Readdir implements fs.NodeReaddirer.
func (n *snapNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	names := slices.Clone(n.t.children[n.e.Path])
	slices.Sort(names)
	list := make([]fuse.DirEntry, 0, len(names))
	for _, name := range names {
		e := n.t.byPath[path.Join(n.e.Path, name)]
		list = append(list, fuse.DirEntry{Name: name, Ino: n.v.snapIno(n.t.sn.ID, e.Path), Mode: e.Mode & syscall.S_IFMT})
	}
	return fs.NewListDirStream(list), 0
}

// Readlink implements fs.NodeReadlinker.
func (n *snapNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if n.e.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return nil, syscall.EINVAL
	}
	return []byte(n.e.Target), 0
}

// Open implements fs.NodeOpener: read-only, from the snapshot's link to
// the content (a file never written has none: it reads empty).
func (n *snapNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, n.v.refuseSnapshot(acl.OpWrite, n.path(""))
	}
	if n.e.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, 0, syscall.EINVAL
	}
	p := n.v.fs.blobs.SnapPath(n.t.sn.ID, n.e.Ino)
	f, err := os.Open(p)
	if os.IsNotExist(err) && n.e.Size == 0 {
		f, err = os.Open(os.DevNull)
	}
	if err != nil {
		return nil, 0, n.v.fs.errno("open snapshot file", err)
	}
	return &snapFile{f: f}, fuse.FOPEN_KEEP_CACHE, 0
}

// snapFile is an open file of a snapshot, read through the daemon and
// the kernel's page cache, never through FUSE passthrough: a passthrough
// open gives the kernel's inode a backing file of this daemon's, which a
// daemon taking the view over cannot name, so every later open of the
// file would fail with EIO while a process kept it open across a
// takeover. Its attributes are the snapshot entry's (snapNode.Getattr),
// not the link's.
type snapFile struct {
	f *os.File
}

var (
	_ fs.FileReader   = (*snapFile)(nil)
	_ fs.FileReleaser = (*snapFile)(nil)
	_ fs.FileLseeker  = (*snapFile)(nil)
)

// Read implements fs.FileReader: the bytes are spliced from the link.
func (h *snapFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultFd(h.f.Fd(), off, len(dest)), 0
}

// Release implements fs.FileReleaser.
func (h *snapFile) Release(ctx context.Context) syscall.Errno {
	h.f.Close()
	return 0
}

// Lseek implements fs.FileLseeker (SEEK_DATA and SEEK_HOLE).
func (h *snapFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	n, err := h.f.Seek(int64(off), int(whence))
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	return uint64(n), 0
}

// Setattr implements fs.NodeSetattrer.
func (n *snapNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.v.refuseSnapshot(acl.OpSetattr, n.path(""))
}

// Setxattr implements fs.NodeSetxattrer.
func (n *snapNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return n.v.refuseSnapshot(acl.OpSetattr, n.path(""))
}

// Unlink implements fs.NodeUnlinker.
func (n *snapNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.v.refuseSnapshot(acl.OpUnlink, n.path(name))
}

// Rmdir implements fs.NodeRmdirer.
func (n *snapNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.v.refuseSnapshot(acl.OpRmdir, n.path(name))
}

// Rename implements fs.NodeRenamer.
func (n *snapNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return n.v.refuseSnapshot(acl.OpRename, n.path(name))
}

// Statfs implements fs.NodeStatfser.
func (n *snapNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return n.v.statfs(shedfs.Zone{}, out)
}
