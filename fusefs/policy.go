package fusefs

import (
	"path"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// This file is the glue between the callbacks and the core: the view's
// actor, the inode a callback acts on as the core takes it (vfs.At), and
// refusals and changes, which the core records (with the door). The
// rules themselves live in acl and zones only.

// actor is the view's principal with its current groups.
func (v *View) actor() acl.Actor { return v.vv.Actor() }

// at is n as the core's operations take it.
func (n *node) at() vfs.At { return vfs.At{Ino: n.ino, Zone: n.zone, Paths: n} }

// PathOf implements vfs.Paths: n (and name inside it, when given) as the
// view shows it, from the kernel's tree.
func (n *node) PathOf(name string) string { return n.pathOf(name) }

// ParentIno implements vfs.Parented: the directory holding n in the
// kernel's tree (0 if none), for the path a link to n lists.
func (n *node) ParentIno() uint64 {
	if _, p := n.Parent(); p != nil {
		if pn, ok := p.Operations().(*node); ok {
			return pn.ino
		}
	}
	return 0
}

// pathOf names n (and name inside it, when given) as the view shows it.
func (n *node) pathOf(name string) string {
	p := "/" + n.Path(nil)
	if name != "" {
		p = path.Join(p, name)
	}
	return p
}

// deny records a denial of op on name in n (or on n itself) and returns
// its errno.
func (n *node) deny(op acl.Op, name string, d acl.Decision) syscall.Errno {
	return n.v.deny(op, n.pathOf(name), n.zone, d)
}

// deny records a denial and returns its errno (vfs.View.Deny).
func (v *View) deny(op acl.Op, p string, z shedfs.Zone, d acl.Decision) syscall.Errno {
	return v.vv.Deny(op, p, z, d)
}

func (f *FS) record(e shedfs.Event) { f.core.Record(e) }
