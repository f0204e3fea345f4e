package vfs

import (
	"context"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// This file connects the operations to package content: a close after a
// write queues the file for its digest and scan (nothing more on the
// write path), and an open asks whether the content may be opened.

// contentChanged is told that the content of at changed and its new size
// is persisted, with its pending mark or, when known is set, with its
// digest and verdict. write, for a close after writes, records the
// write-close in the audit trail once the digest is known.
func (v *View) contentChanged(at At, write bool, bytes int64, known *shedfs.Content) {
	c := v.c
	svc := c.content
	if svc == nil {
		if write {
			v.changed("write", at, "", bytes)
		}
		return
	}
	var closed func(shedfs.Content)
	if write && c.Recording() {
		ev := shedfs.Event{Time: time.Now(), User: v.user, Zone: at.Zone, Path: at.pathOf(""), Op: "write", Bytes: bytes, Session: v.session, Door: v.door, Token: v.token, TokenReason: v.tokenReason}
		closed = func(cont shedfs.Content) {
			ev.SHA256 = cont.SHA256
			ev.Scan = cont.ScanLabel()
			c.Record(ev)
		}
	}
	switch {
	case known == nil:
		svc.Changed(at.Ino, closed)
	case closed != nil:
		closed(*known)
	}
}

// contentChanging is told before the first change of an open file's
// content since it was last persisted (resizeLocked): in a scanned zone
// the file leaves its verdict before any changed byte can reach another
// reader or a link (content.Service.Changing).
func (v *View) contentChanging(at At) syscall.Errno {
	svc := v.c.content
	if svc == nil {
		return 0
	}
	if err := svc.Changing(at.Ino, at.Zone, v.user); err != nil {
		return v.c.Errno("mark content pending", err)
	}
	return 0
}

// admitContent decides an open of at by its scan state (acl.OpenContent),
// waiting for a pending verdict as the content service allows. A refusal
// is audited with the scan state, so an infected file's record names its
// signature.
func (v *View) admitContent(ctx context.Context, at At, op acl.Op) syscall.Errno {
	svc := v.c.content
	if svc == nil {
		return 0
	}
	cont, d := svc.Admit(ctx, v.user, at.Ino, at.Zone)
	if d.Allowed() {
		return 0
	}
	if d.Reason == acl.ReasonScanPending && ctx.Err() != nil {
		// The caller was interrupted (a signal reached it, such as the
		// Go runtime's preemption signal) before the wait ran out.
		// FUSE asks EINTR of an interrupted request, as the lock waits
		// answer: the caller retries the open and waits again, and
		// nothing was refused, so nothing is audited.
		return syscall.EINTR
	}
	if d.Reason == "" {
		return v.c.Errno("read content state", d.Err())
	}
	return v.DenyScan(op, at.pathOf(""), at.Zone, d, cont.ScanLabel())
}

// ContentOf is what a stat shows of regular file ino (zone z): its
// digest when already known ("" otherwise: a stat never computes one)
// and its scan state. Without a content service (a core no daemon runs)
// nothing is scanned, so a file awaiting its digest is unscanned.
func (c *Core) ContentOf(ino uint64, z shedfs.Zone) (shedfs.Content, error) {
	if c.content != nil {
		return c.content.Content(ino, z)
	}
	cont, err := c.store.Content(ino)
	if err == nil && cont.State == shedfs.ScanPending {
		cont.State = shedfs.ScanUnscanned
	}
	return cont, err
}
