package agentfs

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

type recorder struct{ events []shedfs.Event }

func (r *recorder) Record(e shedfs.Event) { r.events = append(r.events, e) }

type fixture struct {
	store *metadata.Store
	core  *vfs.Core
	rec   *recorder
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := metadata.Open(filepath.Join(dir, "meta"), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := blobs.OpenDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if _, err := st.AddUser(u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.AddGroup("team"); err != nil {
		t.Fatal(err)
	}
	if err := st.AddMember("team", "alice"); err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	return &fixture{store: st, core: vfs.New(st, b, vfs.Options{Recorder: r}), rec: r}
}

func (fx *fixture) fs(t *testing.T, user string, grant *acl.Grant) *FS {
	t.Helper()
	v, err := fx.core.NewView("mcp", user, nil, vfs.ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return New(v, vfs.Caller{Uid: 1000, Gid: 1000}, grant)
}

func wantCode(t *testing.T, what string, err error, code Code) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	return e
}

// TestNamespace makes, lists, stats, moves and deletes through the view's
// rules, and refuses what leaves the view.
func TestNamespace(t *testing.T) {
	fx := newFixture(t)
	f := fx.fs(t, "alice", nil)
	if _, err := f.Mkdir("output/a/b", true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Mkdir("output/a/b", true); err != nil {
		t.Fatalf("mkdir -p of an existing directory: %v", err)
	}
	wantCode(t, "mkdir an existing directory", func() error { _, err := f.Mkdir("output/a", false); return err }(), CodeExists)
	in, err := f.Stat("output/a/b")
	if err != nil || in.Type != "directory" || in.Zone != "output" || in.Owner != "alice" {
		t.Fatalf("stat: %+v %v", in, err)
	}
	l, err := f.List("", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Path)
	}
	if got := len(l.Entries); got != 4 || names[0] != "groups" || names[1] != "output" || names[2] != "share" || names[3] != "uploads" {
		t.Fatalf("root listing: %v", names)
	}
	if l, err := f.List("", 3, 100); err != nil || len(l.Entries) != 7 || l.Truncated { // + output/a, output/a/b, groups/team
		t.Fatalf("deep listing: %+v %v", l, err)
	}
	if l, err := f.List("", 3, 2); err != nil || !l.Truncated || len(l.Entries) != 2 {
		t.Fatalf("cut listing: %+v %v", l, err)
	}
	for _, p := range []string{"/etc", "../x", "output/../../x", "a/../b"} {
		wantCode(t, "stat "+p, func() error { _, err := f.Stat(p); return err }(), CodePathEscape)
	}
	wantCode(t, "stat a missing file", func() error { _, err := f.Stat("output/nope"); return err }(), CodeNotFound)
	wantCode(t, "the trash is no directory here", func() error { _, err := f.List("trash", 1, 10); return err }(), CodeNotFound)

	// Symlinks are followed inside the view, never out of it.
	root := vfs.At{Ino: f.v.Roots().Output, Zone: shedfs.Zone{Kind: shedfs.ZoneOutput, Principal: "alice"}}
	for name, target := range map[string]string{"in": "a/b", "out": "../../etc", "abs": "/etc"} {
		if _, _, e := f.v.Symlink(vfs.Caller{}, root, name, target); e != 0 {
			t.Fatalf("symlink %s: %v", name, e)
		}
	}
	if l, err := f.List("output/in", 1, 10); err != nil || l.Path != "output/a/b" {
		t.Fatalf("list through a symlink: %+v %v", l, err)
	}
	if in, err := f.Stat("output/in"); err != nil || in.Type != "symlink" || in.Target != "a/b" {
		t.Fatalf("stat of a symlink: %+v %v", in, err)
	}
	wantCode(t, "a symlink out", func() error { _, err := f.List("output/out", 1, 10); return err }(), CodePathEscape)
	wantCode(t, "an absolute symlink", func() error { _, err := f.List("output/abs/x", 1, 10); return err }(), CodePathEscape)

	// Rules: uploads/ is read-only, groups/ cannot be changed, a move
	// across zones is refused with what to do.
	e := wantCode(t, "mkdir in uploads", func() error { _, err := f.Mkdir("uploads/x", false); return err }(), CodePermissionDenied)
	if e.Rule != acl.ReasonUploadsReadonly {
		t.Errorf("the refusal names rule %q", e.Rule)
	}
	wantCode(t, "mkdir in groups/", func() error { _, err := f.Mkdir("groups/x", false); return err }(), CodePermissionDenied)
	if _, err := f.Mkdir("groups/team/shared", false); err != nil {
		t.Fatalf("mkdir in a group: %v", err)
	}
	if e := wantCode(t, "move across zones", func() error { _, err := f.Move("output/a", "a", false); return err }(), CodeInvalidArgument); e.Rule != "cross_zone" {
		t.Errorf("rule %q", e.Rule)
	}
	if in, err := f.Move("output/a", "output/c", false); err != nil || in.Path != "output/c" {
		t.Fatalf("move: %+v %v", in, err)
	}
	if _, err := f.Mkdir("output/d", false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "move onto an existing name", func() error { _, err := f.Move("output/c", "output/d", false); return err }(), CodeExists)

	// Deletes go to the trash (files and symlinks are kept there); a
	// directory needs recursive.
	if err := f.Delete("output/in", false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "delete a full directory", f.Delete("output/c", false), CodeNotEmpty)
	if err := f.Delete("output/c", true); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "stat a deleted directory", func() error { _, err := f.Stat("output/c"); return err }(), CodeNotFound)
	kept, err := fx.store.ListTrash([]shedfs.Holder{shedfs.HolderOf(shedfs.Zone{Kind: shedfs.ZoneOutput, Principal: "alice"})})
	if err != nil || len(kept) == 0 {
		t.Fatalf("nothing in the trash: %+v %v", kept, err)
	}
	// Another user sees none of it.
	b := fx.fs(t, "bob", nil)
	wantCode(t, "bob in a group he is not in", func() error { _, err := b.List("groups/team", 1, 10); return err }(), CodeNotFound)
	// Refusals are recorded with the door.
	var mcp int
	for _, ev := range fx.rec.events {
		if ev.Door == "mcp" && ev.Reason != "" {
			mcp++
		}
	}
	if mcp == 0 {
		t.Error("no refusal recorded with the door")
	}
}

// TestGrant narrows a view to a token's root, access and patterns.
func TestGrant(t *testing.T) {
	fx := newFixture(t)
	full := fx.fs(t, "alice", nil)
	for _, d := range []string{"output/run/docs", "output/other"} {
		if _, err := full.Mkdir(d, true); err != nil {
			t.Fatal(err)
		}
	}
	ro := fx.fs(t, "alice", &acl.Grant{Root: "output/run", Access: acl.AccessRead | acl.AccessList, Deny: []string{"secret*"}})
	if l, err := ro.List("output/run", 2, 10); err != nil || len(l.Entries) != 1 {
		t.Fatalf("list within the root: %+v %v", l, err)
	}
	e := wantCode(t, "list outside the root", func() error { _, err := ro.List("output/other", 1, 10); return err }(), CodePermissionDenied)
	if e.Rule != acl.ReasonTokenScope {
		t.Errorf("rule %q", e.Rule)
	}
	e = wantCode(t, "mkdir with a read-only token", func() error { _, err := ro.Mkdir("output/run/x", false); return err }(), CodePermissionDenied)
	if e.Rule != acl.ReasonTokenAccess {
		t.Errorf("rule %q", e.Rule)
	}
	wantCode(t, "a denied name", func() error { _, err := ro.Stat("output/run/secret.txt"); return err }(), CodePermissionDenied)
	var token int
	for _, ev := range fx.rec.events {
		if ev.Reason == acl.ReasonTokenScope || ev.Reason == acl.ReasonTokenAccess {
			token++
		}
	}
	if token != 3 {
		t.Errorf("%d token refusals recorded, want 3", token)
	}
}
