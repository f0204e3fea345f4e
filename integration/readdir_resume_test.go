package integration

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// TestReaddirResumedAfterCacheDrop: a listing the kernel began from its
// readdir cache (filled through another handle) and finishes through this
// handle, after the cache was dropped midway by a change made in another
// view, returns every name (du over a tree being untarred elsewhere failed
// with EINVAL: the handle had read nothing and refused the offset).
func TestReaddirResumedAfterCacheDrop(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", append([]string{"share", "big"}, p...)...) }
	B := func(p ...string) string { return s.In("bob", append([]string{"share", "big"}, p...)...) }
	mustMkdir(t, A(), 0o755)
	const n = 300
	for i := range n {
		mustWrite(t, A(fmt.Sprintf("file-%03d", i)), nil, 0o644)
	}
	// Fill bob's readdir cache through one handle.
	if ents, err := os.ReadDir(B()); err != nil || len(ents) != n {
		t.Fatalf("bob lists share/big: %d entries, %v; want %d", len(ents), err, n)
	}
	fd, err := syscall.Open(B(), syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	buf := make([]byte, 1024) // a few entries per call
	seen := map[string]bool{}
	read := func() int {
		t.Helper()
		k, err := syscall.Getdents(fd, buf)
		if err != nil {
			t.Fatalf("bob's getdents after %d names: %v", len(seen), err)
		}
		_, _, names := syscall.ParseDirent(buf[:k], -1, nil)
		for _, name := range names {
			seen[name] = true
		}
		return k
	}
	read()
	if len(seen) == 0 || len(seen) >= n {
		t.Fatalf("first getdents gave %d names, want some of %d", len(seen), n)
	}
	// A change in another view drops bob's cached listing midway.
	mustWrite(t, A("new"), nil, 0o644)
	for read() > 0 {
	}
	for i := range n {
		if name := fmt.Sprintf("file-%03d", i); !seen[name] {
			t.Errorf("bob's listing lacks %s", name)
		}
	}
}
