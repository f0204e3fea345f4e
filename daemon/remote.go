package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// Several daemons may serve one store on etcd, and a user or group added
// through any one's admin socket is the others' business too: each follows
// the store's change feed, which hands the views' kernels what changed
// (fusefs.FS.Foreign) and hands the daemon the users and groups another
// daemon changed, so that its set of views follows the users (a view
// mounted for a new user, unmounted for a removed one) and its views'
// groups follow the memberships, without a restart. A user whose uid/gid
// another daemon changed (`user add --uid` writes the user, then its
// owner; a user removed and added again) has its view remounted with the
// new owner, as the daemon that made the change mounts its own; a view in
// use is left as it is and tried again a few seconds later.

// foreign takes a batch of changes another daemon made to the store.
func (d *Daemon) foreign(c metadata.Change) {
	d.fs.Foreign(c)
	if c.All || len(c.Users) > 0 {
		// Mounting waits for the kernel: not on the feed's goroutine.
		go d.syncUsers()
	}
	if c.All || len(c.Groups) > 0 {
		// A group's record holds its members, and who left it is not
		// in the new one: every view reloads its groups.
		for _, v := range d.Views() {
			d.core.MembershipChanged(v.User)
		}
	}
}

// syncUsers makes the managed views those of the stored users: a view for
// each user another daemon added, none for one it removed.
func (d *Daemon) syncUsers() {
	if d.cfg.MountRoot == "" {
		return
	}
	// Stop waits for a reconciliation under way (it may run late: a
	// retry of a remount), and none starts after it: the store closes
	// then.
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	d.wg.Add(1)
	d.mu.Unlock()
	defer d.wg.Done()
	d.usersMu.Lock()
	defer d.usersMu.Unlock()
	users, err := d.cfg.Store.Meta.ListUsers()
	if err != nil {
		d.log.Error("list users changed by another daemon", "err", err)
		return
	}
	d.mu.Lock()
	stopped := d.stopped
	var gone, stale []*view
	var owners []*shedfs.User
	for name, v := range d.views {
		if !v.managed {
			continue
		}
		i := slices.IndexFunc(users, func(u shedfs.User) bool { return u.Name == name })
		switch {
		case i < 0:
			gone = append(gone, v)
		case v.opts != d.viewOptions(&users[i]):
			stale = append(stale, v)
			owners = append(owners, &users[i])
		}
	}
	d.mu.Unlock()
	if stopped {
		return
	}
	for i := range users {
		if d.viewOf(users[i].Name) != "" {
			continue
		}
		if err := d.mountManaged(&users[i]); err != nil {
			d.log.Error("mount the view of a user added by another daemon", "user", users[i].Name, "err", err)
		}
	}
	for _, v := range gone {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := d.unmount(ctx, v, true)
		cancel()
		if err != nil {
			d.log.Error("unmount the view of a user removed by another daemon", "user", v.user, "err", err)
			continue
		}
		if err := os.Remove(v.mountpoint); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("remove mountpoint", "path", v.mountpoint, "err", err)
		}
	}
	for i, v := range stale {
		d.remount(v, owners[i])
	}
}

// remountRetry is how long a view in use waits before its remount for a
// new owner is tried again.
const remountRetry = 5 * time.Second

// remount mounts v again with u's owner, which another daemon changed. A
// view in use is not pulled from under its processes: it keeps the old
// owner, and the remount is tried again after remountRetry.
func (d *Daemon) remount(v *view, u *shedfs.User) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := d.unmount(ctx, v, false)
	cancel()
	if err != nil {
		d.log.Warn("remount the view of a user whose uid/gid another daemon changed: in use; trying again", "user", u.Name, "err", err)
		time.AfterFunc(remountRetry, d.syncUsers)
		return
	}
	if err := d.mountManaged(u); err != nil {
		d.log.Error("remount the view of a user whose uid/gid another daemon changed", "user", u.Name, "err", err)
		return
	}
	d.log.Info("view remounted: its user's uid/gid changed on another daemon", "user", u.Name, "uid", u.Uid, "gid", u.Gid)
}
