package daemon

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/vfs"
)

func u32(n uint32) *uint32 { return &n }
func i64(n int64) *int64   { return &n }

// TestSetUser: user set through the admin socket changes the stored owner
// and quota; the daemon tells its views the new presentation through the
// core (no remount), the daemon's default when the owner is dropped; bad
// requests are refused with clear codes.
func TestSetUser(t *testing.T) {
	st := openTestStore(t)
	if _, err := st.Meta.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	def := vfs.ViewOptions{ForceOwner: true, Uid: 1, Gid: 2}
	d, err := New(Config{Store: st, MountRoot: filepath.Join(t.TempDir(), "mnt"), DefaultView: def})
	if err != nil {
		t.Fatal(err)
	}
	fm := useFakeMounts(d)
	ctx := context.Background()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(ctx)
	h := &fakeFrontend{}
	d.Core().Attach(h)
	c := dialTest(t, st)

	u, err := c.SetUser(ctx, "alice", UserSetRequest{Uid: u32(1000), Gid: u32(1001), Bytes: i64(1 << 30)})
	if err != nil {
		t.Fatal(err)
	}
	if u.Uid != 1000 || u.Gid != 1001 || u.Limit.Bytes != 1<<30 || u.View == "" {
		t.Errorf("after set: %+v", u)
	}
	want := vfs.ViewOptions{ForceOwner: true, Uid: 1000, Gid: 1001}
	if len(h.owners) != 1 || h.owners[0] != "alice" || h.ownerOpts[0] != want {
		t.Errorf("views told %v %v, want alice %+v", h.owners, h.ownerOpts, want)
	}
	if got := fm.log(); len(got) != 1 {
		t.Errorf("mount events %q: the view was remounted", got)
	}
	d.mu.Lock()
	if got := d.views["alice"].opts; got != want {
		t.Errorf("the daemon keeps %+v as the view's presentation, want %+v", got, want)
	}
	d.mu.Unlock()
	stored, _ := st.Meta.GetUser("alice")
	if stored.Uid != 1000 || stored.Gid != 1001 {
		t.Errorf("stored owner %d:%d", stored.Uid, stored.Gid)
	}

	// Only the quota: the views hear nothing.
	if _, err := c.SetUser(ctx, "alice", UserSetRequest{Inodes: i64(500)}); err != nil {
		t.Fatal(err)
	}
	if len(h.owners) != 1 {
		t.Errorf("a quota change told the views of an owner change")
	}
	if lim, _ := st.Meta.GetLimit(shedfs.UserHolder("alice")); lim.Bytes != 1<<30 || lim.Inodes != 500 {
		t.Errorf("limit %+v, want 1 GiB kept and 500 inodes", lim)
	}

	// 0:0 drops the user's own owner: the daemon's default again.
	if _, err := c.SetUser(ctx, "alice", UserSetRequest{Uid: u32(0), Gid: u32(0)}); err != nil {
		t.Fatal(err)
	}
	if len(h.ownerOpts) != 2 || h.ownerOpts[1] != def {
		t.Errorf("views told %v, want the default %+v last", h.ownerOpts, def)
	}

	for _, tc := range []struct {
		name string
		req  UserSetRequest
		code string
	}{
		{"bob", UserSetRequest{Uid: u32(1), Gid: u32(1)}, CodeNotFound},
		{"alice", UserSetRequest{Uid: u32(1)}, CodeInvalid},
		{"alice", UserSetRequest{}, CodeInvalid},
		{"alice", UserSetRequest{Bytes: i64(-1)}, CodeInvalid},
	} {
		_, err := c.SetUser(ctx, tc.name, tc.req)
		if got := codeOf(t, err); got != tc.code {
			t.Errorf("set %s %+v: %v (%s), want %s", tc.name, tc.req, err, got, tc.code)
		}
	}
}
