package vfs

import (
	"context"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/zones"
)

// paths names entries below the view root, for the trail.
type paths string

func (p paths) PathOf(name string) string {
	if name == "" {
		return string(p)
	}
	return string(p) + "/" + name
}

// TestViewOperations: the namespace operations of a view run on the core
// alone, with no mount: they decide by acl, record changes and refusals
// once with the door, keep what loses its last link in the trash, and
// tell the attached frontends what changed through which view.
func TestViewOperations(t *testing.T) {
	f := newFixture(t, nil)
	fr := &frontend{}
	f.core.Attach(fr)
	v, err := f.core.NewView(DoorFUSE, "alice", nil, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := At{Ino: v.Root(), Zone: v.RootZone(), Paths: paths("")}
	c := Caller{Uid: 1000, Gid: 1000}

	d, _, e := v.Mkdir(c, root, "d", 0o755)
	if e != 0 || !d.IsDir() || d.Uid != 1000 || d.Owner != "alice" {
		t.Fatalf("mkdir: %v %+v", e, d)
	}
	if ev := f.events.last(); ev.Op != "create" || ev.Path != "/d" || ev.Door != DoorFUSE {
		t.Fatalf("mkdir recorded %+v", ev)
	}
	dir := At{Ino: d.Ino, Zone: d.Zone, Paths: paths("/d")}
	file, e := v.Create(c, dir, "f", 0o644)
	if e != 0 || !file.IsRegular() {
		t.Fatalf("create: %v", e)
	}
	v.Created(dir, acl.OpCreate, "f")
	if _, _, e := v.Symlink(c, dir, "l", "f"); e != 0 {
		t.Fatalf("symlink: %v", e)
	}
	l, stored, e := v.Resolve(dir, "l", nil, v.Clock())
	if e != 0 || !stored {
		t.Fatalf("resolve l: %v", e)
	}
	if target, e := v.Readlink(At{Ino: l.Ino, Zone: l.Zone}, d.Ino); e != 0 || target != "f" {
		t.Fatalf("readlink: %q %v", target, e)
	}
	if _, _, e := v.Link(dir, &At{Ino: file.Ino, Zone: file.Zone}, "g"); e != 0 {
		t.Fatalf("link: %v", e)
	}
	if e := v.Setattr(At{Ino: file.Ino, Zone: file.Zone, Paths: paths("/d/f")}, file, SetAttr{Mode: 0o600, SetMode: true}); e != 0 {
		t.Fatalf("chmod: %v", e)
	}
	if rec, _ := f.store.GetInode(file.Ino); rec.Mode&07777 != 0o600 {
		t.Fatalf("chmod stored mode %o", rec.Mode)
	}
	if _, e := v.Rename(dir, "f", root, "f2", 0); e != 0 {
		t.Fatalf("rename: %v", e)
	}
	list, e := v.List(root, 99)
	if e != 0 {
		t.Fatal(e)
	}
	names := map[string]bool{}
	for _, de := range list {
		names[de.Name] = true
	}
	for _, n := range []string{".", "..", "d", "f2", zones.NameOutput, zones.NameShare, zones.NameGroups, zones.NameTrash} {
		if !names[n] {
			t.Errorf("listing of the view root lacks %s: %v", n, list)
		}
	}

	// A refusal is recorded once, with the door, and answered with
	// acl's errno.
	before := f.events.count("unlink")
	if _, e := v.Remove(root, acl.OpUnlink, zones.NameOutput); e == 0 {
		t.Fatal("unlink of output/ allowed")
	}
	if ev := f.events.last(); ev.Errno == 0 || ev.Reason == "" || ev.Door != DoorFUSE || ev.Path != "/"+zones.NameOutput {
		t.Fatalf("refusal recorded as %+v", ev)
	}
	if f.events.count("unlink") != before+1 {
		t.Fatal("refusal not recorded exactly once")
	}

	// Unlinking the last link keeps the file in the trash (retention is
	// on by default).
	if _, e := v.Remove(dir, acl.OpUnlink, "g"); e != 0 {
		t.Fatalf("unlink: %v", e)
	}
	if _, _, e := v.Resolve(dir, "g", nil, v.Clock()); e != syscall.ENOENT {
		t.Fatalf("unlinked name resolves: %v", e)
	}
	if _, e := v.Remove(root, acl.OpUnlink, "f2"); e != 0 {
		t.Fatalf("unlink: %v", e)
	}
	gone, _ := f.store.GetInode(file.Ino)
	if gone == nil || !f.core.InTrash(gone) {
		t.Fatalf("last link's file not kept: %+v", gone)
	}
	if e := v.RefuseKept(At{Ino: gone.Ino, Zone: gone.Zone}, acl.OpWrite, gone); e == 0 {
		t.Fatal("a kept file may be written by name")
	}
	if fr.trash == 0 {
		t.Fatal("frontends not told of the trash")
	}

	// Every change went out to the frontends as made through v.
	fr.mu.Lock()
	got := fr.changes[v]
	fr.mu.Unlock()
	want := NameWas(d.Ino, "f", file.Ino)
	found := false
	for _, ch := range got {
		found = found || ch == want
	}
	if !found {
		t.Fatalf("rename of f not fanned out as %+v: %+v", want, got)
	}
}

// TestViewStatfs: df in a zone with a limit shows the limit and the usage
// without what the trash holds.
func TestViewStatfs(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.store.SetLimit(alice, shedfs.Limit{Bytes: 1 << 30, Inodes: 1000}); err != nil {
		t.Fatal(err)
	}
	v, err := f.core.NewView(DoorFUSE, "alice", nil, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, e := v.Statfs(v.RootZone())
	if e != 0 {
		t.Fatal(e)
	}
	if st.Files != 1000 || uint64(st.Blocks)*uint64(st.Bsize) > 1<<30 || st.Namelen != shedfs.MaxNameLen {
		t.Fatalf("statfs %+v", st)
	}
}

// TestHandleWithoutKernel: a door without a kernel opens, writes, reads
// and closes through the core's open-file table: the size is seen at
// once (laid over the record), persisted at flush, charged to the holder
// only then, and a write past the quota is refused and recorded.
func TestHandleWithoutKernel(t *testing.T) {
	f := newFixture(t, nil)
	f.core.ServeFiles()
	defer f.core.CloseFiles()
	if err := f.store.SetLimit(alice, shedfs.Limit{Bytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	v, err := f.core.NewView("api", "alice", nil, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := At{Ino: v.Root(), Zone: v.RootZone(), Paths: paths("")}
	rec, e := v.Create(Caller{}, root, "f", 0o644)
	if e != 0 {
		t.Fatal(e)
	}
	h, _, e := v.OpenNew(root, "f", rec, syscall.O_RDWR)
	if e != 0 {
		t.Fatal(e)
	}
	h.Bind(paths("/f"))
	data := []byte("hello, world")
	if n, _, e := h.Write(data, 0); e != 0 || n != len(data) {
		t.Fatalf("write: %d %v", n, e)
	}
	if st, _ := f.core.Stat(rec.Ino); st.Size != uint64(len(data)) {
		t.Fatalf("open file's size not laid over: %d", st.Size)
	}
	buf := make([]byte, 64)
	if n, e := h.Read(buf, 0); e != 0 || string(buf[:n]) != string(data) {
		t.Fatalf("read %q %v", buf[:n], e)
	}
	if f.core.OpenFiles() != 1 {
		t.Fatalf("open files %d", f.core.OpenFiles())
	}
	// Past the quota: refused, recorded with the door.
	if _, _, e := h.Write(make([]byte, 2<<20), int64(len(data))); e != syscall.EDQUOT {
		t.Fatalf("write past the quota: %v", e)
	}
	if ev := f.events.last(); ev.Errno != syscall.EDQUOT || ev.Door != "api" || ev.Path != "/f" {
		t.Fatalf("refusal recorded as %+v", ev)
	}
	if e := h.Flush(); e != 0 {
		t.Fatal(e)
	}
	h.Release()
	if f.core.OpenFiles() != 0 {
		t.Fatal("file still open after its last release")
	}
	stored, _ := f.store.GetInode(rec.Ino)
	if stored.Size != uint64(len(data)) {
		t.Fatalf("stored size %d", stored.Size)
	}
	if f.core.Accountant().Pending(alice) != 0 {
		t.Fatalf("pending %d after the release", f.core.Accountant().Pending(alice))
	}

	// O_TRUNC keeps the old content in the trash.
	h, _, e = v.Open(context.Background(), At{Ino: rec.Ino, Zone: rec.Zone, Paths: paths("/f")}, syscall.O_WRONLY|syscall.O_TRUNC)
	if e != 0 {
		t.Fatal(e)
	}
	h.Release()
	if stored, _ := f.store.GetInode(rec.Ino); stored.Size != 0 {
		t.Fatalf("O_TRUNC left size %d", stored.Size)
	}
	kept, err := f.store.TrashUsage(alice)
	if err != nil || kept.Inodes != 1 {
		t.Fatalf("truncated content not kept: %+v %v", kept, err)
	}
}
