package integration

import (
	"bytes"
	"os"
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
