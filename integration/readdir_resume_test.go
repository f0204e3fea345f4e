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

// TestReaddirResumedNoDuplicate is issue 24, item 16 (a name listed
// twice, an entry served that is not there): a listing the kernel began
// from its readdir cache and finishes through another handle, on a
// snapshot of the directory taken after a change, hands out no name twice
// and skips none that was there all along, whatever was created or
// removed before the point where it resumed. Offsets that were indexes
// into each handle's snapshot did both.
func TestReaddirResumedNoDuplicate(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	A := func(p ...string) string { return s.In("alice", append([]string{"share", "dup"}, p...)...) }
	B := func(p ...string) string { return s.In("bob", append([]string{"share", "dup"}, p...)...) }
	mustMkdir(t, A(), 0o755)
	const n = 300
	for i := range n {
		mustWrite(t, A(fmt.Sprintf("file-%03d", i)), nil, 0o644)
	}
	for _, change := range []struct {
		what string
		do   func()
	}{
		{"names created", func() {
			for i := range 20 {
				mustWrite(t, A(fmt.Sprintf("%02d-new", i)), nil, 0o644)
			}
		}},
		{"names removed", func() {
			for i := range 20 {
				if err := os.Remove(A(fmt.Sprintf("%02d-new", i))); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		// Fill bob's readdir cache through one handle.
		if _, err := os.ReadDir(B()); err != nil {
			t.Fatalf("bob lists share/dup: %v", err)
		}
		fd, err := syscall.Open(B(), syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		buf := make([]byte, 1024) // a few entries per call
		read := func() int {
			t.Helper()
			k, err := syscall.Getdents(fd, buf)
			if err != nil {
				t.Fatalf("bob's getdents after %d names: %v", len(seen), err)
			}
			_, _, names := syscall.ParseDirent(buf[:k], -1, nil)
			for _, name := range names {
				seen[name]++
			}
			return k
		}
		for range 3 {
			read()
		}
		// A change in another view drops bob's cached listing midway.
		change.do()
		for read() > 0 {
		}
		syscall.Close(fd)
		for name, k := range seen {
			if k > 1 {
				t.Errorf("%s: bob's listing has %s %d times", change.what, name, k)
			}
		}
		for i := range n {
			if name := fmt.Sprintf("file-%03d", i); seen[name] == 0 {
				t.Errorf("%s: bob's listing lacks %s", change.what, name)
			}
		}
	}
}
