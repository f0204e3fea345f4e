package fusefs

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/fusehandover"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// View is one mounted view of one user's world.
type View struct {
	fs *FS
	// vv is the view as the core serves it: who it is for, its
	// namespace and its operations (vfs.View).
	vv    *vfs.View
	user  string
	roots shedfs.Roots
	opts  vfs.ViewOptions
	// owner is the owner every entry shows, nil when none is forced:
	// opts' at the mount, changed by OwnerChanged (owner.go).
	owner  atomic.Pointer[fuse.Owner]
	server *fuse.Server
	// mo are the mount options the server was made with.
	mo         *fuse.MountOptions
	mountpoint string
	// ledger, adopted, restoring, handedOver and lockFhs serve a takeover
	// (takeover.go).
	ledger     *fusehandover.Ledger
	adopted    bool
	restoring  atomic.Bool
	handedOver atomic.Bool
	lockFhs    lockFhs
	root       *node
	groups     *groupsDir

	// session is the id of a session's view, "" for a main view;
	// rootIno is the view root (the private root, or the session's
	// scratch root) and uploadsIno what uploads/ shows (session.go).
	session             string
	rootIno, uploadsIno uint64

	// trash is what the view keeps of its trash/ (trash.go).
	trash trashView
	// snaps is what it keeps of its snapshots/ (snapshots.go).
	snaps snapView
	// lists are its open directory handles' snapshots (listings.go).
	lists listings

	// queue holds the invalidations still to be told to this view's
	// kernel; waiting counts its requests waiting for deliveries to
	// other views (guarded by notifier.waitMu).
	queue   viewQueue
	waiting int

	// setIDWrites are its writes in flight that clear set-ID bits
	// (killpriv.go).
	setIDWrites setIDWrites

	// io counts its open handles by kernel I/O mode, per inode (file.go).
	io ioModes

	// entries counts the entries its kernel holds (memlimit.go).
	entries atomic.Int64
}

// kernelEntries counts n entries handed to (n > 0) or forgotten by (n < 0)
// the view's kernel.
func (v *View) kernelEntries(n int64) {
	v.entries.Add(n)
	v.fs.memLimit.added(n)
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
	v, raw, err := f.newView(user, ss, mountpoint, opts)
	if err != nil {
		return nil, err
	}
	server, err := fuse.NewServer(raw, mountpoint, v.mo)
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
	f.serving(v)
	return v, nil
}

// newView makes a view and the file system its kernel requests go to,
// outermost layer first; nothing is mounted yet.
func (f *FS) newView(user string, ss *metadata.Session, mountpoint string, opts vfs.ViewOptions) (*View, fuse.RawFileSystem, error) {
	vv, err := f.core.NewView(vfs.DoorFUSE, user, ss, opts)
	if err != nil {
		return nil, nil, err
	}
	v := &View{fs: f, vv: vv, user: user, roots: vv.Roots(), opts: opts,
		session: vv.Session(), rootIno: vv.Root(), uploadsIno: vv.Uploads(), mountpoint: mountpoint}
	vv.Kernel = v
	v.setOwner(opts)
	v.root = &node{v: v, ino: v.rootIno, zone: vv.RootZone()}
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
	fsOpts.MountOptions.Logger = log.New(goFuseLog{v}, "", 0)
	bridge := &setIDKillingFS{RawFileSystem: fs.NewNodeFS(v.root, fsOpts), v: v}
	// The ledger keeps what the kernel holds, for a takeover (takeover.go).
	v.ledger = fusehandover.NewLedger(&lockingFS{RawFileSystem: &forgetCounter{RawFileSystem: bridge, v: v}, v: v})
	var raw fuse.RawFileSystem = v.ledger
	if f.opts.Transport != nil {
		raw = f.opts.Transport.Wrap(v.name(), raw, &fsOpts.MountOptions)
	}
	v.mo = &fsOpts.MountOptions
	return v, raw, nil
}

// goFuseLog passes go-fuse's log lines on to the process's log, but for
// the one each of a view's readers writes when a takeover stops it
// (fusehandover.Stop: a read fails with EAGAIN).
type goFuseLog struct{ v *View }

func (g goFuseLog) Write(p []byte) (int, error) {
	if g.v.handedOver.Load() && bytes.Contains(p, []byte("Failed to read from fuse conn")) {
		return len(p), nil
	}
	log.Print(string(p))
	return len(p), nil
}

// serving follows a view that serves: it hears of changes until it ends,
// and what its processes held goes with it.
func (f *FS) serving(v *View) {
	f.notify.add(v)
	go func() {
		// Whatever the view's processes held goes with the view. A
		// view detached while busy, or whose connection was aborted
		// (a forced session close), stops here without a successful
		// Unmount: it is told of no more changes either.
		v.server.Wait()
		f.notify.remove(v)
		if v.handedOver.Load() {
			// Another process serves it now, with all it holds.
			return
		}
		// Its kernel forgets all it held, without a FORGET.
		f.memLimit.added(-v.entries.Swap(0))
		f.memLimit.mounted(-1)
		// Its kernel will release no handle any more: its locks and
		// what its handles hold open go now, not at a restart.
		v.vv.Close()
		f.known.dropView(v)
		f.negatives.dropView(v)
	}()
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
	if err := v.unmount(); err != nil {
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
func (v *View) name() string { return v.vv.Name() }

// lookupReserved resolves the reserved names of the view root. It returns
// nil for every other name or directory.
func (v *View) lookupReserved(ctx context.Context, parent *node, name string, out *fuse.EntryOut) *fs.Inode {
	ino, r := v.vv.Reserve(parent.ino, name)
	switch r {
	case vfs.ReservedTrash:
		return v.lookupTrash(ctx, parent, name, out)
	case vfs.ReservedSnapshots:
		return v.lookupSnapshots(ctx, parent, out)
	case vfs.ReservedGroups:
		v.groups.fillAttr(&out.Attr)
		out.SetEntryTimeout(v.fs.opts.EntryTimeout)
		out.SetAttrTimeout(v.fs.opts.AttrTimeout)
		return parent.NewInode(ctx, v.groups, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: groupsIno})
	case vfs.ReservedRoot:
		if rec, ok := v.vv.ReservedRoot(ino, name); ok {
			return parent.entry(ctx, rec, out)
		}
	}
	return nil
}

// list returns the entries of a directory as this view shows them,
// including the reserved names in the view root.
func (v *View) list(n *node) ([]fuse.DirEntry, syscall.Errno) {
	trashIno := uint64(0)
	if n.ino == v.rootIno {
		trashIno = v.trashDirIno("")
	}
	list, e := v.vv.List(n.at(), trashIno)
	if e != 0 {
		return nil, e
	}
	out := make([]fuse.DirEntry, len(list))
	for i, de := range list {
		out[i] = fuse.DirEntry{Name: de.Name, Ino: de.Ino, Mode: de.Mode}
	}
	return out, 0
}

// statfs reports the figures df shows in zone z (vfs.View.Statfs).
func (v *View) statfs(z shedfs.Zone, out *fuse.StatfsOut) syscall.Errno {
	st, e := v.vv.Statfs(z)
	if e != 0 {
		return e
	}
	out.FromStatfsT(st)
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
		if err := v.vv.LoadGroups(); err != nil {
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
		f.notify.postWithin(nil, map[*View][]inval{v: items}, membershipWait)
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
