package daemon

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/vfs"
)

// TestDaemonFollowsForeignOwner: a user's uid/gid changed in the store by
// another daemon (as the feed hands it over: syncUsers) remounts the
// user's view with the new owner, and back to the daemon's default when
// it is cleared; a view in use keeps its owner meanwhile.
func TestDaemonFollowsForeignOwner(t *testing.T) {
	st := openTestStore(t)
	if _, err := st.Meta.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "run", "shedfs")
	d, err := New(Config{Store: st, MountRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	fm := useFakeMounts(d)
	ctx := context.Background()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	defer d.Stop(ctx)
	setOwner := func(uid, gid uint32) {
		t.Helper()
		if _, err := st.Meta.UpdateUser("alice", func(u *shedfs.User) error { u.Uid, u.Gid = uid, gid; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	presented := func() vfs.ViewOptions {
		fm.mu.Lock()
		defer fm.mu.Unlock()
		return fm.opts["alice"]
	}

	setOwner(7, 8)
	fm.views["alice"].busy = true
	d.syncUsers()
	if got := presented(); got != (vfs.ViewOptions{}) {
		t.Errorf("a view in use was remounted: %+v", got)
	}
	fm.views["alice"].busy = false
	d.syncUsers()
	if got := presented(); got != (vfs.ViewOptions{ForceOwner: true, Uid: 7, Gid: 8}) {
		t.Errorf("alice's view after another daemon set her owner: %+v, want uid 7 gid 8", got)
	}
	n := len(fm.log())
	d.syncUsers()
	if got := fm.log()[n:]; len(got) != 0 {
		t.Errorf("nothing changed, yet: %v", got)
	}
	setOwner(0, 0)
	d.syncUsers()
	if got := presented(); got != (vfs.ViewOptions{}) {
		t.Errorf("alice's view after her owner was cleared: %+v, want the default", got)
	}
	if got := fm.log(); len(got) != 5 || got[3] != "unmount alice" {
		t.Errorf("mounts: %v, want mount, unmount+mount twice", got)
	}
}
