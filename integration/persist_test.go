package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPersistence builds a tree with varied modes, owners, times, xattrs,
// symlinks and hard links in a view, stops the daemon cleanly, mounts the
// store again and checks that everything is as it was; then changes it
// once more and checks across a second remount.
func TestPersistence(t *testing.T) {
	t.Parallel()
	// The reference: the same tree built on the host filesystem.
	ref := filepath.Join(t.TempDir(), "tree")
	makeTree(t, ref)
	want := scanTree(t, ref)
	opts := treeOpts{owner: true, mtime: true, xattrs: want["file"].Xattrs != ""}

	store := newStore(t)
	v := startView(t, store, "alice")
	makeTree(t, v.Path("tree"))
	compareTrees(t, "tree built in the view", want, scanTree(t, v.Path("tree")), opts)
	v.Stop()

	v2 := startView(t, store, "alice")
	compareTrees(t, "after a clean stop and remount", want, scanTree(t, v2.Path("tree")), opts)
	f, err := os.OpenFile(v2.Path("tree", "file"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("appended\n")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Remove(v2.Path("tree", "secret")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(v2.Path("tree", "tool"), v2.Path("tree", "dir", "tool")); err != nil {
		t.Fatal(err)
	}
	again := scanTree(t, v2.Path("tree"))
	v2.Stop()

	v3 := startView(t, store, "alice")
	compareTrees(t, "after changes and a second remount", again, scanTree(t, v3.Path("tree")), opts)
	if got := string(mustRead(t, v3.Path("tree", "dir", "hardlink"))); got != "plain file\nappended\n" {
		t.Errorf("hard link after remount: %q", got)
	}
	v3.Stop()
	fsckClean(t, store)
}
