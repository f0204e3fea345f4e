package integration

import (
	"bytes"
	"os"
	"syscall"
	"testing"
)

// TestCoherenceOpenReaderSameSize checks that a reader in one view holding
// a file open, with its pages cached, reads through the same descriptor
// what another view wrote in place with the same size, at once, with or
// without a stat in between: the size stays as it was, so only the
// daemon's invalidation (or the mtime a GETATTR brings) tells its kernel
// that the pages went stale.
func TestCoherenceOpenReaderSameSize(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", append([]string{"share"}, p...)...) }
	B := func(p ...string) string { return s.In("bob", append([]string{"share"}, p...)...) }
	mustWrite(t, A("held.txt"), bytes.Repeat([]byte("a"), 8192), 0o666)
	f, err := os.Open(B("held.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		what string
		b    byte
		stat bool
	}{{"without a stat", 'b', false}, {"after a stat", 'c', true}} {
		if got, err := readAt0(f); err != nil || len(got) != 8192 {
			t.Fatalf("bob reads held.txt: %d bytes, %v", len(got), err)
		}
		wantOK(t, "alice rewrites held.txt in place", writeFile(A("held.txt"), bytes.Repeat([]byte{c.b}, 8192)))
		if c.stat {
			if _, err := os.Stat(B("held.txt")); err != nil {
				t.Fatal(err)
			}
		}
		atOnce(t, "bob's open descriptor reads alice's same-size rewrite "+c.what, func() bool {
			got, err := readAt0(f)
			return err == nil && bytes.Equal(got, bytes.Repeat([]byte{c.b}, 8192))
		})
	}
}

// TestCoherenceMmapReader checks that a reader in one view with a file
// mapped sees every write another view makes to it at once, the second
// one too. The daemon once told a view of the first write's pages only,
// took its cache of the inode for dropped, and left it out of the next
// invalidation until it asked again; but the kernel keeps the other
// pages and a mapping reads them without asking, so the second write's
// page stayed stale in the reader's mapping.
func TestCoherenceMmapReader(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := s.In("alice", "share", "mapped.bin")
	B := s.In("bob", "share", "mapped.bin")
	mustWrite(t, A, append(bytes.Repeat([]byte("a"), 4096), bytes.Repeat([]byte("b"), 4096)...), 0o644)
	f, err := os.Open(B)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, 8192, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if m[0] != 'a' || m[4096] != 'b' {
		t.Fatalf("bob's mapping starts with %q and %q, want a and b", m[0], m[4096])
	}
	w, err := os.OpenFile(A, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Both writes before bob looks: a look at page 0 would make the
	// daemon count bob's cache fresh again.
	if _, err := w.WriteAt(bytes.Repeat([]byte("c"), 4096), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(bytes.Repeat([]byte("d"), 4096), 4096); err != nil {
		t.Fatal(err)
	}
	atOnce(t, "bob's mapping shows alice's second write (page 1)", func() bool { return m[4096] == 'd' })
	atOnce(t, "bob's mapping shows alice's first write (page 0)", func() bool { return m[0] == 'c' })
}
