package vfs

import (
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/zones"
)

// SetOwnership is the admin's override of the ownership of entry p of the
// user's view: unlike user.shedfs.mode in a view, it does not ask who owns
// the entry. The new owner (when not nil) must still be someone who sees
// the zone (a member of the group, any user for share/), and ownership
// applies only in share/ and groups/. mode, when not nil, is the new
// ownership mode. It answers the entry's record and its path cleaned.
func (a *Admin) SetOwnership(p string, owner *string, mode *shedfs.OwnMode) (*shedfs.Inode, string, error) {
	c, user := a.c, a.v.user
	n, rel, err := a.Resolve(p)
	if err != nil {
		return nil, "", err
	}
	if !zones.PolicyOf(n.Zone.Kind).OwnModes {
		return nil, "", adminErrorf(syscall.EINVAL, "%s is in zone %s: owners and modes can be changed only in share/ and groups/", rel, n.Zone.Label())
	}
	if owner != nil {
		if err := a.canOwn(*owner, n.Zone); err != nil {
			return nil, "", err
		}
	}
	out, err := c.store.Update(n.Ino, func(n *shedfs.Inode) error {
		if mode != nil {
			n.OwnMode = *mode
		}
		if owner != nil {
			n.Owner = *owner
		}
		return nil
	}, nil)
	if err != nil {
		return nil, "", adminErr(err, fmt.Sprintf("change ownership of %s in the view of %s", rel, user))
	}
	if err := c.store.Sync(); err != nil {
		return nil, "", adminErr(err, "sync metadata")
	}
	a.inodeChanged(n.Ino, out.Zone)
	a.Record(out.Zone, "/"+strings.TrimPrefix(rel, "/"), "admin_set_ownership", 0)
	return out, rel, nil
}

// canOwn checks that principal may own an entry of zone z: a member of the
// group for a group zone, any existing user for share.
func (a *Admin) canOwn(principal string, z shedfs.Zone) error {
	c := a.c
	switch z.Kind {
	case shedfs.ZoneGroup:
		g, err := c.store.GetGroup(z.Principal)
		if err != nil {
			return adminErr(err, fmt.Sprintf("no group named %s", z.Principal))
		}
		if !slices.Contains(g.Members, principal) {
			return adminErrorf(syscall.EINVAL, "%s cannot own an entry of groups/%s: not a member of group %s", principal, z.Principal, z.Principal)
		}
	case shedfs.ZoneShare:
		if _, err := c.store.GetUser(principal); err != nil {
			return adminErr(err, fmt.Sprintf("%s cannot own an entry of share/: no user named %s", principal, principal))
		}
	}
	return nil
}
