package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/acl"
)

// refuseCreates is embedded by the synthetic directories of a view
// (groups/, trash/), in which nothing can be made: every create, mkdir,
// mknod, symlink and link is handed to refuse, the directory's own way
// to the view's one denial path (its rule, errno and audit reason).
type refuseCreates struct {
	refuse func(op acl.Op, name string) syscall.Errno
}

// Create implements fs.NodeCreater.
func (r refuseCreates) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, r.refuse(acl.OpCreate, name)
}

// Mkdir implements fs.NodeMkdirer.
func (r refuseCreates) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, r.refuse(acl.OpCreate, name)
}

// Mknod implements fs.NodeMknoder.
func (r refuseCreates) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, r.refuse(acl.OpCreate, name)
}

// Symlink implements fs.NodeSymlinker.
func (r refuseCreates) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, r.refuse(acl.OpSymlink, name)
}

// Link implements fs.NodeLinker.
func (r refuseCreates) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, r.refuse(acl.OpLink, name)
}
