package daemon

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shedfs/shedfs"
)

// getProbe GETs path on the metrics server and returns the status and body.
func getProbe(t *testing.T, ms *MetricsServer, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + ms.Addr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestHealthAndReadiness: /healthz answers from the moment the metrics
// address listens; /readyz only once every user's view is mounted and
// until the stop begins, and says why not otherwise.
func TestHealthAndReadiness(t *testing.T) {
	st := openTestStore(t)
	if _, err := st.Meta.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Store: st, MountRoot: filepath.Join(t.TempDir(), "mnt")})
	if err != nil {
		t.Fatal(err)
	}
	useFakeMounts(d)
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	// serve starts the metrics address before it mounts the views.
	ms, err := d.ServeMetrics("127.0.0.1:0", reg, DefaultMaxHolders, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Shutdown(context.Background())
	check := func(when, path string, wantCode int, wantBody string) {
		t.Helper()
		code, body := getProbe(t, ms, path)
		if code != wantCode || !strings.Contains(body, wantBody) {
			t.Errorf("%s: GET %s = %d %q, want %d with %q", when, path, code, body, wantCode, wantBody)
		}
	}
	check("before start", "/healthz", 200, "ok")
	check("before start", "/readyz", 503, "starting")

	ctx := context.Background()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	check("started", "/healthz", 200, "ok")
	check("started", "/readyz", 200, "ready")

	// A user whose view is not mounted (added behind the daemon's back,
	// as another daemon would before this one follows): not ready, and
	// the answer names it.
	if _, err := st.Meta.AddUser("bob"); err != nil {
		t.Fatal(err)
	}
	check("bob unmounted", "/readyz", 503, "views not mounted: bob")
	if err := d.userAdded(ctx, mustUser(t, st, "bob")); err != nil {
		t.Fatal(err)
	}
	check("bob mounted", "/readyz", 200, "ready")

	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	check("stopped", "/healthz", 200, "ok")
	check("stopped", "/readyz", 503, "stopping")
}

func mustUser(t *testing.T, st *Store, name string) *shedfs.User {
	t.Helper()
	u, err := st.Meta.GetUser(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
