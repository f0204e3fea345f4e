package daemon

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/shedfs/shedfs"
)

// TestSettings sets the store's defaults and max file size both ways:
// fields left out keep their value, zero means unlimited, bad values are
// one-line invalid errors, and new users and groups get the defaults while
// existing ones keep their limits.
func TestSettings(t *testing.T) {
	bothAdmins(t, func(t *testing.T, st *Store, a Admin) {
		ctx := context.Background()
		got, err := a.GetSettings(ctx)
		if err != nil || *got != (Settings{}) {
			t.Fatalf("settings of a new store: %+v, %v; want all unlimited", got, err)
		}
		if _, err := a.AddUser(ctx, UserAddRequest{Name: "old"}); err != nil {
			t.Fatal(err)
		}
		got, err = a.SetSettings(ctx, SettingsSetRequest{UserBytes: ptr[int64](10 << 30), UserInodes: ptr[int64](100000), MaxFileSize: ptr[int64](5 << 30)})
		want := Settings{DefaultUserLimit: Amount{Bytes: 10 << 30, Inodes: 100000}, MaxFileSize: 5 << 30}
		if err != nil || *got != want {
			t.Fatalf("set: %+v, %v; want %+v", got, err, want)
		}
		got, err = a.SetSettings(ctx, SettingsSetRequest{GroupInodes: ptr[int64](500), UserInodes: ptr[int64](0)})
		want = Settings{DefaultUserLimit: Amount{Bytes: 10 << 30}, DefaultGroupLimit: Amount{Inodes: 500}, MaxFileSize: 5 << 30}
		if err != nil || *got != want {
			t.Fatalf("second set: %+v, %v; want %+v", got, err, want)
		}
		if again, err := a.GetSettings(ctx); err != nil || *again != want {
			t.Errorf("get after set: %+v, %v; want %+v", again, err, want)
		}
		ms, err := st.Meta.GetSettings()
		if err != nil || ms.MaxFileSize != 5<<30 || ms.DefaultUserLimit != (shedfs.Limit{Bytes: 10 << 30}) {
			t.Errorf("store holds %+v, %v", ms, err)
		}
		u, err := a.AddUser(ctx, UserAddRequest{Name: "new"})
		if err != nil || u.Limit != (Amount{Bytes: 10 << 30}) {
			t.Errorf("new user: %+v, %v; want the default limit", u, err)
		}
		if u, err := a.ShowUser(ctx, "old"); err != nil || u.Limit != (Amount{}) {
			t.Errorf("existing user: %+v, %v; want its limit unchanged", u, err)
		}
		g, err := a.AddGroup(ctx, GroupAddRequest{Name: "team"})
		if err != nil || g.Limit != (Amount{Inodes: 500}) {
			t.Errorf("new group: %+v, %v; want the default limit", g, err)
		}
		for _, req := range []SettingsSetRequest{{}, {MaxFileSize: ptr[int64](-1)}, {GroupBytes: ptr[int64](-5)}} {
			_, err := a.SetSettings(ctx, req)
			if code := codeOf(t, err); code != CodeInvalid {
				t.Errorf("set %+v: %v (code %q), want %q", req, err, code, CodeInvalid)
			}
		}
		if again, err := a.GetSettings(ctx); err != nil || *again != want {
			t.Errorf("a refused set changed the settings: %+v, %v", again, err)
		}
	})
}

// TestSettingsReachViews checks that a change is passed on to the views of
// a running daemon, once per change, and never for a refused one; and that
// the daemon itself is such a listener.
func TestSettingsReachViews(t *testing.T) {
	st := openTestStore(t)
	h := &fakeFrontend{}
	l := localWithFrontend(st, h)
	ctx := context.Background()
	if _, err := l.SetSettings(ctx, SettingsSetRequest{MaxFileSize: ptr[int64](1 << 20)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SetSettings(ctx, SettingsSetRequest{MaxFileSize: ptr[int64](-1)}); err == nil {
		t.Fatal("negative max file size accepted")
	}
	if h.reloads != 1 {
		t.Errorf("views told %d times, want 1", h.reloads)
	}
	d, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if d.local.core != d.core {
		t.Errorf("the daemon's admin operations do not go through its core, which tells its views")
	}
}

// TestSettingsAPIStrict checks the wire: unknown fields and negative
// values are refused with 400, and PUT without a body too.
func TestSettingsAPIStrict(t *testing.T) {
	st := openTestStore(t)
	srv := serveTestAdmin(t, st, NewLocal(st, nil))
	for _, c := range []struct {
		method, body string
		status       int
	}{
		{http.MethodPut, `{"max_file_size": 4096}`, http.StatusOK},
		{http.MethodPut, `{"max_file_sz": 4096}`, http.StatusBadRequest},
		{http.MethodPut, `{"user_bytes": -1}`, http.StatusBadRequest},
		{http.MethodPut, `{}`, http.StatusBadRequest},
		{http.MethodPut, ``, http.StatusBadRequest},
		{http.MethodDelete, ``, http.StatusMethodNotAllowed},
	} {
		status, e := rawRequest(t, srv.Path(), c.method, "/v1/settings", strings.NewReader(c.body))
		if status != c.status {
			t.Errorf("%s /v1/settings %q: status %d (%+v), want %d", c.method, c.body, status, e, c.status)
		}
	}
	got, err := NewLocal(st, nil).GetSettings(context.Background())
	if err != nil || !reflect.DeepEqual(*got, Settings{MaxFileSize: 4096}) {
		t.Errorf("after the requests: %+v, %v", got, err)
	}
}
