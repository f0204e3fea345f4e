package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// This file connects the callbacks to package content: a close after a
// write queues the file for its digest and scan (nothing more on the
// write path), an open asks whether the content may be opened, and the
// computed xattrs user.shedfs.sha256 and user.shedfs.scan are read.

// contentChanged is told that the content of n changed and its new size
// is persisted, with its pending mark or, when known is set, with its
// digest and verdict. write, for a close after writes, records the
// write-close in the audit trail once the digest is known.
func (f *FS) contentChanged(n *node, ino uint64, write bool, bytes int64, known *shedfs.Content) {
	svc := f.opts.Content
	if svc == nil {
		if write {
			n.changed("write", "", bytes)
		}
		return
	}
	var closed func(shedfs.Content)
	if write && f.core.Recording() {
		ev := shedfs.Event{Time: time.Now(), User: n.v.user, Zone: n.zone, Path: n.pathOf(""), Op: "write", Bytes: bytes, Session: n.v.session, Door: vfs.DoorFUSE}
		closed = func(c shedfs.Content) {
			ev.SHA256 = c.SHA256
			ev.Scan = c.ScanLabel()
			f.record(ev)
		}
	}
	switch {
	case known == nil:
		svc.Changed(ino, closed)
	case closed != nil:
		closed(*known)
	}
}

// contentChanging is told before the first change of an open file's
// content since it was last persisted (resizeLocked): in a scanned zone
// the file leaves its verdict before any changed byte can reach another
// reader or a link (content.Service.Changing).
func (f *FS) contentChanging(n *node, ino uint64) syscall.Errno {
	svc := f.opts.Content
	if svc == nil {
		return 0
	}
	if err := svc.Changing(ino, n.zone, n.v.user); err != nil {
		return f.errno("mark content pending", err)
	}
	return 0
}

// admitContent decides an open of n by its scan state (acl.OpenContent),
// waiting for a pending verdict as the content service allows. A refusal
// is audited with the scan state, so an infected file's record names its
// signature.
func (n *node) admitContent(ctx context.Context, op acl.Op) syscall.Errno {
	svc := n.v.fs.opts.Content
	if svc == nil {
		return 0
	}
	c, d := svc.Admit(ctx, n.v.user, n.ino, n.zone)
	if d.Allowed() {
		return 0
	}
	if d.Reason == acl.ReasonScanPending && ctx.Err() != nil {
		// The kernel interrupted the open (a signal reached the
		// caller, such as the Go runtime's preemption signal) before
		// the wait ran out. FUSE asks EINTR of an interrupted request,
		// as the lock waits answer: the caller retries the open and
		// waits again, and nothing was refused, so nothing is audited.
		return syscall.EINTR
	}
	if d.Reason == "" {
		return n.v.fs.errno("read content state", d.Err())
	}
	return n.v.denyDetail(op, n.pathOf(""), n.zone, d, c.ScanLabel())
}

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
		n.v.fs.settle(n.ino) // a digest held by a flush is stored first
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
