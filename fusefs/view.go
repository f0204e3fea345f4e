package fusefs

import (
	"context"
	"fmt"
	"math"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/metadata"
)

// ViewOptions are the settings of one user's view.
type ViewOptions struct {
	// ForceOwner presents every entry as owned by Uid:Gid (like bindfs
	// --force-user), so that mode bits never block what the sandbox
	// allows to a container running as another uid.
	ForceOwner bool
	Uid, Gid   uint32
	// Debug logs every FUSE request.
	Debug bool
}

// View is one mounted view of one user's world.
type View struct {
	fs     *FS
	user   string
	roots  metadata.Roots
	opts   ViewOptions
	server *fuse.Server
	root   *node
	groups *groupsDir
}

// Reserved names in the root of every view and the synthetic inode number
// of groups/, which has no record in the store. Store inode numbers grow
// from the bottom, so the top of the range is free.
const (
	nameOutput  = "output"
	nameUploads = "uploads"
	nameShare   = "share"
	nameGroups  = "groups"
	groupsIno   = math.MaxUint64 - 1
)

// Mount mounts the view of user at mountpoint and starts serving it.
func (f *FS) Mount(user, mountpoint string, opts ViewOptions) (*View, error) {
	u, err := f.store.GetUser(user)
	if err != nil {
		return nil, fmt.Errorf("view of %s: %w", user, err)
	}
	v := &View{fs: f, user: user, roots: u.Roots, opts: opts}
	v.root = &node{v: v, ino: u.Roots.Private}
	v.groups = &groupsDir{v: v}
	entry, attr := f.opts.EntryTimeout, f.opts.AttrTimeout
	negative := time.Duration(0)
	fsOpts := &fs.Options{
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &negative,
		NullPermissions: true,
		RootStableAttr:  &fs.StableAttr{Ino: u.Roots.Private},
		// Node IDs are store inode numbers, so an invalidation can name
		// an inode in every view without a per-view table.
		ExternalNodeID: true,
		MountOptions: fuse.MountOptions{
			AllowOther:  true,
			DirectMount: true,
			FsName:      "shedfs:" + user,
			Name:        "shedfs",
			Options:     []string{"default_permissions"},
			MaxWrite:    1 << 20,
			Debug:       opts.Debug,
		},
	}
	server, err := fs.Mount(mountpoint, v.root, fsOpts)
	if err != nil {
		return nil, fmt.Errorf("mount view of %s at %s: %w", user, mountpoint, err)
	}
	v.server = server
	f.notify.add(v)
	return v, nil
}

// Unmount detaches the view from the kernel; Wait returns once serving ends.
func (v *View) Unmount() error {
	v.fs.notify.remove(v)
	return v.server.Unmount()
}

// Wait blocks until the view is unmounted.
func (v *View) Wait() { v.server.Wait() }

// User is the principal the view belongs to.
func (v *View) User() string { return v.user }

// lookupReserved resolves the reserved names of the view root. It returns
// nil for every other name or directory.
func (v *View) lookupReserved(ctx context.Context, parent *node, name string, out *fuse.EntryOut) *fs.Inode {
	if parent.ino != v.roots.Private {
		return nil
	}
	var ino uint64
	switch name {
	case nameOutput:
		ino = v.roots.Output
	case nameUploads:
		ino = v.roots.Uploads
	case nameShare:
		ino = v.fs.store.ShareRoot()
	case nameGroups:
		v.groups.fillAttr(&out.Attr)
		out.SetEntryTimeout(v.fs.opts.EntryTimeout)
		out.SetAttrTimeout(v.fs.opts.AttrTimeout)
		return parent.NewInode(ctx, v.groups, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: groupsIno})
	default:
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
	if n.ino == v.roots.Private {
		out = append(out,
			fuse.DirEntry{Name: nameOutput, Ino: v.roots.Output, Mode: syscall.S_IFDIR},
			fuse.DirEntry{Name: nameUploads, Ino: v.roots.Uploads, Mode: syscall.S_IFDIR},
			fuse.DirEntry{Name: nameShare, Ino: v.fs.store.ShareRoot(), Mode: syscall.S_IFDIR},
			fuse.DirEntry{Name: nameGroups, Ino: groupsIno, Mode: syscall.S_IFDIR},
		)
	}
	entries, err := v.fs.store.ReadDir(n.ino)
	if err != nil {
		return nil, v.fs.errno("readdir", err)
	}
	for _, de := range entries {
		out = append(out, fuse.DirEntry{Name: de.Name, Ino: de.Ino, Mode: de.Mode})
	}
	return out, 0
}

// defaultOwnMode is the ownership mode a new entry of zone z gets.
func (v *View) defaultOwnMode(z metadata.Zone) metadata.OwnMode {
	switch z.Kind {
	case metadata.ZoneShare, metadata.ZoneGroup:
		return metadata.OwnModeGroup
	default:
		return metadata.OwnModeNone
	}
}

// isReservedIn reports whether name is one of the view root's reserved
// names and parent is the view root.
func (v *View) isReservedIn(parent *node, name string) bool {
	if parent.ino != v.roots.Private {
		return false
	}
	switch name {
	case nameOutput, nameUploads, nameShare, nameGroups:
		return true
	}
	return false
}

// checkCreate decides whether the view may add name to parent.
func (v *View) checkCreate(parent *node, name string) syscall.Errno {
	if v.isReservedIn(parent, name) {
		return syscall.EEXIST
	}
	return 0
}

// checkRemove decides whether the view may remove name from parent.
func (v *View) checkRemove(parent *node, name string) syscall.Errno {
	if v.isReservedIn(parent, name) {
		return syscall.EPERM
	}
	return 0
}

// checkRename decides whether the view may move oldParent/oldName to
// newParent/newName.
func (v *View) checkRename(oldParent *node, oldName string, newParent *node, newName string) syscall.Errno {
	if v.isReservedIn(oldParent, oldName) || v.isReservedIn(newParent, newName) {
		return syscall.EPERM
	}
	return 0
}

// checkSymlink decides whether target is an acceptable symlink text.
func (v *View) checkSymlink(parent *node, target string) syscall.Errno {
	if len(target) == 0 || len(target) >= 4096 {
		return syscall.EINVAL
	}
	return 0
}

// checkSetattr decides whether the view may change n's attributes.
func (v *View) checkSetattr(n *node) syscall.Errno { return 0 }

// shedfsXattr computes user.shedfs.<name> for n.
func (v *View) shedfsXattr(n *node, name string) ([]byte, syscall.Errno) {
	rec, e := n.load()
	if e != 0 {
		return nil, e
	}
	switch name {
	case "zone":
		return []byte(rec.Zone.Label()), 0
	case "owner":
		if rec.Owner == "" {
			return nil, syscall.ENODATA
		}
		return []byte(rec.Owner), 0
	case "mode":
		if rec.OwnMode == metadata.OwnModeNone {
			return nil, syscall.ENODATA
		}
		return []byte(rec.OwnMode.String()), 0
	}
	return nil, syscall.ENODATA
}

// setShedfsXattr changes the ownership attributes of n.
func (v *View) setShedfsXattr(n *node, name, value string) syscall.Errno {
	return syscall.EPERM
}

// statfs reports the figures df shows in the zone of n.
func (v *View) statfs(n *node, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := statfsDisk(v.fs.blobs.Root(), &st); err != nil {
		return v.fs.errno("statfs", err)
	}
	out.FromStatfsT(&st)
	out.NameLen = metadata.MaxNameLen
	return 0
}
