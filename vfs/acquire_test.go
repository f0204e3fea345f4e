package vfs

import (
	"context"
	"syscall"
	"testing"
)

// TestFirstOpenAfterRewrite: a reader's first open that looked the file up
// before a writer's whole open, O_TRUNC, write and close reads what the
// writer left, not the record and blob it saw first. The differential
// test's load met it through FUSE (issue 24): a view's read-back came
// short to a page boundary (the old size) or with the old content (the
// blob the truncate kept in the trash) when another view's open was
// between its lookup and its acquire.
func TestFirstOpenAfterRewrite(t *testing.T) {
	for _, c := range []struct {
		name string
		old  string
		new  string
	}{
		{"grows", "old", "the new, longer content"},
		{"shrinks", "the old, longer content", "new"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			v, err := f.core.NewView(DoorFUSE, "alice", nil, ViewOptions{})
			if err != nil {
				t.Fatal(err)
			}
			root := At{Ino: v.Root(), Zone: v.RootZone()}
			rec, e := v.Create(Caller{}, root, "f", 0o644)
			if e != 0 {
				t.Fatal(e)
			}
			at := At{Ino: rec.Ino, Zone: rec.Zone, Paths: paths("/f")}
			write := func(flags uint32, data string) {
				t.Helper()
				h, _, e := v.Open(context.Background(), at, flags)
				if e != 0 {
					t.Fatalf("open for writing: %v", e)
				}
				if n, _, e := h.Write([]byte(data), 0); e != 0 || n != len(data) {
					t.Fatalf("write: %d %v", n, e)
				}
				if e := h.Flush(); e != 0 {
					t.Fatal(e)
				}
				h.Release()
			}
			write(syscall.O_WRONLY, c.old)

			// The writer runs once, inside the reader's first open,
			// after the reader opened the blob it found.
			done := false
			f.core.afterBlobOpen = func(uint64) {
				if done {
					return
				}
				done = true
				write(syscall.O_WRONLY|syscall.O_TRUNC, c.new)
			}
			h, _, e := v.Open(context.Background(), at, syscall.O_RDONLY)
			f.core.afterBlobOpen = nil
			if e != 0 {
				t.Fatal(e)
			}
			defer h.Release()
			if !done {
				t.Fatal("the writer did not run inside the reader's open")
			}
			buf := make([]byte, 64)
			n, e := h.Read(buf, 0)
			if e != 0 || string(buf[:n]) != c.new {
				t.Fatalf("the reader reads %q (%v), want %q", buf[:n], e, c.new)
			}
			if f.trashed(t) != 1 {
				t.Fatalf("%d kept files, want the old content kept", f.trashed(t))
			}
		})
	}
}
