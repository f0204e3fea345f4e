package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/shedfs/shedfs/metadata"
)

// Several daemons may serve one store on etcd, and a user or group added
// through any one's admin socket is the others' business too: each follows
// the store's change feed, which hands the views' kernels what changed
// (fusefs.FS.Foreign) and hands the daemon the users and groups another
// daemon changed, so that its set of views follows the users (a view
// mounted for a new user, unmounted for a removed one) and its views'
// groups follow the memberships, without a restart.

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
			d.fs.MembershipChanged(v.User)
		}
	}
}

// syncUsers makes the managed views those of the stored users: a view for
// each user another daemon added, none for one it removed.
func (d *Daemon) syncUsers() {
	if d.cfg.MountRoot == "" {
		return
	}
	d.usersMu.Lock()
	defer d.usersMu.Unlock()
	users, err := d.cfg.Store.Meta.ListUsers()
	if err != nil {
		d.log.Error("list users changed by another daemon", "err", err)
		return
	}
	d.mu.Lock()
	stopped := d.stopped
	var gone []*view
	for name, v := range d.views {
		if v.managed && !hasUser(users, name) {
			gone = append(gone, v)
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
}

// hasUser reports whether users holds name.
func hasUser(users []metadata.User, name string) bool {
	for i := range users {
		if users[i].Name == name {
			return true
		}
	}
	return false
}
