package fusefs

import (
	"syscall"

	"github.com/shedfs/shedfs/acl"
)

// The computed xattrs user.shedfs.sha256 and user.shedfs.scan are read
// here; the rest of what connects the operations to package content is
// the core's (vfs/content.go).

// contentXattr answers user.shedfs.sha256 (computed and waited for when
// not known yet) and user.shedfs.scan; ok is false for any other name.
func (n *node) contentXattr(attr string) (_ string, ok bool, _ syscall.Errno) {
	if attr != acl.XattrSHA256 && attr != acl.XattrScan {
		return "", false, 0
	}
	svc := n.v.fs.opts.Content
	rec, e := n.load()
	if e != 0 {
		return "", true, e
	}
	if svc == nil || !rec.IsRegular() {
		return "", true, syscall.ENODATA
	}
	if attr == acl.XattrSHA256 {
		n.v.fs.core.Settle(n.ino) // a digest held by a flush is stored first
		sum, err := svc.Digest(n.ino)
		if err != nil {
			return "", true, n.v.fs.errno("digest", err)
		}
		return sum, true, 0
	}
	c, err := svc.Content(n.ino, n.zone)
	if err != nil {
		return "", true, n.v.fs.errno("scan state", err)
	}
	return c.ScanLabel(), true, 0
}
