package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/acl"
)

// Getxattr implements fs.NodeGetxattrer (vfs.View.Getxattr, which also
// answers the link attributes).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (_ uint32, errno syscall.Errno) {
	defer n.v.fs.track("getxattr", n.zone, time.Now(), &errno)
	if !acl.IsShedfsXattr(attr) && !acl.XattrNamespace(attr).Allowed() {
		// security.* and system.* are never stored (see Setxattr): the
		// kernel asks for security.capability on every write, and the
		// answer, the same for every inode, needs no lookup and is no
		// read worth a denial.
		return 0, syscall.ENODATA
	}
	val, e := n.v.vv.Getxattr(n.at(), attr, len(dest) == 0)
	if e != 0 {
		return 0, e
	}
	if len(dest) == 0 {
		return uint32(len(val)), 0
	}
	if len(dest) < len(val) {
		return uint32(len(val)), syscall.ERANGE
	}
	return uint32(copy(dest, val)), 0
}

// Setxattr implements fs.NodeSetxattrer (vfs.View.Setxattr).
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) (errno syscall.Errno) {
	defer n.v.fs.track("setxattr", n.zone, time.Now(), &errno)
	return n.v.vv.Setxattr(n.at(), attr, data, flags)
}

// Removexattr implements fs.NodeRemovexattrer (vfs.View.Removexattr).
func (n *node) Removexattr(ctx context.Context, attr string) (errno syscall.Errno) {
	defer n.v.fs.track("removexattr", n.zone, time.Now(), &errno)
	return n.v.vv.Removexattr(n.at(), attr)
}

// Listxattr implements fs.NodeListxattrer (vfs.View.Listxattr).
func (n *node) Listxattr(ctx context.Context, dest []byte) (_ uint32, errno syscall.Errno) {
	defer n.v.fs.track("listxattr", n.zone, time.Now(), &errno)
	names, e := n.v.vv.Listxattr(n.at())
	if e != 0 {
		return 0, e
	}
	size := 0
	for _, name := range names {
		size += len(name) + 1
	}
	if len(dest) == 0 {
		return uint32(size), 0
	}
	if len(dest) < size {
		return uint32(size), syscall.ERANGE
	}
	off := 0
	for _, name := range names {
		off += copy(dest[off:], name)
		dest[off] = 0
		off++
	}
	return uint32(size), 0
}
