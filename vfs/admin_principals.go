package vfs

import (
	"fmt"

	"github.com/shedfs/shedfs"
)

// The admin's changes of users and groups that the views must follow: a
// membership decides what a view's groups/ shows and what its user may do
// in a group's zone, a user's owner what every entry of its views
// presents. Each changes the store and tells every attached frontend in
// the same step, so that no door changes a principal around the core.
// The admin API checks the request (names, limits) and answers.

// JoinGroup adds the user to group (adding a member again is no error);
// the user's views see the group at once.
func (a *Admin) JoinGroup(group string) error {
	if err := a.c.store.AddMember(group, a.v.user); err != nil {
		return fmt.Errorf("add %s to group %s: %w", a.v.user, group, err)
	}
	a.c.MembershipChanged(a.v.user)
	return nil
}

// LeaveGroup takes the user out of group; the user's views lose it at
// once (a lock or a write in its zone is refused from then on).
func (a *Admin) LeaveGroup(group string) error {
	if err := a.c.store.RemoveMember(group, a.v.user); err != nil {
		return fmt.Errorf("remove %s from group %s: %w", a.v.user, group, err)
	}
	a.c.MembershipChanged(a.v.user)
	return nil
}

// RemoveUser deletes the user with its private, output and uploads data
// and their blobs. Its views must be gone already (the daemon unmounts
// them first).
func (a *Admin) RemoveUser() error {
	blobs, err := a.c.store.RemoveUser(a.v.user)
	if err != nil {
		return fmt.Errorf("remove user %s: %w", a.v.user, err)
	}
	a.c.removeBlobs(blobs)
	return nil
}

// SetOwner makes uid:gid the user's own owner (0 and 0: none) and has
// its views present it at once, with what their kernels cached of the old
// owner invalidated, no remount: def are the options of a view of a user
// without an owner of its own (OwnerOptions). It answers the user and the
// options its views present from now on.
func (a *Admin) SetOwner(uid, gid uint32, def ViewOptions) (*shedfs.User, ViewOptions, error) {
	u, err := a.c.store.UpdateUser(a.v.user, func(u *shedfs.User) error {
		u.Uid, u.Gid = uid, gid
		return nil
	})
	if err != nil {
		return nil, ViewOptions{}, fmt.Errorf("set owner of user %s: %w", a.v.user, err)
	}
	opts := OwnerOptions(def, u)
	a.c.OwnerChanged(u.Name, opts)
	return u, opts, nil
}

// OwnerOptions are the options of u's views: def, with u's own owner
// forced when it has one.
func OwnerOptions(def ViewOptions, u *shedfs.User) ViewOptions {
	opts := def
	if u.Uid != 0 || u.Gid != 0 {
		opts.ForceOwner, opts.Uid, opts.Gid = true, u.Uid, u.Gid
	}
	return opts
}

// RemoveGroup deletes group with its zone and their blobs; its former
// members' views drop it from groups/ at once. It answers the members it
// had.
func (c *Core) RemoveGroup(group string) ([]string, error) {
	g, err := c.store.GetGroup(group)
	if err != nil {
		return nil, fmt.Errorf("group %s: %w", group, err)
	}
	blobs, err := c.store.RemoveGroup(group)
	if err != nil {
		return nil, fmt.Errorf("remove group %s: %w", group, err)
	}
	if len(g.Members) > 0 {
		c.MembershipChanged(g.Members...)
	}
	c.removeBlobs(blobs)
	return g.Members, nil
}

// SetLimit changes the quota of holder h; a limit left nil keeps its
// value. The next admission decides by it (nothing caches a limit).
func (c *Core) SetLimit(h shedfs.Holder, bytes, inodes *int64) (shedfs.Limit, error) {
	lim, err := c.store.GetLimit(h)
	if err != nil {
		return lim, fmt.Errorf("quota of %s: %w", h, err)
	}
	if bytes != nil {
		lim.Bytes = *bytes
	}
	if inodes != nil {
		lim.Inodes = *inodes
	}
	if err := c.store.SetLimit(h, lim); err != nil {
		return lim, fmt.Errorf("set quota of %s: %w", h, err)
	}
	return lim, nil
}

// removeBlobs deletes the contents of removed inodes after their metadata
// is gone: a failure leaves a stray blob, which fsck removes.
func (c *Core) removeBlobs(inos []uint64) {
	for _, ino := range inos {
		if err := c.blobs.Remove(ino); err != nil {
			c.log.Warn("remove blob", "ino", ino, "err", err)
		}
	}
}
