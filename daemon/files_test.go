package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/vfs"
)

// bothAdmins runs fn once on a Local of a fresh store and once on a
// Client of a daemon serving another fresh store, so that imports and
// mode changes are known to behave the same both ways.
func bothAdmins(t *testing.T, fn func(t *testing.T, st *Store, a Admin)) {
	t.Run("local", func(t *testing.T) {
		st := openTestStore(t)
		fn(t, st, NewLocal(st, nil))
	})
	t.Run("client", func(t *testing.T) {
		st := openTestStore(t)
		serveTestAdmin(t, st, NewLocal(st, nil))
		fn(t, st, dialTest(t, st))
	})
}

// blobContent reads the content of a stored inode.
func blobContent(t *testing.T, st *Store, ino uint64) string {
	t.Helper()
	data, err := os.ReadFile(st.Blobs.Path(ino))
	if err != nil {
		t.Fatalf("read blob %d: %v", ino, err)
	}
	return string(data)
}

// checkClean fails the test unless fsck finds nothing to repair.
func checkClean(t *testing.T, st *Store) {
	t.Helper()
	rep, err := st.Meta.Check(st.Blobs, false, nil)
	if err != nil {
		t.Fatalf("fsck: %v", err)
	}
	for _, p := range rep.Problems {
		t.Errorf("fsck: %s ino %d: %s", p.Kind, p.Ino, p.Detail)
	}
}

func importString(ctx context.Context, a Admin, req ImportRequest, s string) (*ImportResult, error) {
	return a.Import(ctx, req, strings.NewReader(s), int64(len(s)))
}

func TestImport(t *testing.T) {
	bothAdmins(t, func(t *testing.T, st *Store, a Admin) {
		ctx := context.Background()
		uid, gid := uint32(1000), uint32(1001)
		if _, err := a.AddUser(ctx, UserAddRequest{Name: "alice", Uid: &uid, Gid: &gid}); err != nil {
			t.Fatal(err)
		}
		u, _ := st.Meta.GetUser("alice")

		res, err := importString(ctx, a, ImportRequest{User: "alice", Name: "report.txt"}, "first")
		if err != nil {
			t.Fatalf("import: %v", err)
		}
		if res.Path != "uploads/report.txt" || res.Size != 5 || res.Replaced {
			t.Errorf("import result %+v", res)
		}
		n, err := st.Meta.Lookup(u.Roots.Uploads, "report.txt")
		if err != nil {
			t.Fatalf("imported file not in uploads/: %v", err)
		}
		if n.Size != 5 || n.Owner != "alice" || n.Zone.Kind != shedfs.ZoneUploads ||
			n.Mode != syscall.S_IFREG|0o644 || n.Uid != uid || n.Gid != gid {
			t.Errorf("imported inode %+v", n)
		}
		if got := blobContent(t, st, n.Ino); got != "first" {
			t.Errorf("content %q", got)
		}

		_, err = importString(ctx, a, ImportRequest{User: "alice", Name: "report.txt"}, "second")
		if codeOf(t, err) != CodeExists || !strings.Contains(err.Error(), "--replace") {
			t.Errorf("import over an existing name: %v, want %s mentioning --replace", err, CodeExists)
		}
		res, err = importString(ctx, a, ImportRequest{User: "alice", Name: "report.txt", Replace: true}, "second, longer")
		if err != nil || !res.Replaced {
			t.Fatalf("import --replace: %+v, %v", res, err)
		}
		n2, _ := st.Meta.Lookup(u.Roots.Uploads, "report.txt")
		if got := blobContent(t, st, n2.Ino); got != "second, longer" {
			t.Errorf("content after replace %q", got)
		}
		if _, err := os.Stat(st.Blobs.Path(n.Ino)); err == nil {
			t.Errorf("blob of the replaced file %d is still there", n.Ino)
		}
		entries, _ := st.Meta.ReadDir(u.Roots.Uploads)
		if len(entries) != 1 {
			t.Errorf("uploads/ holds %v, want only report.txt (no temporary name left)", entries)
		}

		// Sessions: created on first use, reused after.
		for _, name := range []string{"a.csv", "b.csv"} {
			res, err := importString(ctx, a, ImportRequest{User: "alice", Session: "run-1", Name: name}, name)
			if err != nil || res.Path != "uploads/run-1/"+name {
				t.Fatalf("import into a session: %+v, %v", res, err)
			}
		}
		sess, err := st.Meta.Lookup(u.Roots.Uploads, "run-1")
		if err != nil || !sess.IsDir() || sess.Zone.Kind != shedfs.ZoneUploads || sess.Owner != "alice" {
			t.Fatalf("session directory %+v, %v", sess, err)
		}
		_, err = importString(ctx, a, ImportRequest{User: "alice", Session: "report.txt", Name: "x"}, "x")
		if codeOf(t, err) != CodeExists {
			t.Errorf("session named like a file: %v", err)
		}

		// Empty content and content of unknown length.
		if res, err := a.Import(ctx, ImportRequest{User: "alice", Name: "empty"}, strings.NewReader(""), 0); err != nil || res.Size != 0 {
			t.Errorf("empty import: %+v, %v", res, err)
		}
		if res, err := a.Import(ctx, ImportRequest{User: "alice", Name: "stream"}, io.LimitReader(zeros{}, 3<<20), -1); err != nil || res.Size != 3<<20 {
			t.Errorf("import of unknown length: %+v, %v", res, err)
		}

		// Bad requests, each one line with the right code.
		long := strings.Repeat("n", 256)
		for _, c := range []struct {
			req  ImportRequest
			code string
			want string
		}{
			{ImportRequest{User: "nobody", Name: "x"}, CodeNotFound, "no user named nobody"},
			{ImportRequest{User: "Alice", Name: "x"}, CodeInvalid, "invalid user name"},
			{ImportRequest{User: "alice", Name: long}, CodeInvalid, "too long"},
			{ImportRequest{User: "alice", Name: ".."}, CodeInvalid, "invalid file name"},
			{ImportRequest{User: "alice", Name: ""}, CodeInvalid, "invalid file name"},
			{ImportRequest{User: "alice", Name: "a/b"}, CodeInvalid, "invalid file name"},
			{ImportRequest{User: "alice", Session: "a/b", Name: "x"}, CodeInvalid, "invalid session name"},
		} {
			_, err := importString(ctx, a, c.req, "x")
			if codeOf(t, err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Errorf("import %+v: %v, want %s saying %q", c.req, err, c.code, c.want)
			}
		}
		checkClean(t, st)
	})
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

func TestImportQuota(t *testing.T) {
	bothAdmins(t, func(t *testing.T, st *Store, a Admin) {
		ctx := context.Background()
		if _, err := a.AddUser(ctx, UserAddRequest{Name: "alice", Quota: Amount{Bytes: 64 << 10}}); err != nil {
			t.Fatal(err)
		}
		before, _ := st.Meta.Usage(shedfs.UserHolder("alice"))
		big := bytes.Repeat([]byte("x"), 100<<10)
		for _, size := range []int64{int64(len(big)), -1} {
			_, err := a.Import(ctx, ImportRequest{User: "alice", Name: "big"}, bytes.NewReader(big), size)
			if codeOf(t, err) != CodeQuota || !strings.Contains(err.Error(), "quota of user alice") {
				t.Errorf("import over quota (size %d): %v, want %s", size, err, CodeQuota)
			}
		}
		after, _ := st.Meta.Usage(shedfs.UserHolder("alice"))
		if after != before {
			t.Errorf("usage %+v after refused imports, want %+v", after, before)
		}
		u, _ := st.Meta.GetUser("alice")
		if entries, _ := st.Meta.ReadDir(u.Roots.Uploads); len(entries) != 0 {
			t.Errorf("refused imports left %v", entries)
		}
		// 40 KiB fits; replacing it with 40 KiB fits too, although both
		// are charged while the replace is in flight.
		mid := bytes.Repeat([]byte("y"), 40<<10)
		for _, replace := range []bool{false, true} {
			if _, err := a.Import(ctx, ImportRequest{User: "alice", Name: "mid", Replace: replace}, bytes.NewReader(mid), int64(len(mid))); err != nil {
				t.Fatalf("import within quota (replace %v): %v", replace, err)
			}
		}
		used, _ := st.Meta.Usage(shedfs.UserHolder("alice"))
		if used.Bytes != shedfs.Charge(40<<10) {
			t.Errorf("usage %d bytes after a replace, want %d", used.Bytes, shedfs.Charge(40<<10))
		}
		// Inode quota.
		if _, err := a.SetQuota(ctx, "user:alice", QuotaSetRequest{Inodes: ptr(used.Inodes)}); err != nil {
			t.Fatal(err)
		}
		if _, err := importString(ctx, a, ImportRequest{User: "alice", Name: "one-more"}, "x"); codeOf(t, err) != CodeQuota {
			t.Errorf("import past the inode quota: %v", err)
		}
		checkClean(t, st)
	})
}

func ptr[T any](v T) *T { return &v }

// modeFixture makes alice and bob (in team-alpha), carol (outside), and
// files in share/, groups/team-alpha/ and alice's uploads/.
func modeFixture(t *testing.T, st *Store, a Admin) {
	t.Helper()
	ctx := context.Background()
	for _, u := range []string{"alice", "bob", "carol"} {
		if _, err := a.AddUser(ctx, UserAddRequest{Name: u}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.AddGroup(ctx, GroupAddRequest{Name: "team-alpha"}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if _, err := a.AddMember(ctx, "team-alpha", MemberRequest{User: u}); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := st.Meta.GetGroup("team-alpha")
	mk := func(dir uint64, name string, mode uint32) *shedfs.Inode {
		n, err := st.Meta.Create(dir, name, &shedfs.Inode{Mode: mode, Owner: "alice", OwnMode: shedfs.OwnModeGroup}, nil)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return n
	}
	mk(st.Meta.ShareRoot(), "report.txt", syscall.S_IFREG|0o644)
	d := mk(g.Root, "plans", syscall.S_IFDIR|0o755)
	mk(d.Ino, "q3.md", syscall.S_IFREG|0o644)
	if _, err := importString(ctx, a, ImportRequest{User: "alice", Name: "in.csv"}, "x"); err != nil {
		t.Fatal(err)
	}
}

func TestMode(t *testing.T) {
	bothAdmins(t, func(t *testing.T, st *Store, a Admin) {
		ctx := context.Background()
		modeFixture(t, st, a)

		m, err := a.GetMode(ctx, "bob", "share/report.txt")
		if err != nil {
			t.Fatal(err)
		}
		want := ModeInfo{User: "bob", Path: "share/report.txt", Type: "file", Zone: "share", Owner: "alice", Mode: "group",
			SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Scan: "unscanned"}
		if *m != want {
			t.Errorf("get: %+v, want %+v", *m, want)
		}
		if m, err := a.GetMode(ctx, "alice", "/uploads//./in.csv"); err != nil || m.Path != "uploads/in.csv" || m.Zone != "uploads" || m.Mode != "" {
			t.Errorf("get in uploads: %+v, %v", m, err)
		}
		if m, err := a.GetMode(ctx, "bob", "groups/team-alpha/plans"); err != nil || m.Type != "directory" || m.Zone != "group:team-alpha" {
			t.Errorf("get a group directory: %+v, %v", m, err)
		}

		m, err = a.SetMode(ctx, "bob", "groups/team-alpha/plans/q3.md", ModeSetRequest{Mode: ptr("owner_ro"), Owner: ptr("bob")})
		if err != nil {
			t.Fatalf("set: %v", err)
		}
		if m.Mode != "owner_ro" || m.Owner != "bob" {
			t.Errorf("set answered %+v", m)
		}
		if m, _ := a.GetMode(ctx, "alice", "groups/team-alpha/plans/q3.md"); m == nil || m.Mode != "owner_ro" || m.Owner != "bob" {
			t.Errorf("alice sees %+v after the change", m)
		}
		// Only the mode, then only the owner: the other one stays.
		if m, err := a.SetMode(ctx, "carol", "share/report.txt", ModeSetRequest{Mode: ptr("owner")}); err != nil || m.Owner != "alice" || m.Mode != "owner" {
			t.Errorf("set mode only: %+v, %v", m, err)
		}
		if m, err := a.SetMode(ctx, "carol", "share/report.txt", ModeSetRequest{Owner: ptr("carol")}); err != nil || m.Owner != "carol" || m.Mode != "owner" {
			t.Errorf("set owner only: %+v, %v", m, err)
		}

		for _, c := range []struct {
			user, path string
			req        *ModeSetRequest
			code, want string
		}{
			{"carol", "groups/team-alpha/plans/q3.md", nil, CodeNotFound, "no groups/team-alpha/plans/q3.md in the view of carol"},
			{"carol", "groups/team-alpha", nil, CodeNotFound, "in the view of carol"},
			{"bob", "uploads/in.csv", nil, CodeNotFound, "no uploads/in.csv in the view of bob"},
			{"alice", "share/nope", nil, CodeNotFound, "no share/nope"},
			{"alice", "uploads/in.csv/x", nil, CodeNotFound, "no uploads/in.csv/x"},
			{"alice", "share/../uploads", nil, CodeInvalid, `".." is not allowed`},
			{"alice", "groups", nil, CodeInvalid, "groups/ itself"},
			{"nobody", "share", nil, CodeNotFound, "no user named nobody"},
			{"Bad", "share", nil, CodeInvalid, "invalid user name"},
			{"alice", "share/report.txt", &ModeSetRequest{Mode: ptr("rw")}, CodeInvalid, `invalid mode "rw"`},
			{"alice", "share/report.txt", &ModeSetRequest{}, CodeInvalid, "give a mode, an owner or both"},
			{"alice", "share/report.txt", &ModeSetRequest{Owner: ptr("nobody")}, CodeNotFound, "no user named nobody"},
			{"alice", "groups/team-alpha/plans", &ModeSetRequest{Owner: ptr("carol")}, CodeInvalid, "not a member of group team-alpha"},
			{"alice", "uploads/in.csv", &ModeSetRequest{Mode: ptr("owner")}, CodeInvalid, "only in share/ and groups/"},
			{"alice", ".", &ModeSetRequest{Owner: ptr("bob")}, CodeInvalid, "only in share/ and groups/"},
		} {
			var err error
			if c.req == nil {
				_, err = a.GetMode(ctx, c.user, c.path)
			} else {
				_, err = a.SetMode(ctx, c.user, c.path, *c.req)
			}
			if codeOf(t, err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %q (%+v): %v, want %s saying %q", c.user, c.path, c.req, err, c.code, c.want)
			}
		}
	})
}

// fakeFrontend records what the core tells the views of the changes Local
// makes, and the events it records.
type fakeFrontend struct {
	members []string
	entries []string
	inodes  []uint64
	events  []string
	reloads int
	// owners and ownerOpts are the OwnerChanged calls.
	owners    []string
	ownerOpts []vfs.ViewOptions
}

func (f *fakeFrontend) Holds(ino uint64) bool     { return false }
func (f *fakeFrontend) Overlay(rec *shedfs.Inode) {}
func (f *fakeFrontend) MembershipChanged(user string) {
	f.members = append(f.members, user)
}
func (f *fakeFrontend) TrashChanged()                                             {}
func (f *fakeFrontend) TrashFreed(gone []*shedfs.Inode, why string, removed bool) {}
func (f *fakeFrontend) OwnerChanged(user string, opts vfs.ViewOptions) {
	f.owners = append(f.owners, user)
	f.ownerOpts = append(f.ownerOpts, opts)
}
func (f *fakeFrontend) SettingsChanged()               { f.reloads++ }
func (f *fakeFrontend) SessionsChanged(fresh []string) {}
func (f *fakeFrontend) LocksLost(*vfs.View, []uint64)  {}
func (f *fakeFrontend) Changed(from *vfs.View, z shedfs.Zone, items []vfs.Change) {
	// The admin's operations reach the views as a view's do, from a
	// view of the door "admin".
	if from.Door() != vfs.DoorAdmin {
		return
	}
	for _, it := range items {
		switch {
		case it.Name != "":
			f.entries = append(f.entries, it.Name)
		case it.Off < 0:
			f.inodes = append(f.inodes, it.Ino)
		}
	}
}
func (f *fakeFrontend) Record(e shedfs.Event) { f.events = append(f.events, e.Op+" "+e.Path) }

// localWithFrontend is a Local whose core has h attached and records into h.
func localWithFrontend(st *Store, h *fakeFrontend) *Local {
	core := NewCore(st, h, nil)
	core.Attach(h)
	return newLocal(st, core, slog.New(slog.DiscardHandler))
}

// TestViewsAreTold checks that every admin change the views cache is
// passed on: membership to the users concerned, imported names, and
// ownership overrides.
func TestViewsAreTold(t *testing.T) {
	st := openTestStore(t)
	h := &fakeFrontend{}
	l := localWithFrontend(st, h)
	ctx := context.Background()
	modeFixture(t, st, l)
	if !slices.Equal(h.members, []string{"alice", "bob"}) {
		t.Errorf("add-member told %v", h.members)
	}
	h.members = nil
	if _, err := l.RemoveMember(ctx, "team-alpha", "bob"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.members, []string{"bob"}) {
		t.Errorf("remove-member told %v", h.members)
	}
	h.members = nil
	if _, err := l.AddGroup(ctx, GroupAddRequest{Name: "empty"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RemoveGroup(ctx, "team-alpha", true); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.members, []string{"alice"}) {
		t.Errorf("add group and remove group told %v, want only the former member alice", h.members)
	}
	if !slices.Equal(h.entries, []string{"in.csv"}) {
		t.Errorf("import told %v", h.entries)
	}
	if _, err := importString(ctx, l, ImportRequest{User: "alice", Session: "s", Name: "in.csv", Replace: true}, "y"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.entries, []string{"in.csv", "s", "in.csv"}) {
		t.Errorf("import into a new session told %v", h.entries)
	}
	m, err := l.SetMode(ctx, "alice", "share/report.txt", ModeSetRequest{Mode: ptr("owner")})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := st.Meta.Lookup(st.Meta.ShareRoot(), "report.txt")
	if !slices.Equal(h.inodes, []uint64{n.Ino}) || m.Mode != "owner" {
		t.Errorf("mode set told %v, want [%d]", h.inodes, n.Ino)
	}
	// Each import and the override reach the audit trail.
	want := []string{"import /uploads/in.csv", "import /uploads/s/in.csv", "admin_set_ownership /share/report.txt"}
	if !slices.Equal(h.events, want) {
		t.Errorf("audit events %q, want %q", h.events, want)
	}
}
