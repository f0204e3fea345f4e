package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// groupsDir is the view's groups/ folder. It has no record in the store:
// its entries are the user's groups at the moment of asking, so a change of
// membership shows without a remount.
type groupsDir struct {
	fs.Inode
	refuseCreates
	v *View
}

var startTime = time.Now()

func (g *groupsDir) fillAttr(out *fuse.Attr) {
	out.Ino = groupsIno
	out.Mode = syscall.S_IFDIR | 0o555
	out.Nlink = 2
	out.Blksize = 4096
	if o, ok := g.v.presentedOwner(); ok {
		out.Owner = o
	}
	out.SetTimes(&startTime, &startTime, &startTime)
}

// Lookup implements fs.NodeLookuper: only the user's current groups.
func (g *groupsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	rec, e := g.v.vv.Group(name)
	if e != 0 {
		return nil, e
	}
	return g.v.entryUnder(ctx, &g.Inode, rec, out), 0
}

// Getattr implements fs.NodeGetattrer.
func (g *groupsDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	g.fillAttr(&out.Attr)
	out.SetTimeout(g.v.fs.opts.AttrTimeout)
	return 0
}

// Readdir implements fs.NodeReaddirer.
func (g *groupsDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	list := []fuse.DirEntry{
		{Name: ".", Ino: groupsIno, Mode: syscall.S_IFDIR},
		{Name: "..", Ino: g.v.rootIno, Mode: syscall.S_IFDIR},
	}
	for _, de := range g.v.vv.Groups() {
		list = append(list, fuse.DirEntry{Name: de.Name, Ino: de.Ino, Mode: de.Mode})
	}
	return fs.NewListDirStream(list), 0
}

// Statfs implements fs.NodeStatfser.
func (g *groupsDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return g.v.statfs(shedfs.Zone{}, out)
}

// groups/ is read-only itself: acl refuses every change in it, and the
// core records the refusal like any other (vfs.View.RefuseGroups).
func (g *groupsDir) deny(op acl.Op, name string) syscall.Errno {
	return g.v.vv.RefuseGroups(op, name)
}

// Unlink implements fs.NodeUnlinker.
func (g *groupsDir) Unlink(ctx context.Context, name string) syscall.Errno {
	return g.deny(acl.OpUnlink, name)
}

// Rmdir implements fs.NodeRmdirer.
func (g *groupsDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	return g.deny(acl.OpRmdir, name)
}

// Rename implements fs.NodeRenamer.
func (g *groupsDir) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return g.deny(acl.OpRename, name)
}

// Setattr implements fs.NodeSetattrer.
func (g *groupsDir) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return g.deny(acl.OpSetattr, "")
}

// Setxattr implements fs.NodeSetxattrer.
func (g *groupsDir) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return g.deny(acl.OpSetattr, "")
}
