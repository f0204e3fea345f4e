package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// openTestStore opens a fresh store in a temporary directory, closed at
// the end of the test.
func openTestStore(t testing.TB) *Store {
	t.Helper()
	st, err := OpenStore(filepath.Join(t.TempDir(), "store"), OpenOptions{Create: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// serveTestAdmin serves admin on the store's admin socket until the end
// of the test.
func serveTestAdmin(t testing.TB, st *Store, admin Admin) *Server {
	t.Helper()
	srv, err := Listen(SocketPath(st.Dir), admin, nil)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv
}

// dialTest connects a client to the store's daemon.
func dialTest(t testing.TB, st *Store) *Client {
	t.Helper()
	c, err := Dial(st.Dir)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// putFile stores a file of size bytes in zone root dir, as a view would.
func putFile(t testing.TB, st *Store, dir uint64, name string, size uint64) {
	t.Helper()
	n, err := st.Meta.Create(dir, name, &shedfs.Inode{Mode: syscall.S_IFREG | 0o644}, nil)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if _, err := st.Meta.Update(n.Ino, func(n *shedfs.Inode) error { n.Size = size; return nil }, nil); err != nil {
		t.Fatalf("resize %s: %v", name, err)
	}
}

// codeOf is the admin error code of err, "" for nil.
func codeOf(t testing.TB, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if strings.Contains(e.Message, "\n") {
		t.Errorf("error message has more than one line: %q", e.Message)
	}
	return e.Code
}

func TestAdminAPIOverSocket(t *testing.T) {
	st := openTestStore(t)
	srv := serveTestAdmin(t, st, NewLocal(st, nil))
	if fi, err := os.Stat(srv.Path()); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("admin socket: %v, mode %v; want a socket with mode 0600", err, fi.Mode())
	}
	c := dialTest(t, st)
	ctx := context.Background()

	uid, gid := uint32(1000), uint32(1001)
	u, err := c.AddUser(ctx, UserAddRequest{Name: "alice", Uid: &uid, Gid: &gid, Quota: Amount{Bytes: 10 << 30, Inodes: 100}})
	if err != nil {
		t.Fatalf("add alice: %v", err)
	}
	if u.Name != "alice" || u.Uid != 1000 || u.Gid != 1001 || u.Limit != (Amount{10 << 30, 100}) || u.Used.Inodes != 3 {
		t.Errorf("added user: %+v", u)
	}
	if _, err := c.AddUser(ctx, UserAddRequest{Name: "alice"}); codeOf(t, err) != CodeExists {
		t.Errorf("add alice twice: %v, want code exists", err)
	}
	for _, bad := range []string{"Alice", "", "-x", "a/b", "..", strings.Repeat("a", 65), "al ice"} {
		if _, err := c.AddUser(ctx, UserAddRequest{Name: bad}); codeOf(t, err) != CodeInvalid {
			t.Errorf("add user %q: %v, want code invalid", bad, err)
		}
	}
	if _, err := c.ShowUser(ctx, "nobody"); codeOf(t, err) != CodeNotFound {
		t.Errorf("show nobody: %v, want not_found", err)
	}
	if _, err := c.AddUser(ctx, UserAddRequest{Name: "bob"}); err != nil {
		t.Fatal(err)
	}
	users, err := c.ListUsers(ctx)
	if err != nil || len(users) != 2 || users[0].Name != "alice" || users[1].Name != "bob" {
		t.Fatalf("list users: %+v, %v", users, err)
	}

	if _, err := c.AddGroup(ctx, GroupAddRequest{Name: "team-alpha"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddMember(ctx, "team-alpha", MemberRequest{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	g, err := c.AddMember(ctx, "team-alpha", MemberRequest{User: "bob"})
	if err != nil || !reflect.DeepEqual(g.Members, []string{"alice", "bob"}) {
		t.Fatalf("add bob to team-alpha: %+v, %v", g, err)
	}
	if _, err := c.AddMember(ctx, "team-alpha", MemberRequest{User: "carol"}); codeOf(t, err) != CodeNotFound {
		t.Errorf("add unknown member: %v, want not_found", err)
	}
	if _, err := c.AddMember(ctx, "nope", MemberRequest{User: "bob"}); codeOf(t, err) != CodeNotFound {
		t.Errorf("add member to unknown group: %v, want not_found", err)
	}
	if u, err := c.ShowUser(ctx, "alice"); err != nil || !reflect.DeepEqual(u.Groups, []string{"team-alpha"}) {
		t.Errorf("show alice: %+v, %v", u, err)
	}
	if g, err := c.RemoveMember(ctx, "team-alpha", "bob"); err != nil || !reflect.DeepEqual(g.Members, []string{"alice"}) {
		t.Errorf("remove bob from team-alpha: %+v, %v", g, err)
	}
	if _, err := c.RemoveMember(ctx, "team-alpha", "bob"); codeOf(t, err) != CodeNotFound {
		t.Errorf("remove a non-member: %v, want not_found", err)
	}

	b := int64(5 << 20)
	q, err := c.SetQuota(ctx, "group:team-alpha", QuotaSetRequest{Bytes: &b})
	if err != nil || q.Limit != (Amount{Bytes: 5 << 20}) {
		t.Fatalf("set group quota: %+v, %v", q, err)
	}
	n := int64(7)
	if q, err = c.SetQuota(ctx, "group:team-alpha", QuotaSetRequest{Inodes: &n}); err != nil || q.Limit != (Amount{5 << 20, 7}) {
		t.Errorf("set inodes keeps bytes: %+v, %v", q, err)
	}
	if _, err := c.SetQuota(ctx, "share", QuotaSetRequest{Bytes: &b}); err != nil {
		t.Errorf("set share quota: %v", err)
	}
	for holder, code := range map[string]string{
		"user:nobody": CodeNotFound, "group:nope": CodeNotFound, "alice": CodeInvalid,
		"user:Alice": CodeInvalid, "disk:x": CodeInvalid, "": CodeInvalid,
	} {
		if _, err := c.SetQuota(ctx, holder, QuotaSetRequest{Bytes: &b}); codeOf(t, err) != code {
			t.Errorf("set quota of %q: %v, want %s", holder, err, code)
		}
	}
	neg := int64(-1)
	if _, err := c.SetQuota(ctx, "share", QuotaSetRequest{Bytes: &neg}); codeOf(t, err) != CodeInvalid {
		t.Errorf("negative quota: %v, want invalid", err)
	}
	if _, err := c.SetQuota(ctx, "share", QuotaSetRequest{}); codeOf(t, err) != CodeInvalid {
		t.Errorf("empty quota request: %v, want invalid", err)
	}
	qs, err := c.ShowQuota(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var holders []string
	for _, q := range qs {
		holders = append(holders, q.Holder)
	}
	if want := []string{"group:team-alpha", "share", "user:alice", "user:bob"}; !reflect.DeepEqual(holders, want) {
		t.Errorf("quota holders %v, want %v", holders, want)
	}

	// Removing a user with data needs force, and says how much goes.
	bobU, _ := st.Meta.GetUser("bob")
	putFile(t, st, bobU.Roots.Private, "notes", 5000)
	_, err = c.RemoveUser(ctx, "bob", false)
	if codeOf(t, err) != CodeHasData || !strings.Contains(err.Error(), "1 file or directory (8 KiB)") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("remove bob without force: %v, want has_data naming 1 file and 8 KiB", err)
	}
	r, err := c.RemoveUser(ctx, "bob", true)
	if err != nil || *r != (RemoveResult{Name: "bob", Entries: 1, Bytes: 8192}) {
		t.Errorf("remove bob with force: %+v, %v", r, err)
	}
	if _, err := c.ShowUser(ctx, "bob"); codeOf(t, err) != CodeNotFound {
		t.Errorf("bob after removal: %v", err)
	}
	if _, err := c.RemoveUser(ctx, "bob", true); codeOf(t, err) != CodeNotFound {
		t.Errorf("remove bob twice: %v", err)
	}
	// An empty user goes without force.
	if _, err := c.RemoveUser(ctx, "alice", false); err != nil {
		t.Errorf("remove empty alice: %v", err)
	}
	g2, _ := st.Meta.GetGroup("team-alpha")
	putFile(t, st, g2.Root, "plan", 10)
	if _, err := c.RemoveGroup(ctx, "team-alpha", false); codeOf(t, err) != CodeHasData {
		t.Errorf("remove group with data: %v, want has_data", err)
	}
	if r, err := c.RemoveGroup(ctx, "team-alpha", true); err != nil || r.Entries != 1 {
		t.Errorf("remove group with force: %+v, %v", r, err)
	}

	s, err := c.Status(ctx)
	if err != nil || s.Daemon || s.Store != st.Dir || s.Users != 0 || s.Groups != 0 || s.LastCheck != nil {
		t.Errorf("status: %+v, %v", s, err)
	}
	if _, err := st.Meta.Check(st.Blobs, false, nil); err != nil {
		t.Fatal(err)
	}
	if s, err := c.Status(ctx); err != nil || s.LastCheck == nil {
		t.Errorf("status after fsck: %+v, %v", s, err)
	}
}

// rawRequest sends a hand-made HTTP request over the admin socket.
func rawRequest(t *testing.T, path, method, url string, body io.Reader) (int, Error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://shedfs"+url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e Error
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		if err := json.Unmarshal(data, &e); err != nil || e.Message == "" || e.Code == "" {
			t.Errorf("%s %s: error body %q is not {error, code}", method, url, data)
		}
	}
	return resp.StatusCode, e
}

func TestAdminAPIStrictRequests(t *testing.T) {
	st := openTestStore(t)
	srv := serveTestAdmin(t, st, NewLocal(st, nil))
	for _, tc := range []struct {
		method, url, body string
		status            int
		code              string
	}{
		{"POST", "/v1/users", `{"name":"alice"}`, 201, ""},
		{"POST", "/v1/users", `{"name":"bob","admin":true}`, 400, CodeInvalid},
		{"POST", "/v1/users", `{"name":"bob"} {"name":"carol"}`, 400, CodeInvalid},
		{"POST", "/v1/users", `{"name":`, 400, CodeInvalid},
		{"POST", "/v1/users", ``, 400, CodeInvalid},
		{"POST", "/v1/users", `{"name":"bob","uid":5}`, 400, CodeInvalid},
		{"POST", "/v1/users", `{"name":"bob","quota":{"bytes":-1}}`, 400, CodeInvalid},
		{"POST", "/v1/users", `["bob"]`, 400, CodeInvalid},
		{"POST", "/v1/users", `{"name":"` + strings.Repeat("a", 2<<20) + `"}`, 413, CodeTooLarge},
		{"POST", "/v1/users", `{"name":"alice"}`, 409, CodeExists},
		{"GET", "/v1/users/nobody", ``, 404, CodeNotFound},
		{"GET", "/v1/users/Bad%2FName", ``, 400, CodeInvalid},
		{"DELETE", "/v1/users/alice?force=maybe", ``, 400, CodeInvalid},
		{"PATCH", "/v1/users", ``, 405, CodeMethod},
		{"PUT", "/v1/status", ``, 405, CodeMethod},
		{"GET", "/v2/everything", ``, 404, CodeNotFound},
		{"PUT", "/v1/quotas/user:alice", `{"bytes":1,"inodes":2}`, 200, ""},
		{"PUT", "/v1/quotas/user:alice", `{"bytes":"1G"}`, 400, CodeInvalid},
		{"PUT", "/v1/quotas/user:alice", `{"blocks":1}`, 400, CodeInvalid},
		{"GET", "/v1/quotas/user:alice", ``, 200, ""},
		{"GET", "/v1/status", ``, 200, ""},
		{"DELETE", "/v1/users/alice?force=true", ``, 200, ""},
	} {
		status, e := rawRequest(t, srv.Path(), tc.method, tc.url, strings.NewReader(tc.body))
		if status != tc.status || e.Code != tc.code {
			t.Errorf("%s %s %.40q: %d %q (%s), want %d %q", tc.method, tc.url, tc.body, status, e.Code, e.Message, tc.status, tc.code)
		}
	}
}

func TestPeerCredentials(t *testing.T) {
	st := openTestStore(t)
	srv := serveTestAdmin(t, st, NewLocal(st, nil))

	// Our own uid (root or not) is allowed: the daemon's own uid is.
	c := dialTest(t, st)
	if _, err := c.ListUsers(context.Background()); err != nil {
		t.Fatalf("own uid refused: %v", err)
	}
	// peerOf tells who is at the other end.
	conn, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("unix", ln.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	pc := peerOf(accepted)
	if pc.err != nil || pc.ucred == nil || pc.ucred.Uid != uint32(os.Getuid()) || pc.ucred.Pid != int32(os.Getpid()) {
		t.Errorf("peerOf: %+v, want uid %d pid %d", pc, os.Getuid(), os.Getpid())
	}
	if pc := peerOf(nil); pc.err == nil {
		t.Errorf("peerOf(non-unix conn) gave no error")
	}
	// A peer that is not allowed gets 403 with a JSON error.
	srv.allowed = func(uint32) bool { return false }
	_, err = NewClient(srv.Path()).ListUsers(context.Background())
	if codeOf(t, err) != CodeForbidden {
		t.Errorf("refused peer: %v, want forbidden", err)
	}
	if status, _ := rawRequest(t, srv.Path(), "GET", "/v1/users", nil); status != http.StatusForbidden {
		t.Errorf("refused peer: status %d, want 403", status)
	}
}

func TestDialWithoutDaemon(t *testing.T) {
	dir := t.TempDir()
	if _, err := Dial(dir); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("dial without socket: %v, want ErrNoDaemon", err)
	}
	// A socket file nobody listens on, as a killed daemon leaves it.
	ln, err := net.Listen("unix", SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(SocketPath(dir)); err != nil {
		t.Fatalf("stale socket file gone: %v", err)
	}
	if _, err := Dial(dir); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("dial of a stale socket: %v, want ErrNoDaemon", err)
	}
	// A new daemon replaces the stale socket.
	st, err := OpenStore(dir, OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	serveTestAdmin(t, st, NewLocal(st, nil))
	if _, err := dialTest(t, st).Status(context.Background()); err != nil {
		t.Errorf("status after replacing a stale socket: %v", err)
	}
	// A second server on a live socket is refused.
	if _, err := Listen(SocketPath(dir), NewLocal(st, nil), nil); err == nil {
		t.Errorf("second Listen on a live socket succeeded")
	}
}

// scriptStep is one admin operation of TestBothWaysIdentical.
type scriptStep struct {
	name string
	run  func(ctx context.Context, a Admin) (any, error)
}

// adminScript exercises every operation, successes and failures alike.
// setup puts data into the store between steps, as a view would.
func adminScript(setup func(a Admin, step string)) []scriptStep {
	i64 := func(v int64) *int64 { return &v }
	u32 := func(v uint32) *uint32 { return &v }
	return []scriptStep{
		{"add alice", func(ctx context.Context, a Admin) (any, error) {
			return a.AddUser(ctx, UserAddRequest{Name: "alice", Quota: Amount{Bytes: 1 << 30}})
		}},
		{"add bob", func(ctx context.Context, a Admin) (any, error) {
			return a.AddUser(ctx, UserAddRequest{Name: "bob", Uid: u32(1000), Gid: u32(1000)})
		}},
		{"add carol", func(ctx context.Context, a Admin) (any, error) { return a.AddUser(ctx, UserAddRequest{Name: "carol"}) }},
		{"add alice again", func(ctx context.Context, a Admin) (any, error) { return a.AddUser(ctx, UserAddRequest{Name: "alice"}) }},
		{"add bad name", func(ctx context.Context, a Admin) (any, error) { return a.AddUser(ctx, UserAddRequest{Name: "Root!"}) }},
		{"add uid only", func(ctx context.Context, a Admin) (any, error) {
			return a.AddUser(ctx, UserAddRequest{Name: "dave", Uid: u32(1)})
		}},
		{"add group", func(ctx context.Context, a Admin) (any, error) {
			return a.AddGroup(ctx, GroupAddRequest{Name: "team-alpha"})
		}},
		{"add group again", func(ctx context.Context, a Admin) (any, error) {
			return a.AddGroup(ctx, GroupAddRequest{Name: "team-alpha"})
		}},
		{"add member alice", func(ctx context.Context, a Admin) (any, error) {
			return a.AddMember(ctx, "team-alpha", MemberRequest{User: "alice"})
		}},
		{"add member bob", func(ctx context.Context, a Admin) (any, error) {
			return a.AddMember(ctx, "team-alpha", MemberRequest{User: "bob"})
		}},
		{"add member twice", func(ctx context.Context, a Admin) (any, error) {
			return a.AddMember(ctx, "team-alpha", MemberRequest{User: "bob"})
		}},
		{"add unknown member", func(ctx context.Context, a Admin) (any, error) {
			return a.AddMember(ctx, "team-alpha", MemberRequest{User: "zed"})
		}},
		{"remove member", func(ctx context.Context, a Admin) (any, error) { return a.RemoveMember(ctx, "team-alpha", "bob") }},
		{"remove non-member", func(ctx context.Context, a Admin) (any, error) {
			return a.RemoveMember(ctx, "team-alpha", "carol")
		}},
		{"show group", func(ctx context.Context, a Admin) (any, error) { return a.ShowGroup(ctx, "team-alpha") }},
		{"show unknown group", func(ctx context.Context, a Admin) (any, error) { return a.ShowGroup(ctx, "nope") }},
		{"list groups", func(ctx context.Context, a Admin) (any, error) { return a.ListGroups(ctx) }},
		{"set quota", func(ctx context.Context, a Admin) (any, error) {
			return a.SetQuota(ctx, "user:carol", QuotaSetRequest{Bytes: i64(10 << 30), Inodes: i64(1000)})
		}},
		{"set share quota", func(ctx context.Context, a Admin) (any, error) {
			return a.SetQuota(ctx, "share", QuotaSetRequest{Inodes: i64(5)})
		}},
		{"set bad holder", func(ctx context.Context, a Admin) (any, error) {
			return a.SetQuota(ctx, "everyone", QuotaSetRequest{Inodes: i64(5)})
		}},
		{"set unknown holder", func(ctx context.Context, a Admin) (any, error) {
			return a.SetQuota(ctx, "group:nope", QuotaSetRequest{Inodes: i64(5)})
		}},
		{"set negative", func(ctx context.Context, a Admin) (any, error) {
			return a.SetQuota(ctx, "share", QuotaSetRequest{Bytes: i64(-5)})
		}},
		{"show quota", func(ctx context.Context, a Admin) (any, error) { return a.ShowQuota(ctx, "") }},
		{"show one quota", func(ctx context.Context, a Admin) (any, error) { return a.ShowQuota(ctx, "user:alice") }},
		{"data", func(ctx context.Context, a Admin) (any, error) { setup(a, "data"); return nil, nil }},
		{"list users", func(ctx context.Context, a Admin) (any, error) { return a.ListUsers(ctx) }},
		{"show user", func(ctx context.Context, a Admin) (any, error) { return a.ShowUser(ctx, "bob") }},
		{"remove user with data", func(ctx context.Context, a Admin) (any, error) { return a.RemoveUser(ctx, "bob", false) }},
		{"remove user forced", func(ctx context.Context, a Admin) (any, error) { return a.RemoveUser(ctx, "bob", true) }},
		{"remove unknown user", func(ctx context.Context, a Admin) (any, error) { return a.RemoveUser(ctx, "bob", true) }},
		{"remove bad name", func(ctx context.Context, a Admin) (any, error) { return a.RemoveUser(ctx, "../etc", true) }},
		{"remove group with data", func(ctx context.Context, a Admin) (any, error) {
			return a.RemoveGroup(ctx, "team-alpha", false)
		}},
		{"remove group forced", func(ctx context.Context, a Admin) (any, error) { return a.RemoveGroup(ctx, "team-alpha", true) }},
		{"remove empty user", func(ctx context.Context, a Admin) (any, error) { return a.RemoveUser(ctx, "carol", false) }},
		{"final users", func(ctx context.Context, a Admin) (any, error) { return a.ListUsers(ctx) }},
		{"final quota", func(ctx context.Context, a Admin) (any, error) { return a.ShowQuota(ctx, "") }},
	}
}

// record renders a step's outcome for comparison: the JSON of the result
// with creation times blanked, or the error's code and message.
func record(v any, err error) string {
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return fmt.Sprintf("error %s: %s", e.Code, e.Message)
		}
		return fmt.Sprintf("error %T: %v", err, err)
	}
	b, _ := json.Marshal(v)
	var generic any
	json.Unmarshal(b, &generic)
	blankCreated(generic)
	b, _ = json.Marshal(generic)
	return string(b)
}

func blankCreated(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "created" {
				x[k] = "T"
			} else {
				blankCreated(e)
			}
		}
	case []any:
		for _, e := range x {
			blankCreated(e)
		}
	}
}

// TestBothWaysIdentical runs the same operations through a daemon's admin
// socket and directly on a store, on two fresh stores, and compares every
// result and error.
func TestBothWaysIdentical(t *testing.T) {
	ctx := context.Background()
	viaSocket := openTestStore(t)
	serveTestAdmin(t, viaSocket, NewLocal(viaSocket, nil))
	direct := openTestStore(t)
	ways := []struct {
		name  string
		st    *Store
		admin Admin
	}{
		{"socket", viaSocket, dialTest(t, viaSocket)},
		{"direct", direct, NewLocal(direct, nil)},
	}
	results := make([][]string, len(ways))
	for i, w := range ways {
		setup := func(a Admin, step string) {
			bob, _ := w.st.Meta.GetUser("bob")
			putFile(t, w.st, bob.Roots.Private, "a", 100)
			putFile(t, w.st, bob.Roots.Output, "b", 10000)
			g, _ := w.st.Meta.GetGroup("team-alpha")
			putFile(t, w.st, g.Root, "c", 1)
		}
		for _, step := range adminScript(setup) {
			v, err := step.run(ctx, w.admin)
			results[i] = append(results[i], step.name+" -> "+record(v, err))
		}
	}
	for j := range results[0] {
		if results[0][j] != results[1][j] {
			t.Errorf("%s differs:\n  %s: %s\n  %s: %s", strings.Split(results[0][j], " -> ")[0],
				ways[0].name, results[0][j], ways[1].name, results[1][j])
		}
	}
	if testing.Verbose() {
		for _, r := range results[0] {
			t.Log(r)
		}
	}
	// The status differs only where it should: who answered.
	s0, err0 := ways[0].admin.Status(ctx)
	s1, err1 := ways[1].admin.Status(ctx)
	if err0 != nil || err1 != nil || s0.Users != s1.Users || s0.Groups != s1.Groups {
		t.Errorf("status: %+v %v / %+v %v", s0, err0, s1, err1)
	}
}

// FuzzAdminAPIUserAdd feeds arbitrary bodies to the user-add endpoint: the
// answer is always a well-formed JSON response, never a panic or an
// internal error, and nothing is created from a body that was refused.
func FuzzAdminAPIUserAdd(f *testing.F) {
	for _, seed := range []string{
		`{"name":"alice"}`,
		`{"name":"bob","uid":1000,"gid":1000,"quota":{"bytes":1073741824,"inodes":100}}`,
		`{"name":"x","extra":1}`,
		`{"name":"Bad Name"}`,
		`{"name":"a","uid":-1,"gid":2}`,
		`{"name":"a","quota":{"bytes":1e30}}`,
		`{}`, `null`, `[]`, `"alice"`, ``, `{"name":"a"}{}`,
		"{\"name\":\"a\x00b\"}", `{"name":"` + strings.Repeat("z", 70) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	st := openTestStore(f)
	h := newHandler(NewLocal(st, nil), nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := &recorder{header: http.Header{}}
		req, _ := http.NewRequest("POST", "/v1/users", bytes.NewReader(body))
		h.ServeHTTP(rec, req)
		checkResponse(t, rec, body)
		if rec.status == http.StatusCreated {
			var u UserInfo
			if err := json.Unmarshal(rec.body.Bytes(), &u); err != nil || metadata.ValidPrincipal(u.Name) != nil {
				t.Fatalf("created %q from %q", rec.body.String(), body)
			}
			if _, err := st.Meta.RemoveUser(u.Name); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzAdminAPIQuotaSet does the same for quota set, with the holder from
// the path fuzzed too.
func FuzzAdminAPIQuotaSet(f *testing.F) {
	for _, seed := range []struct{ holder, body string }{
		{"share", `{"bytes":1024}`},
		{"user:alice", `{"bytes":1024,"inodes":10}`},
		{"group:team", `{"inodes":0}`},
		{"user:alice", `{"bytes":-1}`},
		{"user:", `{}`},
		{"x", `{"bytes":1,"more":2}`},
		{"share", `{"bytes":9223372036854775808}`},
	} {
		f.Add(seed.holder, []byte(seed.body))
	}
	st := openTestStore(f)
	if _, err := st.Meta.AddUser("alice"); err != nil {
		f.Fatal(err)
	}
	h := newHandler(NewLocal(st, nil), nil)
	f.Fuzz(func(t *testing.T, holder string, body []byte) {
		rec := &recorder{header: http.Header{}}
		req, err := http.NewRequest("PUT", "/v1/quotas/x", bytes.NewReader(body))
		if err != nil {
			return
		}
		req.SetPathValue("holder", holder)
		req.URL.Path = "/v1/quotas/" + holder
		req.URL.RawPath = ""
		h.ServeHTTP(rec, req)
		checkResponse(t, rec, body)
	})
}

// recorder is a minimal http.ResponseWriter (httptest would do, but this
// keeps the fuzz loop allocation-light and explicit).
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func checkResponse(t *testing.T, rec *recorder, body []byte) {
	t.Helper()
	if rec.status >= 500 {
		t.Fatalf("body %q: status %d: %s", body, rec.status, rec.body.String())
	}
	if ct := rec.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("body %q: content type %q", body, ct)
	}
	if !json.Valid(rec.body.Bytes()) {
		t.Fatalf("body %q: answer is not JSON: %q", body, rec.body.String())
	}
	if rec.status/100 != 2 {
		var e Error
		if err := json.Unmarshal(rec.body.Bytes(), &e); err != nil || e.Code == "" || e.Message == "" || strings.Contains(e.Message, "\n") {
			t.Fatalf("body %q: error answer %q is not {error, code} on one line", body, rec.body.String())
		}
	}
}

// TestDialBusyDaemon: a daemon whose accept queue is full for a moment
// (a loaded machine) refuses nothing: its socket answers EAGAIN, and the
// dial tries again until the daemon takes the connection, instead of
// failing or taking the socket for a dead daemon's (after which a command
// would open the store the daemon holds). Nor does a new server take
// that socket over.
func TestDialBusyDaemon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	// A backlog of 0 holds one connection not yet accepted.
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	first, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("first connection: %v", err)
	}
	defer first.Close()
	if c, err := net.Dial("unix", path); !errors.Is(err, syscall.EAGAIN) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a connection to a full accept queue: %v, want EAGAIN", err)
	}
	const busy = 300 * time.Millisecond
	go func() {
		time.Sleep(busy)
		for {
			nfd, _, err := syscall.Accept(fd)
			if err != nil {
				return // closed at the end of the test
			}
			syscall.Close(nfd)
		}
	}()
	st := openTestStore(t)
	listened := make(chan error, 1)
	go func() {
		srv, err := Listen(path, NewLocal(st, nil), nil)
		if err == nil {
			srv.Shutdown(context.Background())
		}
		listened <- err
	}()
	start := time.Now()
	cl, err := DialSocket(path)
	if err != nil {
		t.Fatalf("dial of a daemon busy for %v: %v, want a client", busy, err)
	}
	cl.Close()
	if took := time.Since(start); took < busy/2 {
		t.Errorf("dial answered in %v, before the daemon accepted anything", took)
	}
	if err := <-listened; err == nil || !strings.Contains(err.Error(), "another daemon is answering") {
		t.Errorf("Listen on a busy daemon's socket: %v, want it left to that daemon", err)
	}
}
