package agentfs

import (
	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// Allow checks the token's grant for access to view path p, recording a
// refusal as the view's rules are recorded, for a call that another part
// of the daemon carries out by path (the trash, links, restore): the
// grant is asked before anything is looked up. It answers the clean path.
func (f *FS) Allow(access acl.Access, p string, op acl.Op) (string, error) {
	clean, err := shedfs.CleanViewPath(p)
	if err != nil {
		return "", pathError(p, err)
	}
	if ferr := f.allow(access, clean, op, f.v.RootZone()); ferr != nil {
		return "", ferr
	}
	return clean, nil
}

// AllowTool checks that the token carries access, for a call that names
// no path (quota, groups, the lists of the trash and links): asked at the
// token's root, which its scope always covers.
func (f *FS) AllowTool(access acl.Access, op acl.Op) error {
	if f.grant == nil {
		return nil
	}
	if ferr := f.allow(access, f.grant.Root, op, f.v.RootZone()); ferr != nil {
		return ferr
	}
	return nil
}

// Visible reports whether the token lets the caller see view path p
// (what a listing shows), without recording anything.
func (f *FS) Visible(p string) bool {
	return f.grant == nil || acl.CheckGrant(*f.grant, f.v.Door(), acl.AccessList, p).Allowed()
}
