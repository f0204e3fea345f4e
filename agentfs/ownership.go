package agentfs

import (
	"syscall"

	"github.com/shedfs/shedfs/acl"
)

// SetMode sets the ownership mode of entry p (owner, group, owner_ro...):
// who else may change it. It is the view's user.shedfs.mode attribute, set
// through the core, so acl decides as in a view: only the owner may, and
// only where modes apply (share/, groups).
func (f *FS) SetMode(p, mode string) (Info, error) {
	return f.setOwnership(p, acl.XattrMode, mode)
}

// Chown gives entry p to another user who can see its zone (a member of
// its group; anyone in share/), as its owner may: the view's
// user.shedfs.owner attribute, set through the core.
func (f *FS) Chown(p, owner string) (Info, error) {
	return f.setOwnership(p, acl.XattrOwner, owner)
}

func (f *FS) setOwnership(p, attr, value string) (Info, error) {
	e, ferr := f.reach(p, acl.AccessMetadata, acl.OpSetattr, false)
	if ferr != nil {
		return Info{}, ferr
	}
	if e.groups {
		return Info{}, f.fail(f.v.RefuseGroups(acl.OpSetattr, ""), e.p)
	}
	if value == "" {
		return Info{}, errorf(CodeInvalidArgument, e.p, "give the new value")
	}
	if errno := f.v.Setxattr(e.at, attr, []byte(value), 0); errno != 0 {
		if errno == syscall.ENODATA || errno == syscall.ENOTSUP {
			return Info{}, errorf(CodeInvalidArgument, e.p, "ownership modes apply in share/ and groups/ only")
		}
		return Info{}, f.fail(errno, e.p)
	}
	return f.Stat(e.p)
}
