package metadata

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

func TestPrincipals(t *testing.T) {
	s := newStore(t)
	for _, bad := range []string{"", "Alice", "-x", "_x", "a b", "a/b", "a.b", strings.Repeat("a", 65), "é"} {
		_, err := s.AddUser(bad)
		wantErrno(t, err, syscall.EINVAL)
		_, err = s.AddGroup(bad)
		wantErrno(t, err, syscall.EINVAL)
	}
	for _, good := range []string{"a", "0", "alice", "team-alpha", "x_y", strings.Repeat("a", 64)} {
		if err := ValidPrincipal(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	alice := must[*shedfs.User](t)(s.AddUser("alice"))
	_, err := s.AddUser("alice")
	wantErrno(t, err, syscall.EEXIST)
	must[*shedfs.User](t)(s.AddUser("bob"))
	for i, ino := range []uint64{alice.Roots.Private, alice.Roots.Output, alice.Roots.Uploads} {
		n := must[*shedfs.Inode](t)(s.GetInode(ino))
		want := []shedfs.ZoneKind{shedfs.ZonePrivate, shedfs.ZoneOutput, shedfs.ZoneUploads}[i]
		if !n.IsDir() || n.Parent != 0 || n.Zone != (shedfs.Zone{Kind: want, Principal: "alice"}) || n.Owner != "alice" || n.Mode&0o777 != 0o755 {
			t.Fatalf("root %d: %+v", i, n)
		}
	}
	if got := must[*shedfs.User](t)(s.GetUser("alice")); got.Roots != alice.Roots {
		t.Fatalf("get user %+v", got)
	}
	_, err = s.GetUser("nobody")
	wantErrno(t, err, syscall.ENOENT)
	us := must[[]shedfs.User](t)(s.ListUsers())
	if len(us) != 2 || us[0].Name != "alice" || us[1].Name != "bob" {
		t.Fatalf("users %+v", us)
	}
	u := must[*shedfs.User](t)(s.UpdateUser("alice", func(u *shedfs.User) error { u.Uid, u.Gid = 1000, 1001; return nil }))
	if g := must[*shedfs.User](t)(s.GetUser("alice")); g.Uid != 1000 || g.Gid != 1001 || u.Uid != 1000 {
		t.Fatalf("update user %+v", g)
	}
	_, err = s.UpdateUser("alice", func(u *shedfs.User) error { u.Roots.Private = 1; return nil })
	wantErrno(t, err, syscall.EINVAL)

	g := must[*shedfs.Group](t)(s.AddGroup("team"))
	_, err = s.AddGroup("team")
	wantErrno(t, err, syscall.EEXIST)
	gr := must[*shedfs.Inode](t)(s.GetInode(g.Root))
	if gr.Zone != (shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: "team"}) || gr.OwnMode != shedfs.OwnModeGroup || gr.Owner != "" || gr.Parent != 0 {
		t.Fatalf("group root %+v", gr)
	}
	must[*shedfs.Group](t)(s.AddGroup("other"))
	wantErrno(t, s.AddMember("team", "nobody"), syscall.ENOENT)
	wantErrno(t, s.AddMember("nogroup", "alice"), syscall.ENOENT)
	for _, m := range []string{"bob", "alice", "alice"} {
		if err := s.AddMember("team", m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddMember("other", "alice"); err != nil {
		t.Fatal(err)
	}
	if got := must[*shedfs.Group](t)(s.GetGroup("team")); strings.Join(got.Members, ",") != "alice,bob" {
		t.Fatalf("members %v", got.Members)
	}
	if gs := must[[]string](t)(s.GroupsOf("alice")); strings.Join(gs, ",") != "other,team" {
		t.Fatalf("groups of alice %v", gs)
	}
	_, err = s.GroupsOf("nobody")
	wantErrno(t, err, syscall.ENOENT)
	wantErrno(t, s.RemoveMember("other", "bob"), syscall.ENOENT)
	if err := s.RemoveMember("other", "alice"); err != nil {
		t.Fatal(err)
	}
	if gs := must[[]string](t)(s.GroupsOf("alice")); strings.Join(gs, ",") != "team" {
		t.Fatalf("groups of alice %v", gs)
	}
	if gl := must[[]shedfs.Group](t)(s.ListGroups()); len(gl) != 2 || gl[0].Name != "other" {
		t.Fatalf("groups %+v", gl)
	}

	// Fill alice's trees and the group's, then remove them.
	d := must[*shedfs.Inode](t)(s.Create(alice.Roots.Private, "d", dir(), nil))
	f1 := must[*shedfs.Inode](t)(s.Create(d.Ino, "f1", file(0o644), nil))
	must[error](t)(nil, s.SetXattr(f1.Ino, "user.x", []byte("v"), 0, nil))
	f2 := must[*shedfs.Inode](t)(s.Create(alice.Roots.Output, "f2", file(0o644), nil))
	f3 := must[*shedfs.Inode](t)(s.Create(alice.Roots.Output, "f3", file(0o644), nil))
	must[*shedfs.Inode](t)(s.Unlink(alice.Roots.Output, "f3", false)) // an orphan of alice's
	must[*shedfs.Inode](t)(s.Create(alice.Roots.Uploads, "sym", &shedfs.Inode{Mode: syscall.S_IFLNK | 0o777, Target: "x"}, nil))
	gf := must[*shedfs.Inode](t)(s.Create(g.Root, "gf", file(0o644), nil))
	must[error](t)(nil, s.SetLimit("user:alice", shedfs.Limit{Bytes: 1}))

	blobs := must[[]uint64](t)(s.RemoveUser("alice"))
	want := map[uint64]bool{f1.Ino: true, f2.Ino: true, f3.Ino: true}
	if len(blobs) != len(want) {
		t.Fatalf("blobs %v want %v", blobs, want)
	}
	for _, b := range blobs {
		if !want[b] {
			t.Fatalf("blobs %v want %v", blobs, want)
		}
	}
	for _, ino := range []uint64{alice.Roots.Private, d.Ino, f1.Ino, f2.Ino, f3.Ino} {
		_, err := s.GetInode(ino)
		wantErrno(t, err, syscall.ENOENT)
	}
	_, err = s.GetUser("alice")
	wantErrno(t, err, syscall.ENOENT)
	_, err = s.RemoveUser("alice")
	wantErrno(t, err, syscall.ENOENT)
	if got := must[*shedfs.Group](t)(s.GetGroup("team")); strings.Join(got.Members, ",") != "bob" {
		t.Fatalf("members after remove %v", got.Members)
	}
	if got := must[shedfs.Usage](t)(s.Usage("user:alice")); got != (shedfs.Usage{}) {
		t.Fatalf("usage kept %+v", got)
	}
	if o := must[[]uint64](t)(s.Orphans()); len(o) != 0 {
		t.Fatalf("orphans kept %v", o)
	}
	blobs = must[[]uint64](t)(s.RemoveGroup("team"))
	if len(blobs) != 1 || blobs[0] != gf.Ino {
		t.Fatalf("group blobs %v", blobs)
	}
	_, err = s.GetGroup("team")
	wantErrno(t, err, syscall.ENOENT)
	rep := must[*Report](t)(s.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("problems after removals: %+v", rep.Problems)
	}
	// The name can be used again.
	must[*shedfs.User](t)(s.AddUser("alice"))
}

func TestOpenCloseClean(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "meta")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.WasClean() {
		t.Fatal("fresh store not clean")
	}
	root := s.ShareRoot()
	f := must[*shedfs.Inode](t)(s.Create(root, "f", file(0o644), nil))
	// Second open while held: locked.
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	s = openTest(t, dir)
	if !s.WasClean() || s.ShareRoot() != root {
		t.Fatalf("reopen: clean=%v root=%d", s.WasClean(), s.ShareRoot())
	}
	g := must[*shedfs.Inode](t)(s.Create(root, "g", file(0o644), nil))
	// Numbers are a permutation of a counter, so they do not grow; a
	// reopen must still never hand out one already in use.
	if g.Ino == f.Ino || g.Ino == root {
		t.Fatalf("inode number reused: %d after %d", g.Ino, f.Ino)
	}
	must[*shedfs.Inode](t)(s.Lookup(root, "f"))
	s.Close()

	// Read-only opens write nothing and refuse changes.
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !ro.WasClean() {
		t.Fatal("read-only open: not clean")
	}
	_, err = ro.Create(root, "h", file(0o644), nil)
	wantErrno(t, err, syscall.EROFS)
	must[*shedfs.Inode](t)(ro.Lookup(root, "g"))
	ro.Close()
}

func TestInMemory(t *testing.T) {
	s, err := Open("", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), "f", file(0o644), nil))
}

func TestOpenSchema(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.kv.Update(func(tx Txn) error { return tx.Set(versionKey(), encodeU64(99)) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "99") {
		t.Fatalf("open of version 99: %v", err)
	}
	// The failed open released the lock: a raw fix-up is possible.
	kv, err := openBadger(dir, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	kv.Update(func(tx Txn) error { return tx.Set(versionKey(), encodeU64(schemaVersion)) })
	kv.Close()
	openTest(t, dir)
}

func TestOpenNotADirectory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meta")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(p, Options{})
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("open of a file: %v", err)
	}
}

func TestOpenCorrupt(t *testing.T) {
	base := t.TempDir()
	good := filepath.Join(base, "good")
	s := openTest(t, good)
	f := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), "keep", file(0o644), nil))

	for _, victim := range []string{"MANIFEST", ".vlog", ".sst", "all"} {
		t.Run(victim, func(t *testing.T) {
			dir := filepath.Join(base, "bad-"+strings.TrimPrefix(victim, "."))
			b, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2000 {
				b.Create(b.ShareRoot(), "f"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+itoa(i), file(0o644), nil)
			}
			b.Close()
			des, _ := os.ReadDir(dir)
			hit := 0
			for _, de := range des {
				name := de.Name()
				if victim == "all" || name == victim || strings.HasSuffix(name, victim) {
					garbage := []byte(strings.Repeat("garbage!", 512))
					if err := os.WriteFile(filepath.Join(dir, name), garbage, 0o600); err != nil {
						t.Fatal(err)
					}
					hit++
				}
			}
			if hit == 0 {
				t.Skipf("no %s file to corrupt", victim)
			}
			b, err = Open(dir, Options{})
			if err == nil {
				// Badger may survive some damage; the data must then
				// still be readable or the damage detected by Check.
				defer b.Close()
				if _, err := b.Check(nil, false, nil); err != nil {
					t.Logf("check of damaged store: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open error not ErrCorrupt: %v", err)
			}
		})
	}
	if got := must[*shedfs.Inode](t)(s.Lookup(s.ShareRoot(), "keep")); got.Ino != f.Ino {
		t.Fatal("intact store damaged")
	}
}

// TestOpenAfterKillDuringFlush: a kill -9 while badger writes a new table
// leaves its file, empty or half written, outside the manifest; badger
// deletes it when it opens the store, so the store must open (TestQuotaCrash
// once found it refused: "table 000004.sst: footer out of bounds"). A table
// the manifest lists is still checked.
func TestOpenAfterKillDuringFlush(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	s := openTest(t, dir)
	f := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), "keep", file(0o644), nil))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"099998.sst": nil,
		"099999.sst": []byte(strings.Repeat("half a table", 100)),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open after a kill during a flush: %v", err)
	}
	if got := must[*shedfs.Inode](t)(s.Lookup(s.ShareRoot(), "keep")); got.Ino != f.Ino {
		t.Fatal("store damaged")
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "099998.sst")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("badger kept the table the manifest does not list: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
