package vfs

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// forkFixture is alice's private tree with d/a (and its hard link d/h)
// and a symlink l, written through a view.
type forkFixture struct {
	*fixture
	v    *View
	root At
	a    *shedfs.Inode
}

func newForkFixture(t *testing.T) *forkFixture {
	t.Helper()
	f := newFixture(t, nil)
	f.core.ServeFiles()
	t.Cleanup(f.core.CloseFiles)
	v, err := f.core.NewView("api", "alice", nil, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	root := At{Ino: v.Root(), Zone: v.RootZone(), Paths: paths("")}
	d, _, e := v.Mkdir(Caller{}, root, "d", 0o755)
	if e != 0 {
		t.Fatal(e)
	}
	dAt := At{Ino: d.Ino, Zone: d.Zone, Paths: paths("/d")}
	a, e := v.Create(Caller{}, dAt, "a", 0o640)
	if e != 0 {
		t.Fatal(e)
	}
	writeAt(t, v, dAt, "a", a, "alpha")
	if _, _, e := v.Link(dAt, &At{Ino: a.Ino, Zone: a.Zone, Paths: paths("/d/a")}, "h"); e != 0 {
		t.Fatal(e)
	}
	if _, _, e := v.Symlink(Caller{}, root, "l", "d/a"); e != 0 {
		t.Fatal(e)
	}
	return &forkFixture{fixture: f, v: v, root: root, a: a}
}

// writeAt writes s at offset 0 of rec, named name in dir, through v.
func writeAt(t *testing.T, v *View, dir At, name string, rec *shedfs.Inode, s string) {
	t.Helper()
	h, _, e := v.Open(context.Background(), At{Ino: rec.Ino, Zone: rec.Zone, Paths: paths(dir.pathOf(name))}, syscall.O_RDWR)
	if e != 0 {
		t.Fatalf("open %s: %v", name, e)
	}
	if _, _, e := h.Write([]byte(s), 0); e != 0 {
		t.Fatalf("write %s: %v", name, e)
	}
	if e := h.Flush(); e != 0 {
		t.Fatal(e)
	}
	h.Release()
}

// tree lists alice's private tree as a fork source would.
func (f *forkFixture) tree(t *testing.T) []metadata.SnapEntry {
	t.Helper()
	get := func(dir uint64, name string) *shedfs.Inode {
		n, err := f.store.Lookup(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	entry := func(p string, n *shedfs.Inode) metadata.SnapEntry {
		return metadata.SnapEntry{Path: p, Ino: n.Ino, Mode: n.Mode, Size: int64(n.Size), Mtime: n.Mtime, Target: n.Target}
	}
	root, _ := f.store.GetInode(f.alice.Roots.Private)
	d := get(root.Ino, "d")
	return []metadata.SnapEntry{entry("", root), entry("d", d), entry("d/a", get(d.Ino, "a")), entry("d/h", get(d.Ino, "h")), entry("l", get(root.Ino, "l"))}
}

func (f *forkFixture) session(t *testing.T, id string, limit shedfs.Limit) *metadata.Session {
	t.Helper()
	ss, err := f.store.OpenSession("alice", id, time.Time{}, limit)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.core.Admin("alice").SessionOpened(ss); err != nil {
		t.Fatal(err)
	}
	if err := f.core.SessionsChanged(); err != nil {
		t.Fatal(err)
	}
	return ss
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestForkSharesAndCopiesUp: a fork of a live tree makes the same tree
// in the session (hard links kept, symlinks as they are) with blobs
// linked, not copied; it is charged to the session like a copy; a write
// on either side copies the blob first, leaves the other side as it was
// and charges no snapshot bytes (the old content is still a live file's).
func TestForkSharesAndCopiesUp(t *testing.T) {
	f := newForkFixture(t)
	ss := f.session(t, "s1", shedfs.Limit{})
	h := shedfs.SessionHolder("alice", "s1")
	before, _ := f.store.Usage(h)
	out, err := f.core.Admin("alice").Fork(ss, ForkSource{Entries: f.tree(t)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Entries != 5 || out.Bytes != 5 {
		t.Fatalf("forked %+v, want 5 entries of 5 bytes", out)
	}
	after, _ := f.store.Usage(h)
	if got, want := after.Bytes-before.Bytes, shedfs.Charge(5); got != want || after.Inodes-before.Inodes != 3 {
		t.Fatalf("fork charged %d bytes and %d inodes, want %d and 3", got, after.Inodes-before.Inodes, want)
	}
	d, err := f.store.Lookup(ss.Root, "d")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.store.Lookup(d.Ino, "a")
	bh, _ := f.store.Lookup(d.Ino, "h")
	l, _ := f.store.Lookup(ss.Root, "l")
	if b == nil || bh == nil || b.Ino != bh.Ino || b.Nlink != 2 || b.Size != 5 || b.Mode != f.a.Mode {
		t.Fatalf("forked file %+v, its link %+v", b, bh)
	}
	if l == nil || l.Target != "d/a" || b.Zone != shedfs.SessionZone("alice", "s1") {
		t.Fatalf("forked symlink %+v, file zone %v", l, b.Zone)
	}
	sa, _ := os.Stat(f.blobs.Path(f.a.Ino))
	sb, _ := os.Stat(f.blobs.Path(b.Ino))
	if !os.SameFile(sa, sb) {
		t.Fatal("the fork's blob is a copy, not a link")
	}

	// A write in the session copies first; alice's file keeps its content.
	sv, err := f.core.NewView("api", "alice", ss, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	writeAt(t, sv, At{Ino: d.Ino, Zone: d.Zone, Paths: paths("/d")}, "a", b, "OMEGA")
	if got := read(t, f.blobs.Path(f.a.Ino)); got != "alpha" {
		t.Fatalf("alice's file holds %q after a write in the fork", got)
	}
	if got := read(t, f.blobs.Path(b.Ino)); got != "OMEGA" {
		t.Fatalf("the fork's file holds %q", got)
	}
	// And the other way: a write by alice leaves the fork's file alone.
	writeAt(t, f.v, At{Ino: f.a.Parent, Zone: f.a.Zone, Paths: paths("/d")}, "a", f.a, "ALPHA")
	if got := read(t, f.blobs.Path(b.Ino)); got != "OMEGA" {
		t.Fatalf("the fork's file holds %q after alice's write", got)
	}
	for _, hh := range []shedfs.Holder{alice, h} {
		if n, _ := f.store.SnapshotHeld(hh); n != 0 {
			t.Fatalf("%s charged %d snapshot bytes by a copy-up whose old content stayed live", hh, n)
		}
	}
}

// TestForkFromSnapshotCharges: a fork from a snapshot links the
// snapshot's content; when both the live file and the fork's have
// changed, the old content is the snapshot's alone and charged to the
// snapshot's holder, once.
func TestForkFromSnapshotCharges(t *testing.T) {
	f := newForkFixture(t)
	es := f.tree(t)
	if _, err := f.blobs.SnapLink("sn1", f.a.Ino); err != nil {
		t.Fatal(err)
	}
	if err := f.store.PutSnapshotEntries("sn1", es); err != nil {
		t.Fatal(err)
	}
	if err := f.store.PutSnapshot(metadata.Snapshot{ID: "sn1", Name: "one", User: "alice", Path: ".", Holder: alice, Entries: len(es)}); err != nil {
		t.Fatal(err)
	}
	ss := f.session(t, "s2", shedfs.Limit{})
	if _, err := f.core.Admin("alice").Fork(ss, ForkSource{Entries: es, Snapshot: "sn1"}); err != nil {
		t.Fatal(err)
	}
	d, _ := f.store.Lookup(ss.Root, "d")
	b, _ := f.store.Lookup(d.Ino, "a")
	writeAt(t, f.v, At{Ino: f.a.Parent, Zone: f.a.Zone, Paths: paths("/d")}, "a", f.a, "ALPHA")
	if n, _ := f.store.SnapshotHeld(alice); n != 0 {
		t.Fatalf("alice charged %d snapshot bytes while the fork's file still has the old content", n)
	}
	sv, err := f.core.NewView("api", "alice", ss, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	writeAt(t, sv, At{Ino: d.Ino, Zone: d.Zone, Paths: paths("/d")}, "a", b, "OMEGA")
	if n, _ := f.store.SnapshotHeld(alice); n != shedfs.Charge(5) {
		t.Fatalf("alice's snapshot bytes %d after both sides changed, want %d", n, shedfs.Charge(5))
	}
	if n, _ := f.store.SnapshotHeld(shedfs.SessionHolder("alice", "s2")); n != 0 {
		t.Fatalf("the session charged %d snapshot bytes for alice's snapshot", n)
	}
	if got := read(t, f.blobs.SnapPath("sn1", f.a.Ino)); got != "alpha" {
		t.Fatalf("the snapshot holds %q", got)
	}
}

// TestForkOverQuota: a fork that does not fit the session's limit is
// refused with EDQUOT before anything is made.
func TestForkOverQuota(t *testing.T) {
	f := newForkFixture(t)
	ss := f.session(t, "s3", shedfs.Limit{Bytes: 1})
	_, err := f.core.Admin("alice").Fork(ss, ForkSource{Entries: f.tree(t)})
	if !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("fork over the session's limit: %v, want EDQUOT", err)
	}
	if ents, _ := f.store.ReadDir(ss.Root); len(ents) != 0 {
		t.Fatalf("a refused fork left %d entries", len(ents))
	}
}

// TestPurgeChargesSnapshot: when the last live file of a blob a snapshot
// links is purged from the trash, the content is the snapshot's alone
// and charged to its holder at once, not at the next recount.
func TestPurgeChargesSnapshot(t *testing.T) {
	f := newForkFixture(t)
	es := f.tree(t)
	if _, err := f.blobs.SnapLink("sn1", f.a.Ino); err != nil {
		t.Fatal(err)
	}
	if err := f.store.PutSnapshotEntries("sn1", es); err != nil {
		t.Fatal(err)
	}
	if err := f.store.PutSnapshot(metadata.Snapshot{ID: "sn1", Name: "one", User: "alice", Path: ".", Holder: alice, Entries: len(es)}); err != nil {
		t.Fatal(err)
	}
	d, err := f.store.Lookup(f.alice.Roots.Private, "d")
	if err != nil {
		t.Fatal(err)
	}
	dAt := At{Ino: d.Ino, Zone: d.Zone, Paths: paths("/d")}
	for _, name := range []string{"a", "h"} {
		if _, e := f.v.Remove(dAt, acl.OpUnlink, name); e != 0 {
			t.Fatal(e)
		}
	}
	if n, _ := f.store.SnapshotHeld(alice); n != 0 {
		t.Fatalf("charged %d snapshot bytes while the trash keeps the file", n)
	}
	kept, err := f.store.ListTrash(f.v.TrashHolders(nil))
	if err != nil || len(kept) != 1 {
		t.Fatalf("trash: %+v %v", kept, err)
	}
	if e := f.v.PurgeKept(kept[0], "/trash/h"); e != 0 {
		t.Fatal(e)
	}
	f.core.sweepGhosts(true) // the blob goes with the ghost
	if n, _ := f.store.SnapshotHeld(alice); n != shedfs.Charge(5) {
		t.Fatalf("snapshot bytes %d after the purge, want %d", n, shedfs.Charge(5))
	}
	if got := read(t, f.blobs.SnapPath("sn1", f.a.Ino)); got != "alpha" {
		t.Fatalf("the snapshot holds %q", got)
	}
}

// TestAdopt: a file created through a view adopts a content file by a
// link, charged like a write and in the source's fork group, so that a
// write to it copies first and charges no snapshot bytes; over the quota
// it is refused with EDQUOT and nothing is linked.
func TestAdopt(t *testing.T) {
	f := newForkFixture(t)
	before, _ := f.store.Usage(alice)
	rec, e := f.v.Create(Caller{}, f.root, "r", 0o644)
	if e != 0 {
		t.Fatal(e)
	}
	at := At{Ino: rec.Ino, Zone: rec.Zone, Paths: paths("/r")}
	if n, e := f.v.Adopt(at, rec, f.blobs.Path(f.a.Ino), f.a.Ino); e != 0 || n != 5 {
		t.Fatalf("adopt: %d %v", n, e)
	}
	after, _ := f.store.Usage(alice)
	if got := after.Bytes - before.Bytes; got != shedfs.Charge(5) {
		t.Fatalf("adopt charged %d bytes, want %d", got, shedfs.Charge(5))
	}
	sa, _ := os.Stat(f.blobs.Path(f.a.Ino))
	sr, _ := os.Stat(f.blobs.Path(rec.Ino))
	if !os.SameFile(sa, sr) {
		t.Fatal("adopted content copied, not linked")
	}
	stored, _ := f.store.GetInode(rec.Ino)
	writeAt(t, f.v, f.root, "r", stored, "RRRRR")
	if got := read(t, f.blobs.Path(f.a.Ino)); got != "alpha" {
		t.Fatalf("the source holds %q after a write to the adopter", got)
	}
	if n, _ := f.store.SnapshotHeld(alice); n != 0 {
		t.Fatalf("%d snapshot bytes charged by a copy-up whose old content stayed live", n)
	}

	used, _ := f.store.Usage(alice)
	if err := f.store.SetLimit(alice, shedfs.Limit{Bytes: used.Bytes + 1}); err != nil {
		t.Fatal(err)
	}
	rec2, e := f.v.Create(Caller{}, f.root, "r2", 0o644)
	if e != 0 {
		t.Fatal(e)
	}
	if _, e := f.v.Adopt(At{Ino: rec2.Ino, Zone: rec2.Zone, Paths: paths("/r2")}, rec2, f.blobs.Path(f.a.Ino), f.a.Ino); e != syscall.EDQUOT {
		t.Fatalf("adopt over the quota: %v, want EDQUOT", e)
	}
	if _, err := os.Stat(f.blobs.Path(rec2.Ino)); !os.IsNotExist(err) {
		t.Fatalf("a refused adopt left a link: %v", err)
	}
}
