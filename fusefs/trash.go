package fusefs

import (
	"context"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
)

// The trash on the callback path (docs/design.md, "Trash and point-in-time restore"): unlink and
// rename-over keep the file that loses its last link, open with O_TRUNC
// and truncate to zero keep the old content under a new inode number, and
// every view has a read-only trash/ computed from the trash records, where
// mv restores and rm purges.

// trashState is what FS keeps for the trash: the retention in
// nanoseconds (0: off) and a generation that moves whenever the trash
// changes, so views rebuild their trash/ listings only then.
type trashState struct {
	retention atomic.Int64
	gen       atomic.Int64
}

// trashSettings loads the retention from the store's settings.
func (f *FS) trashSettings(st metadata.Settings) {
	f.trash.retention.Store(int64(st.TrashRetention()))
}

// trashChanged tells the views' trash/ listings to rebuild.
func (f *FS) trashChanged() { f.trash.gen.Add(1) }

// TrashFreed implements vfs.Frontend: kept files the store deleted (the
// core keeps them as ghosts for requests under way) are counted, and the
// views' trash/ listings rebuild.
func (f *FS) TrashFreed(gone []*shedfs.Inode, why string, removed bool) {
	if len(gone) == 0 {
		return
	}
	f.trashChanged()
	f.countTrashFreed(why, len(gone))
}

// TrashChanged is told by the admin's restores and purges, so that views
// rebuild their trash/ listings.
func (f *FS) TrashChanged() { f.trashChanged() }

// Holds implements vfs.Frontend: the views hold their files open in the
// core's open-file table, not here.
func (f *FS) Holds(ino uint64) bool { return false }

// Overlay implements vfs.Frontend: the core lays the open state over.
func (f *FS) Overlay(rec *shedfs.Inode) {}

// trashItem is one name in a view's trash/ tree.
type trashItem struct {
	dir   bool
	entry metadata.TrashEntry // files only
}

// trashTree is a view's trash/ as of one trash generation: each directory
// path (relative to trash/, "" for trash/ itself) with its names.
type trashTree struct {
	gen  int64
	dirs map[string]map[string]trashItem
}

// trashView is what one view keeps of its trash/: the tree of the last
// generation it listed, and the inode numbers given to its directories.
type trashView struct {
	mu   sync.Mutex
	tree *trashTree
	inos map[string]uint64
	next uint64
}

// uncached is the timeout of what the kernel must not keep (trash/ is
// made from the records at each look): go-fuse replaces a zero timeout by
// the mount's hour, and a nanosecond has passed by the next request.
const uncached = time.Nanosecond

// trashDirIno is where the numbers of trash/ directories start: below
// 2^32, which the store never assigns to new inodes, and far above the
// sequential numbers of old stores.
const trashDirIno = 0xff000000

// trashTree returns the view's trash/ as it is now.
func (v *View) trashTree() (*trashTree, syscall.Errno) {
	f := v.fs
	gen := f.trash.gen.Load()
	v.trash.mu.Lock()
	t := v.trash.tree
	v.trash.mu.Unlock()
	if t != nil && t.gen == gen {
		return t, 0
	}
	a := v.actor()
	list, err := f.store.ListTrash(v.vv.TrashHolders(a.Groups))
	if err != nil {
		return nil, f.errno("list trash", err)
	}
	t = &trashTree{gen: gen, dirs: map[string]map[string]trashItem{"": {}}}
	for _, e := range list {
		if !acl.TrashRead(a, trashEntryACL(e)).Allowed() {
			continue
		}
		vp := v.vv.ViewPath(e.Zone, e.Path)
		if vp == "" {
			continue
		}
		dir, base := path.Split(vp)
		dir = strings.TrimSuffix(dir, "/")
		t.addDirs(dir)
		t.dirs[dir][zones.TrashName(base, e.Time)] = trashItem{entry: e}
	}
	v.trash.mu.Lock()
	v.trash.tree = t
	v.trash.mu.Unlock()
	return t, 0
}

// addDirs makes dir and its parents directories of the tree.
func (t *trashTree) addDirs(dir string) {
	for dir != "" {
		if _, ok := t.dirs[dir]; ok {
			return
		}
		t.dirs[dir] = map[string]trashItem{}
		parent, base := path.Split(dir)
		parent = strings.TrimSuffix(parent, "/")
		if _, ok := t.dirs[parent]; !ok {
			t.addDirs(parent)
		}
		t.dirs[parent][base] = trashItem{dir: true}
		dir = parent
	}
}

// trashEntryACL is what acl needs to know of a kept file.
func trashEntryACL(e metadata.TrashEntry) acl.Entry {
	return acl.Entry{Zone: e.Zone, Owner: e.Owner, Mode: e.OwnMode}
}

// forgetTrashTree drops the view's trash/ tree, so that the next look
// makes it anew (the user's groups changed: which holders' kept files it
// shows did too). The kernel keeps nothing of trash/ to forget.
func (v *View) forgetTrashTree() {
	v.trash.mu.Lock()
	v.trash.tree = nil
	v.trash.mu.Unlock()
}

// trashDirIno returns the inode number of trash/ directory p in this view.
func (v *View) trashDirIno(p string) uint64 {
	v.trash.mu.Lock()
	defer v.trash.mu.Unlock()
	if v.trash.inos == nil {
		v.trash.inos = map[string]uint64{}
		v.trash.next = trashDirIno
	}
	if ino, ok := v.trash.inos[p]; ok {
		return ino
	}
	v.trash.next++
	v.trash.inos[p] = v.trash.next
	return v.trash.next
}

// trashDir is a directory of a view's trash/, computed from the trash
// records: p is its path below trash/ ("" for trash/ itself).
type trashDir struct {
	fs.Inode
	refuseCreates
	v *View
	p string
}

// lookupTrash returns trash/ for the view root.
func (v *View) lookupTrash(ctx context.Context, parent *node, name string, out *fuse.EntryOut) *fs.Inode {
	if parent.ino != v.rootIno || name != zones.NameTrash {
		return nil
	}
	return v.trashDirNode(ctx, &parent.Inode, "", out)
}

func (v *View) trashDirNode(ctx context.Context, parent *fs.Inode, p string, out *fuse.EntryOut) *fs.Inode {
	d := &trashDir{v: v, p: p}
	d.refuseCreates = refuseCreates{d.refuse}
	d.fillAttr(&out.Attr)
	// Computed from the records at each look: the kernel keeps nothing.
	out.SetEntryTimeout(uncached)
	out.SetAttrTimeout(uncached)
	return parent.NewInode(ctx, d, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: out.Attr.Ino})
}

func (d *trashDir) fillAttr(out *fuse.Attr) {
	out.Ino = d.v.trashDirIno(d.p)
	out.Mode = syscall.S_IFDIR | 0o555
	out.Nlink = 2
	out.Blksize = 4096
	if d.v.opts.ForceOwner {
		out.Owner = fuse.Owner{Uid: d.v.opts.Uid, Gid: d.v.opts.Gid}
	}
	out.SetTimes(&startTime, &startTime, &startTime)
}

// child returns name in d: a directory path or a kept file.
func (d *trashDir) child(name string) (trashItem, syscall.Errno) {
	t, e := d.v.trashTree()
	if e != 0 {
		return trashItem{}, e
	}
	it, ok := t.dirs[d.p][name]
	if !ok {
		return trashItem{}, syscall.ENOENT
	}
	return it, 0
}

// Lookup implements fs.NodeLookuper.
func (d *trashDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer d.v.fs.track("lookup", shedfs.Zone{}, time.Now(), &errno)
	it, e := d.child(name)
	if e != 0 {
		if e == syscall.ENOENT {
			// Nor is a name found missing kept: a delete may make it
			// a moment later, and nothing tells the kernel of that.
			out.SetEntryTimeout(uncached)
		}
		return nil, e
	}
	if it.dir {
		return d.v.trashDirNode(ctx, &d.Inode, path.Join(d.p, name), out), 0
	}
	rec, err := d.v.fs.store.GetInode(it.entry.Ino)
	if err != nil {
		return nil, d.v.fs.errno("lookup trash", err)
	}
	d.v.fs.core.Overlay(rec)
	d.v.fillAttr(rec, &out.Attr)
	out.SetEntryTimeout(uncached)
	out.SetAttrTimeout(uncached)
	child := &node{v: d.v, ino: rec.Ino, zone: rec.Zone}
	return d.NewInode(ctx, child, fs.StableAttr{Mode: rec.Mode & syscall.S_IFMT, Ino: rec.Ino}), 0
}

// Getattr implements fs.NodeGetattrer.
func (d *trashDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fillAttr(&out.Attr)
	out.SetTimeout(uncached)
	return 0
}

// Readdir implements fs.NodeReaddirer.
func (d *trashDir) Readdir(ctx context.Context) (_ fs.DirStream, errno syscall.Errno) {
	defer d.v.fs.track("readdir", shedfs.Zone{}, time.Now(), &errno)
	t, e := d.v.trashTree()
	if e != 0 {
		return nil, e
	}
	names := make([]string, 0, len(t.dirs[d.p]))
	for name := range t.dirs[d.p] {
		names = append(names, name)
	}
	slices.Sort(names)
	list := make([]fuse.DirEntry, 0, len(names))
	for _, name := range names {
		it := t.dirs[d.p][name]
		if it.dir {
			list = append(list, fuse.DirEntry{Name: name, Ino: d.v.trashDirIno(path.Join(d.p, name)), Mode: syscall.S_IFDIR})
		} else {
			list = append(list, fuse.DirEntry{Name: name, Ino: it.entry.Ino, Mode: it.entry.Mode & syscall.S_IFMT})
		}
	}
	return fs.NewListDirStream(list), 0
}

// Statfs implements fs.NodeStatfser.
func (d *trashDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return d.v.statfs(shedfs.Zone{}, out)
}

// path is the view path of name in d, for the audit trail.
func (d *trashDir) path(name string) string {
	return "/" + path.Join(zones.NameTrash, d.p, name)
}

// refuse denies any change in trash/ but mv out and rm; trash/ belongs to
// no zone, so the denial is recorded in the view root's.
func (d *trashDir) refuse(op acl.Op, name string) syscall.Errno {
	return d.v.deny(op, d.path(name), d.v.root.zone, acl.TrashChange())
}

// Setattr implements fs.NodeSetattrer.
func (d *trashDir) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return d.refuse(acl.OpSetattr, "")
}

// Setxattr implements fs.NodeSetxattrer.
func (d *trashDir) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return d.refuse(acl.OpSetattr, "")
}

// Rmdir implements fs.NodeRmdirer: a directory of trash/ is there while
// it holds kept files, so once rm has purged them it is gone already.
func (d *trashDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	it, e := d.child(name)
	switch {
	case e == syscall.ENOENT:
		return 0
	case e != 0:
		return e
	case !it.dir:
		return syscall.ENOTDIR
	}
	return syscall.ENOTEMPTY
}

// Unlink implements fs.NodeUnlinker: rm of a kept file purges it, decided
// as deleting it in its zone.
func (d *trashDir) Unlink(ctx context.Context, name string) (errno syscall.Errno) {
	f := d.v.fs
	defer f.track("unlink", shedfs.Zone{}, time.Now(), &errno)
	it, e := d.child(name)
	if e != 0 {
		return e
	}
	if it.dir {
		return syscall.EISDIR
	}
	if dec := acl.TrashPurge(d.v.actor(), trashEntryACL(it.entry)); !dec.Allowed() {
		return d.v.deny(acl.OpUnlink, d.path(name), it.entry.Zone, dec)
	}
	rec, err := f.store.GetInode(it.entry.Ino)
	if err != nil {
		return f.errno("purge", err)
	}
	f.core.AddGhost(rec)
	_, freed, err := f.store.PurgeTrash(it.entry.Ino, f.core.Unused)
	if err != nil {
		f.core.DropGhost(rec.Ino)
		return f.errno("purge", err)
	}
	if !freed {
		f.core.DropGhost(rec.Ino)
		f.core.Orphan(rec.Ino)
	}
	f.trashChanged()
	f.countTrashFreed("purge", 1)
	d.v.recordTrash("trash_purge", it.entry.Zone, d.path(name))
	return 0
}

// Rename implements fs.NodeRenamer: mv of a kept file out of trash/
// restores it, decided as deleting it in its zone and creating the target
// name; anything else in trash/ is refused.
func (d *trashDir) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) (errno syscall.Errno) {
	f := d.v.fs
	defer f.track("rename", shedfs.Zone{}, time.Now(), &errno)
	np, ok := newParent.(*node)
	if !ok || flags&metadata.RenameExchange != 0 {
		return d.refuse(acl.OpRename, name)
	}
	it, e := d.child(name)
	if e != 0 {
		return e
	}
	if it.dir {
		return d.refuse(acl.OpRename, name)
	}
	dstDir, e := np.load()
	if e != 0 {
		return e
	}
	var dst *acl.Entry
	switch rec, e := d.v.vv.Child(np.at(), newName); {
	case e == 0:
		if flags&metadata.RenameNoReplace != 0 {
			return syscall.EEXIST
		}
		de := acl.EntryOf(rec)
		dst = &de
	case e != syscall.ENOENT:
		return e
	}
	if dec := acl.TrashRestore(d.v.actor(), trashEntryACL(it.entry), acl.EntryOf(dstDir), newName, dst); !dec.Allowed() {
		return d.v.deny(acl.OpRename, d.path(name), it.entry.Zone, dec)
	}
	_, replaced, kept, err := f.store.RestoreTrash(it.entry.Ino, np.ino, newName, d.v.vv.TrashNote(np.at(), metadata.TrashRenameOver, newName))
	if err != nil {
		return f.errno("restore", err)
	}
	f.trashChanged()
	np.changedPath("trash_restore", d.path(name)+" -> "+np.pathOf(newName), 0)
	f.changedContent(np, np.ino)
	was := uint64(noneBefore)
	if replaced != nil {
		was = replaced.Ino
	}
	items := []inval{nameWas(np.ino, newName, was), dirOf(np.ino), attrOf(it.entry.Ino)}
	if replaced != nil {
		items = append(items, attrOf(replaced.Ino))
	}
	f.invalidate(d.v, np.zone, items...)
	if !kept {
		f.core.ReclaimIfUnused(replaced)
	}
	return 0
}

// recordTrash puts a change in trash/ into the audit trail.
func (v *View) recordTrash(op string, z shedfs.Zone, p string) {
	v.fs.record(shedfs.Event{Time: time.Now(), User: v.user, Zone: z, Path: p, Op: op, Session: v.session, Door: vfs.DoorFUSE})
}

// trashSweeper expires old kept files every minute (or every half
// retention, when that is shorter) until stop closes. It looks every
// second, so that a new retention holds soon.
func (f *FS) trashSweeper(stop <-chan struct{}, capBytes func() int64) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		every := time.Minute
		if r := time.Duration(f.trash.retention.Load()); r > 0 && r/2 < every {
			every = r / 2
		}
		if time.Since(last) >= every {
			f.core.ExpireTrash(time.Duration(f.trash.retention.Load()), capBytes())
			last = time.Now()
		}
	}
}

// trashCapShare is the part of the store's disk that the trash of holders
// without a byte limit may take in all.
const trashCapShare = 10

// trashCap is trashCapShare percent of the store's disk, in bytes.
func (f *FS) trashCap() int64 {
	var st syscall.Statfs_t
	if err := statfsDisk(f.blobs.Root(), &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * int64(st.Bsize) / 100 * trashCapShare
}

// countTrashFreed counts kept files that went for good, by why (purge,
// evict, expire).
func (f *FS) countTrashFreed(why string, n int) {
	if m := f.opts.Metrics; m != nil && m.trashFreed != nil {
		m.trashFreed.WithLabelValues(why).Add(float64(n))
	}
}

// newTrashFreed is the counter of kept files gone for good.
func newTrashFreed() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shedfs_trash_freed_total",
		Help: "Files kept in the trash that went for good, by why: purge (rm in trash/ or shedfs trash purge), evict (room for a charge or the store's disk), expire (retention or the store-wide cap).",
	}, []string{"why"})
	for _, w := range []string{"purge", "evict", "expire"} {
		c.WithLabelValues(w)
	}
	return c
}
