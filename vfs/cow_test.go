package vfs

import (
	"context"
	"os"
	"syscall"
	"testing"
)

// TestCopyUpOnSharedBlob: a blob linked into a snapshot, while its file
// is open for writing (Freeze) or before it is opened, is copied before
// the first write or truncate changes it; the snapshot's link keeps the
// old content, the live file gets the new one, and a second write costs
// no second copy.
func TestCopyUpOnSharedBlob(t *testing.T) {
	f := newFixture(t, nil)
	f.core.ServeFiles()
	defer f.core.CloseFiles()
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
	if _, _, e := h.Write([]byte("old content"), 0); e != 0 {
		t.Fatal(e)
	}
	// Snapshot while open: the write after it must not reach the link.
	if open, err := f.core.Freeze(rec.Ino, func() error { _, err := f.blobs.SnapLink("s1", rec.Ino); return err }); err != nil || !open {
		t.Fatalf("freeze: open=%v %v", open, err)
	}
	if _, _, e := h.Write([]byte("NEW"), 0); e != 0 {
		t.Fatal(e)
	}
	if got, _ := os.ReadFile(f.blobs.SnapPath("s1", rec.Ino)); string(got) != "old content" {
		t.Fatalf("snapshot holds %q after a write to the live file", got)
	}
	if got, _ := os.ReadFile(f.blobs.Path(rec.Ino)); string(got) != "NEW content" {
		t.Fatalf("live file holds %q", got)
	}
	if _, only, _ := f.blobs.SnapOwned("s1", rec.Ino); !only {
		t.Fatal("the snapshot's blob still shared after the copy-up")
	}
	h.Flush()
	h.Release()

	// Snapshot of a closed file, then truncate by name through the core.
	if open, err := f.core.Freeze(rec.Ino, func() error { _, err := f.blobs.SnapLink("s2", rec.Ino); return err }); err != nil || open {
		t.Fatalf("freeze of a closed file: open=%v %v", open, err)
	}
	stored, _ := f.store.GetInode(rec.Ino)
	if _, e := v.Truncate(At{Ino: rec.Ino, Zone: rec.Zone, Paths: paths("/f")}, stored, 3); e != 0 {
		t.Fatal(e)
	}
	if got, _ := os.ReadFile(f.blobs.SnapPath("s2", rec.Ino)); string(got) != "NEW content" {
		t.Fatalf("snapshot s2 holds %q after a truncate of the live file", got)
	}
	h, _, e = v.Open(context.Background(), At{Ino: rec.Ino, Zone: rec.Zone, Paths: paths("/f")}, syscall.O_RDWR)
	if e != 0 {
		t.Fatal(e)
	}
	if _, _, e := h.Write([]byte("x"), 0); e != 0 {
		t.Fatal(e)
	}
	h.Release()
	if got, _ := os.ReadFile(f.blobs.Path(rec.Ino)); string(got) != "xEW" {
		t.Fatalf("live file holds %q", got)
	}
	if got, _ := os.ReadFile(f.blobs.SnapPath("s1", rec.Ino)); string(got) != "old content" {
		t.Fatalf("snapshot s1 holds %q", got)
	}
}
