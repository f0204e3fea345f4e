package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// TestBlobsPlacedByOrder: files made one after another in a new store
// share a host shard directory (placed by allocation order, not spread by
// their permuted inode numbers), and stay readable and clean for fsck
// after the store is opened again.
func TestBlobsPlacedByOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := OpenStore(dir, OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	a := NewLocal(st, nil)
	ctx := context.Background()
	if _, err := a.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	inos := make([]uint64, n)
	shards := map[string]bool{}
	for i := range n {
		res, err := importString(ctx, a, ImportRequest{User: "alice", Name: fmt.Sprintf("f%d", i)}, fmt.Sprint("content ", i))
		if err != nil {
			t.Fatal(err)
		}
		inos[i] = res.Ino
		shards[filepath.Dir(st.Blobs.Path(res.Ino))] = true
	}
	// A lease of inode numbers may end among them: at most two shards.
	if len(shards) > 2 {
		t.Errorf("%d files made one after another lie in %d shard directories: %v", n, len(shards), shards)
	}
	st.Close()

	st, err = OpenStore(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, ino := range inos {
		if got, want := blobContent(t, st, ino), fmt.Sprint("content ", i); got != want {
			t.Errorf("blob of f%d after reopening: %q, want %q", i, got, want)
		}
	}
	checkClean(t, st)
}
