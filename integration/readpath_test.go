package integration

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// TestReaddirPlusEntries: a listing of a directory whose entries the
// kernel does not hold yet (a fresh mount) hands out every entry with its
// attributes, as a lookup of each would, and those entries are not counted
// as LOOKUP requests (the kernel sent none; each used to be looked up, and
// counted, on its own).
func TestReaddirPlusEntries(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v, _ := startObservedView(t, store)
	const n = 300
	mustMkdir(t, v.Path("d"), 0o755)
	mustMkdir(t, v.Path("d", "sub"), 0o700)
	for i := range n {
		mustWrite(t, v.Path("d", fmt.Sprintf("f%03d", i)), make([]byte, i), os.FileMode(0o600+i%2*0o44))
	}
	if err := os.Symlink("f001", v.Path("d", "link")); err != nil {
		t.Fatal(err)
	}
	v.Stop()

	v, addr := startObservedView(t, store)
	if _, err := os.Stat(v.Path("d")); err != nil {
		t.Fatal(err)
	}
	lookups := func() float64 {
		return scrape(t, addr).value(t, "shedfs_fuse_requests_total", "op=lookup", "result=ok", "zone=private")
	}
	before := lookups()
	entries, err := os.ReadDir(v.Path("d"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != n+2 {
		t.Fatalf("%d entries, want %d", len(entries), n+2)
	}
	for _, e := range entries {
		var st syscall.Stat_t
		if err := syscall.Lstat(v.Path("d", e.Name()), &st); err != nil {
			t.Fatal(err)
		}
		var wantMode uint32
		var wantSize int64
		switch e.Name() {
		case "sub":
			wantMode, wantSize = syscall.S_IFDIR|0o700, st.Size
		case "link":
			wantMode, wantSize = syscall.S_IFLNK|0o777, 4
		default:
			var i int
			if _, err := fmt.Sscanf(e.Name(), "f%03d", &i); err != nil {
				t.Fatalf("unexpected entry %q", e.Name())
			}
			wantMode, wantSize = syscall.S_IFREG|uint32(0o600+i%2*0o44), int64(i)
		}
		if st.Mode != wantMode || st.Size != wantSize {
			t.Errorf("%s: mode %o size %d, want %o and %d", e.Name(), st.Mode, st.Size, wantMode, wantSize)
		}
	}
	if got := lookups() - before; got >= n/10 {
		t.Errorf("listing and stat of %d entries counted %v LOOKUPs", n+2, got)
	}
}
