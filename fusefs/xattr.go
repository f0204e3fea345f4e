package fusefs

import (
	"context"
	"strings"
	"syscall"

	"github.com/shedfs/shedfs/metadata"
)

// xattrPrefix is the in-band interface of DESIGN.md section 3: attributes
// under it are computed from the inode, never stored.
const xattrPrefix = "user.shedfs."

// Getxattr implements fs.NodeGetxattrer.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	var val []byte
	if strings.HasPrefix(attr, xattrPrefix) {
		v, e := n.v.shedfsXattr(n, strings.TrimPrefix(attr, xattrPrefix))
		if e != 0 {
			return 0, e
		}
		val = v
	} else {
		v, err := n.v.fs.store.GetXattr(n.ino, attr)
		if err != nil {
			return 0, n.v.fs.errno("getxattr", err)
		}
		val = v
	}
	if len(dest) == 0 {
		return uint32(len(val)), 0
	}
	if len(dest) < len(val) {
		return uint32(len(val)), syscall.ERANGE
	}
	return uint32(copy(dest, val)), 0
}

// Setxattr implements fs.NodeSetxattrer.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if strings.HasPrefix(attr, xattrPrefix) {
		return n.v.setShedfsXattr(n, strings.TrimPrefix(attr, xattrPrefix), string(data))
	}
	if e := xattrNamespaceAllowed(attr); e != 0 {
		return e
	}
	if e := n.v.checkSetattr(n); e != 0 {
		return e
	}
	return n.v.fs.errno("setxattr", n.v.fs.store.SetXattr(n.ino, attr, data, int(flags)))
}

// Removexattr implements fs.NodeRemovexattrer.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if strings.HasPrefix(attr, xattrPrefix) {
		return syscall.EPERM
	}
	if e := n.v.checkSetattr(n); e != 0 {
		return e
	}
	return n.v.fs.errno("removexattr", n.v.fs.store.RemoveXattr(n.ino, attr))
}

// Listxattr implements fs.NodeListxattrer. The computed user.shedfs.*
// attributes are not listed, so that cp -a and rsync -X do not try to copy
// them onto new files.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	names, err := n.v.fs.store.ListXattr(n.ino)
	if err != nil {
		return 0, n.v.fs.errno("listxattr", err)
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

// xattrNamespaceAllowed keeps to the namespaces a sandboxed user may
// write: user.* and trusted.* are stored; security.* and system.* (ACLs,
// capabilities) would mean something to the kernel that shedfs does not
// enforce, so they are refused rather than silently ignored.
func xattrNamespaceAllowed(name string) syscall.Errno {
	switch {
	case len(name) > metadata.MaxXattrNameLen:
		return syscall.ERANGE
	case strings.HasPrefix(name, "user."), strings.HasPrefix(name, "trusted."):
		return 0
	default:
		return syscall.EOPNOTSUPP
	}
}
