package integration

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/fusefs"
)

// TestInlineFiles drives small files, whose content lives in the metadata
// store, through every form change: written and read back, grown past the
// inline size into a blob while open, truncated, overwritten in place,
// sparse, unlinked while open, and fsync'd before a SIGKILL. No blob is
// made for a file that stays small, and fsck finds the store clean.
func TestInlineFiles(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice")
	const max = fusefs.DefaultInlineMax

	small := randomBytes(10, 3000)
	mustWrite(t, v.Path("small"), small, 0o644)
	if got := mustRead(t, v.Path("small")); !bytes.Equal(got, small) {
		t.Errorf("small file reads back %d bytes, content matches: %v", len(got), bytes.Equal(got, small))
	}
	mustWrite(t, v.Path("empty"), nil, 0o644)

	// Grows past the inline size with one handle open throughout.
	grow := randomBytes(11, max+5000)
	f, err := os.OpenFile(v.Path("grow"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(grow); off += 4000 {
		if _, err := f.Write(grow[off:min(off+4000, len(grow))]); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	got := make([]byte, len(grow))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, grow) {
		t.Errorf("read back through the same handle after growing: %v, content matches: %v", err, bytes.Equal(got, grow))
	}
	f.Close()

	// Overwrite in place, then truncate down and extend sparsely.
	p := v.Path("small")
	g, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("HELLO"), 100); err != nil {
		t.Fatal(err)
	}
	copy(small[100:], "HELLO")
	if err := g.Truncate(2000); err != nil {
		t.Fatal(err)
	}
	small = small[:2000]
	if _, err := g.WriteAt([]byte("end"), 9000); err != nil {
		t.Fatal(err)
	}
	small = append(small, make([]byte, 7000)...)
	small = append(small, "end"...)
	if off, err := unix.Seek(int(g.Fd()), 10, unix.SEEK_HOLE); err != nil || off != int64(len(small)) {
		t.Errorf("SEEK_HOLE from 10: %d, %v; want %d", off, err, len(small))
	}
	if err := g.Sync(); err != nil {
		t.Fatalf("fsync: %v", err)
	}
	g.Close()
	if got := mustRead(t, p); !bytes.Equal(got, small) {
		t.Errorf("after overwrite, truncate and sparse write: %d bytes, want %d, content matches: %v", len(got), len(small), bytes.Equal(got, small))
	}

	// Unlinked while open: still readable and writable, then gone.
	d, err := os.OpenFile(v.Path("doomed"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write([]byte("doomed content")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(v.Path("doomed")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteAt([]byte("!"), 14); err != nil {
		t.Errorf("write after unlink: %v", err)
	}
	buf := make([]byte, 15)
	if _, err := d.ReadAt(buf, 0); err != nil || string(buf) != "doomed content!" {
		t.Errorf("read after unlink: %q, %v", buf, err)
	}
	d.Close()

	if blobs := blobFiles(t, store); len(blobs) != 1 {
		t.Errorf("%d blobs %v, want 1: only \"grow\" is past the inline size", len(blobs), blobs)
	}
	// The fsync'd small file survives a SIGKILL.
	v.Kill()
	out, errOut, code := runCLI(t, "fsck", "--store", store)
	if code != 0 {
		t.Errorf("fsck after the kill: exit %d\n%s%s", code, out, errOut)
	}
	v2 := startView(t, store, "alice")
	if got := mustRead(t, v2.Path("small")); !bytes.Equal(got, small) {
		t.Errorf("fsync'd inline file after SIGKILL: %d bytes, want %d, content matches: %v", len(got), len(small), bytes.Equal(got, small))
	}
	if got := mustRead(t, v2.Path("grow")); !bytes.Equal(got, grow) {
		t.Errorf("grown file after SIGKILL: %d bytes, content matches: %v", len(got), bytes.Equal(got, grow))
	}
	if st, err := os.Stat(v2.Path("empty")); err != nil || st.Size() != 0 {
		t.Errorf("empty file: %v, %v", st, err)
	}
	v2.Stop()
	fsckClean(t, store)
}
