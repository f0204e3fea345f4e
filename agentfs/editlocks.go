package agentfs

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// Edit locks, as Fileshed's lockedit: lock_open takes the lock and reads
// the file, lock_save writes it and lets go, lock_cancel lets go. While it
// is held, nobody else changes the file through any door.

// DefaultEditLockTTL is an edit lock's lifetime unless the call asks for
// another; MaxEditLockTTL the longest.
const (
	DefaultEditLockTTL = 30 * time.Minute
	MaxEditLockTTL     = 24 * time.Hour
)

// Locked is an edit lock taken, with the file as it was read under it.
type Locked struct {
	Path    string    `json:"path"`
	Expires time.Time `json:"expires"`
	SHA256  string    `json:"sha256"`
	*Content
}

// LockOpen takes (or renews) the edit lock of file p for ttl and reads it
// (at most max bytes: a larger file is locked all the same, and read in
// pieces). Only a caller who may write the file may lock it.
func (f *FS) LockOpen(ctx context.Context, p string, ttl time.Duration, max int) (*Locked, error) {
	if ttl <= 0 {
		ttl = DefaultEditLockTTL
	}
	if ttl > MaxEditLockTTL {
		return nil, errorf(CodeInvalidArgument, p, "an edit lock lasts at most %v", MaxEditLockTTL)
	}
	e, ferr := f.reach(p, acl.AccessWrite|acl.AccessRead, acl.OpWrite, true)
	if ferr != nil {
		return nil, ferr
	}
	if e.groups || !e.rec.IsRegular() {
		return nil, errorf(CodeInvalidArgument, e.p, "only a regular file can be edit-locked")
	}
	// The view's rules decide as for an open for writing: a file this
	// caller may not change cannot be locked by it either.
	h, _, errno := f.v.Open(ctx, e.at, syscall.O_WRONLY)
	if errno != 0 {
		return nil, f.fail(errno, e.p)
	}
	h.Release()
	l, err := f.v.Core().TakeEditLock(e.rec.Ino, f.v.Actor(), f.v.Door(), e.p, ttl)
	if errors.Is(err, metadata.ErrEditLocked) {
		return nil, f.fail(f.v.Deny(acl.OpWrite, "/"+e.p, e.at.Zone, acl.CheckEditLock(&acl.EditLock{User: l.User, Session: l.Session, Expires: l.Expires}, f.v.Actor(), time.Now())), e.p)
	} else if err != nil {
		return nil, AsError(err)
	}
	c, err := f.Read(ctx, e.p, 0, max, false)
	if err != nil {
		return nil, err
	}
	sum, err := f.Hash(ctx, e.p)
	if err != nil {
		return nil, err
	}
	return &Locked{Path: e.p, Expires: l.Expires, SHA256: sum, Content: c}, nil
}

// LockSave writes data to file p, whose edit lock the caller holds, and
// lets the lock go.
func (f *FS) LockSave(ctx context.Context, p string, data []byte) (Info, error) {
	e, ferr := f.heldLock(p)
	if ferr != nil {
		return Info{}, ferr
	}
	in, err := f.Write(ctx, e.p, data, Overwrite, "")
	if err != nil {
		return Info{}, err
	}
	if _, err := f.v.Core().ReleaseEditLock(e.rec.Ino, nil); err != nil && !errors.Is(err, syscall.ENOENT) {
		return Info{}, AsError(err)
	}
	in.EditLockedBy = ""
	return in, nil
}

// LockCancel lets the caller's edit lock of file p go, unchanged.
func (f *FS) LockCancel(p string) error {
	e, ferr := f.heldLock(p)
	if ferr != nil {
		return ferr
	}
	if _, err := f.v.Core().ReleaseEditLock(e.rec.Ino, nil); err != nil && !errors.Is(err, syscall.ENOENT) {
		return AsError(err)
	}
	return nil
}

// ForceUnlock lets go of an edit lock of file p that someone else holds:
// only the file's owner may (acl.ForceEditUnlock).
func (f *FS) ForceUnlock(p string) error {
	e, ferr := f.reach(p, acl.AccessMetadata, acl.OpSetattr, true)
	if ferr != nil {
		return ferr
	}
	if e.groups {
		return errorf(CodeInvalidArgument, e.p, "not a file")
	}
	a := f.v.Actor()
	_, err := f.v.Core().ReleaseEditLock(e.rec.Ino, func(l acl.EditLock) acl.Decision {
		d := acl.ForceEditUnlock(l, a, acl.EntryOf(e.rec))
		if !d.Allowed() {
			f.v.Deny(acl.OpSetattr, "/"+e.p, e.at.Zone, d)
		}
		return d
	})
	switch {
	case errors.Is(err, syscall.ENOENT):
		return errorf(CodeNotFound, e.p, "the file has no edit lock")
	case errors.Is(err, syscall.EPERM):
		return &Error{Code: CodePermissionDenied, Path: e.p, Rule: acl.ReasonEditLocked, Message: "only the file's owner (or the administrator: shedfs lock release) may release another holder's edit lock"}
	case err != nil:
		return AsError(err)
	}
	return nil
}

// heldLock resolves p, whose edit lock the caller must hold now.
func (f *FS) heldLock(p string) (entry, *Error) {
	e, ferr := f.reach(p, acl.AccessWrite, acl.OpWrite, true)
	if ferr != nil {
		return entry{}, ferr
	}
	if e.groups || !e.rec.IsRegular() {
		return entry{}, errorf(CodeInvalidArgument, e.p, "not a regular file")
	}
	l := f.v.Core().EditLockOf(e.rec.Ino)
	if l == nil || !l.HeldBy(f.v.Actor()) {
		return entry{}, errorf(CodeConflict, e.p, "you hold no edit lock on this file (it expired, or was never taken): take it again with lock_open")
	}
	return e, nil
}
