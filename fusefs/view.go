package fusefs

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
)

// View is one mounted view of one user's world.
type View struct {
	fs *FS
	// id tells this view's lock owners from other views'.
	id     uint64
	user   string
	roots  shedfs.Roots
	opts   vfs.ViewOptions
	server *fuse.Server
	root   *node
	groups *groupsDir

	// session is the id of a session's view, "" for a main view;
	// rootIno is the view root (the private root, or the session's
	// scratch root) and uploadsIno what uploads/ shows (session.go).
	session             string
	rootIno, uploadsIno uint64

	// trash is what the view keeps of its trash/ (trash.go).
	trash trashView

	mu        sync.Mutex
	groupList []string // the user's groups, reloaded on membership changes

	// queue holds the invalidations still to be told to this view's
	// kernel; waiting counts its requests waiting for deliveries to
	// other views (guarded by notifier.waitMu).
	queue   viewQueue
	waiting int

	// links is the view's share-by-link state (links.go).
	links viewLinks

	// setIDWrites are its writes in flight that clear set-ID bits
	// (killpriv.go).
	setIDWrites setIDWrites
}

// groupsIno is the synthetic inode number of groups/, which has no record
// in the store: one the store never assigns.
const groupsIno = metadata.SyntheticIno

// Transport hooks a view's mount (see Options.Transport).
type Transport interface {
	Wrap(view string, raw fuse.RawFileSystem, mo *fuse.MountOptions) fuse.RawFileSystem
}

// Mount mounts the view of user at mountpoint and starts serving it.
func (f *FS) Mount(user, mountpoint string, opts vfs.ViewOptions) (*View, error) {
	return f.mount(user, nil, mountpoint, opts)
}

// mount mounts the main view of user, or the view of session ss.
func (f *FS) mount(user string, ss *metadata.Session, mountpoint string, opts vfs.ViewOptions) (*View, error) {
	u, err := f.store.GetUser(user)
	if err != nil {
		return nil, fmt.Errorf("view of %s: %w", user, err)
	}
	v := &View{fs: f, id: f.views.Add(1), user: user, roots: u.Roots, opts: opts}
	rootZone, err := v.sessionView(ss)
	if err != nil {
		return nil, fmt.Errorf("view of %s: %w", user, err)
	}
	v.root = &node{v: v, ino: v.rootIno, zone: rootZone}
	if err := v.loadGroups(); err != nil {
		return nil, fmt.Errorf("view of %s: %w", user, err)
	}
	v.groups = &groupsDir{v: v}
	v.groups.refuseCreates = refuseCreates{v.groups.deny}
	entry, attr, negative := f.opts.EntryTimeout, f.opts.AttrTimeout, f.opts.NegativeTimeout
	// The view's readers reserve their buffers from the first request on.
	f.memLimit.mounted(1)
	fsOpts := &fs.Options{
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &negative,
		NullPermissions: true,
		RootStableAttr:  &fs.StableAttr{Ino: v.rootIno},
		// Node IDs are store inode numbers, so an invalidation can name
		// an inode in every view without a per-view table.
		ExternalNodeID: true,
		MountOptions:   f.mountOptions(v.name(), opts),
	}
	bridge := &setIDKillingFS{RawFileSystem: fs.NewNodeFS(v.root, fsOpts), v: v}
	var raw fuse.RawFileSystem = &lockingFS{RawFileSystem: &forgetCounter{RawFileSystem: bridge, v: v}, v: v}
	if f.opts.Transport != nil {
		raw = f.opts.Transport.Wrap(v.name(), raw, &fsOpts.MountOptions)
	}
	server, err := fuse.NewServer(raw, mountpoint, &fsOpts.MountOptions)
	if err != nil {
		f.memLimit.mounted(-1)
		return nil, fmt.Errorf("mount view of %s at %s: %w", user, mountpoint, err)
	}
	// Set before the first request: an entry handed out from then on
	// may be invalidated through it.
	v.server = server
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		server.Unmount()
		f.memLimit.mounted(-1)
		f.known.dropView(v)
		f.negatives.dropView(v)
		return nil, fmt.Errorf("mount view of %s at %s: %w", user, mountpoint, err)
	}
	f.notify.add(v)
	go func() {
		// Whatever the view's processes held goes with the view. A
		// view detached while busy, or whose connection was aborted
		// (a forced session close), stops here without a successful
		// Unmount: it is told of no more changes either.
		server.Wait()
		f.memLimit.mounted(-1)
		f.locks.dropView(v.id)
		f.notify.remove(v)
		f.known.dropView(v)
		f.negatives.dropView(v)
	}()
	return v, nil
}

// storeIno is the store inode behind a FUSE node ID of this view: node IDs
// are store inode numbers, but for the root, which the kernel calls 1.
func (v *View) storeIno(nodeID uint64) uint64 {
	if nodeID == fuse.FUSE_ROOT_ID {
		return v.rootIno
	}
	return nodeID
}

// Unmount detaches the view from the kernel; Wait returns once serving ends.
func (v *View) Unmount() error {
	v.fs.notify.remove(v)
	if err := v.server.Unmount(); err != nil {
		// Still mounted (busy): it must go on hearing of changes.
		v.fs.notify.add(v)
		return err
	}
	v.fs.known.dropView(v)
	v.fs.negatives.dropView(v)
	return nil
}

// mountOptions are the kernel settings of a view.
func (f *FS) mountOptions(user string, opts vfs.ViewOptions) fuse.MountOptions {
	return fuse.MountOptions{
		AllowOther:  true,
		DirectMount: true,
		FsName:      "shedfs:" + user,
		Name:        "shedfs",
		Options:     []string{"default_permissions"},
		MaxWrite:    viewMaxWrite,
		// Sequential reads ask for big chunks ahead of the reader.
		MaxReadAhead: 1 << 20,
		// flock, fcntl and OFD locks come to the daemon, which makes
		// them conflict across views.
		EnableLocks: true,
		// SB_NOSEC: the daemon clears set-ID bits itself (killpriv.go).
		ExtraCapabilities: viewCapabilities,
		// No page cache dropped for an mtime it did not see (reqcache.go).
		DisabledCapabilities: viewDisabledCapabilities,
		Debug:                opts.Debug,
	}
}

// Wait blocks until the view is unmounted.
func (v *View) Wait() { v.server.Wait() }

// User is the principal the view belongs to.
func (v *View) User() string { return v.user }

// name is the view as logs and the mount table name it: the user, or
// user@session.
func (v *View) name() string {
	if v.session != "" {
		return v.user + "@" + v.session
	}
	return v.user
}

// lookupReserved resolves the reserved names of the view root. It returns
// nil for every other name or directory.
func (v *View) lookupReserved(ctx context.Context, parent *node, name string, out *fuse.EntryOut) *fs.Inode {
	if ch := v.lookupTrash(ctx, parent, name, out); ch != nil {
		return ch
	}
	if v.isGroupsName(parent, name) {
		v.groups.fillAttr(&out.Attr)
		out.SetEntryTimeout(v.fs.opts.EntryTimeout)
		out.SetAttrTimeout(v.fs.opts.AttrTimeout)
		return parent.NewInode(ctx, v.groups, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: groupsIno})
	}
	ino, ok := v.reservedIno(parent, name)
	if !ok {
		return nil
	}
	rec, err := v.fs.store.GetInode(ino)
	if err != nil {
		v.fs.log.Error("zone root missing", "user", v.user, "name", name, "err", err)
		return nil
	}
	return parent.entry(ctx, rec, out)
}

// list returns the entries of a directory as this view shows them,
// including the reserved names in the view root.
func (v *View) list(ctx context.Context, n *node) ([]fuse.DirEntry, syscall.Errno) {
	if e := n.visible(acl.OpRead); e != 0 {
		return nil, e
	}
	rec, e := n.load()
	if e != 0 {
		return nil, e
	}
	parentIno := rec.Parent
	if parentIno == 0 {
		parentIno = rec.Ino
	}
	out := []fuse.DirEntry{
		{Name: ".", Ino: rec.Ino, Mode: syscall.S_IFDIR},
		{Name: "..", Ino: parentIno, Mode: syscall.S_IFDIR},
	}
	if n.ino == v.rootIno {
		if v.session != "" {
			out = append(out, fuse.DirEntry{Name: zones.NameHome, Ino: v.roots.Private, Mode: syscall.S_IFDIR})
		}
		out = append(out,
			fuse.DirEntry{Name: zones.NameOutput, Ino: v.roots.Output, Mode: syscall.S_IFDIR},
			fuse.DirEntry{Name: zones.NameUploads, Ino: v.uploadsIno, Mode: syscall.S_IFDIR},
			fuse.DirEntry{Name: zones.NameShare, Ino: v.fs.store.ShareRoot(), Mode: syscall.S_IFDIR},
			fuse.DirEntry{Name: zones.NameGroups, Ino: groupsIno, Mode: syscall.S_IFDIR},
			fuse.DirEntry{Name: zones.NameTrash, Ino: v.trashDirIno(""), Mode: syscall.S_IFDIR},
		)
	}
	entries, err := v.fs.store.ReadDir(n.ino)
	if err != nil {
		return nil, v.fs.errno("readdir", err)
	}
	for _, de := range entries {
		if ss, ok := v.fs.sessions.placeholder(de.Ino); ok && ss.User == v.user {
			if v.session != "" {
				continue
			}
			de.Ino = ss.Root
		}
		out = append(out, fuse.DirEntry{Name: de.Name, Ino: de.Ino, Mode: de.Mode})
	}
	return out, 0
}

// reservedIno resolves the zone roots that stand under reserved names in
// the view root. groups/ has no inode and is not among them.
func (v *View) reservedIno(parent *node, name string) (uint64, bool) {
	if parent.ino != v.rootIno {
		return 0, false
	}
	switch name {
	case zones.NameHome:
		return v.roots.Private, v.session != ""
	case zones.NameOutput:
		return v.roots.Output, true
	case zones.NameUploads:
		return v.uploadsIno, true
	case zones.NameShare:
		return v.fs.store.ShareRoot(), true
	}
	return 0, false
}

// isGroupsName reports whether name is groups/ (or trash/, the other
// directory without a store record) in the view root.
func (v *View) isGroupsName(parent *node, name string) bool {
	return parent.ino == v.rootIno && (name == zones.NameGroups || name == zones.NameTrash)
}

// statfs reports the figures df shows in zone z: the quota of the zone's
// holder where it has a limit, the backing disk otherwise (and for what
// the limit leaves unset).
func (v *View) statfs(z shedfs.Zone, out *fuse.StatfsOut) syscall.Errno {
	f := v.fs
	var st syscall.Statfs_t
	if err := statfsDisk(f.blobs.Root(), &st); err != nil {
		return f.errno("statfs", err)
	}
	out.FromStatfsT(&st)
	out.NameLen = shedfs.MaxNameLen
	out.Frsize = uint32(st.Bsize)
	if z.Kind == shedfs.ZoneNone {
		return 0
	}
	q, err := f.quota(z)
	if err != nil {
		return f.errno("statfs", err)
	}
	q.Usage = f.withoutTrash(z, q.Usage)
	bsize := uint64(out.Bsize)
	if bsize == 0 {
		bsize = 4096
		out.Bsize = 4096
		out.Frsize = 4096
	}
	if l := q.Limit.Bytes; l > 0 {
		used := uint64(max(q.Usage.Bytes, 0))
		out.Blocks = uint64(l) / bsize
		free := uint64(0)
		if uint64(l) > used {
			free = (uint64(l) - used) / bsize
		}
		out.Bfree = min(free, st.Bfree)
		out.Bavail = min(free, st.Bavail)
	}
	if l := q.Limit.Inodes; l > 0 {
		used := uint64(max(q.Usage.Inodes, 0))
		out.Files = uint64(l)
		out.Ffree = 0
		if uint64(l) > used {
			out.Ffree = uint64(l) - used
		}
	}
	return 0
}

// MembershipChanged reloads the groups of user in its views and drops
// the kernel's cached groups/ entries, so a group appears or disappears
// at once and open handles of a lost group fail on their next write. Of a
// group the user left, the kernel also drops every name, attribute and
// page it still holds, so that nothing of it stays readable from a cache.
func (f *FS) MembershipChanged(user string) {
	for _, v := range f.notify.viewsOf(user) {
		before := v.actor().Groups
		if err := v.loadGroups(); err != nil {
			f.log.Error("reload groups", "user", user, "err", err)
			continue
		}
		after := v.actor().Groups
		// trash/ shows the kept files of the groups the user is in
		// now: its tree is made again at the next look.
		v.forgetTrashTree()
		items := []inval{dirOf(groupsIno)}
		for _, g := range before {
			items = append(items, nameIn(groupsIno, g))
			if !slices.Contains(after, g) {
				items = append(items, v.cachedBelow(g)...)
			}
		}
		for _, g := range after {
			if !slices.Contains(before, g) {
				items = append(items, nameIn(groupsIno, g))
			}
		}
		f.notify.post(nil, map[*View][]inval{v: items})
	}
}

// cachedBelow lists invalidations of everything this view's kernel holds
// of group g's zone: every name go-fuse knows below groups/g, and every
// inode of it.
func (v *View) cachedBelow(g string) []inval {
	var items []inval
	var walk func(in *fs.Inode, depth int)
	walk = func(in *fs.Inode, depth int) {
		n, ok := in.Operations().(*node)
		if !ok || depth > 4096 {
			return
		}
		items = append(items, dataOf(n.ino, 0, 0))
		for name, ch := range in.Children() {
			items = append(items, nameIn(n.ino, name))
			walk(ch, depth+1)
		}
	}
	if ch := v.groups.GetChild(g); ch != nil {
		walk(ch, 0)
	}
	return items
}

// MountView is Mount for a daemon that keeps its views as
// vfs.MountedView.
func (f *FS) MountView(user, mountpoint string, opts vfs.ViewOptions) (vfs.MountedView, error) {
	v, err := f.Mount(user, mountpoint, opts)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// MountSessionView is MountSession for a daemon that keeps its views as
// vfs.MountedView.
func (f *FS) MountSessionView(ss *metadata.Session, mountpoint string, opts vfs.ViewOptions) (vfs.MountedView, error) {
	v, err := f.MountSession(ss, mountpoint, opts)
	if err != nil {
		return nil, err
	}
	return v, nil
}
