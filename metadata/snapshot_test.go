package metadata

import (
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/shedfs/shedfs"
)

const dirtyEnv = "SHEDFS_METADATA_DIRTY_CHILD"

// TestDirtyChild is the child of TestReadOnlyOpenOfDirtyStore: it makes
// files, an orphan, syncs, and exits without closing the store.
func TestDirtyChild(t *testing.T) {
	dir := os.Getenv(dirtyEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestReadOnlyOpenOfDirtyStore")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	root := s.ShareRoot()
	for i := range 20 {
		s.Create(root, fmt.Sprintf("f%d", i), file(0o644), nil)
	}
	s.Unlink(root, "f3", false) // an orphan: "still open" when the process dies
	if err := s.Sync(); err != nil {
		fmt.Println("sync:", err)
		os.Exit(3)
	}
	os.Exit(0) // no Close: the store stays marked dirty
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// dirHashes is the name, size and content hash of every file under dir.
func dirHashes(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%s %d %08x %v", rel, fi.Size(), crc32.Checksum(data, castagnoli), fi.ModTime()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestReadOnlyOpenOfDirtyStore: a store whose process died can be opened
// read-only (badger itself refuses: its log needs a replay), shows what
// was synced, is reported not clean, and is left byte for byte as it was,
// so the next read-write open still sees it dirty.
func TestReadOnlyOpenOfDirtyStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestDirtyChild$")
	cmd.Env = append(os.Environ(), dirtyEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	before := dirHashes(t, dir)
	tmpBefore, _ := filepath.Glob(filepath.Join(os.TempDir(), "shedfs-snapshot-*"))
	for range 2 {
		s, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only open of a dirty store: %v", err)
		}
		if s.WasClean() {
			t.Error("a dirty store opened read-only says it was clean")
		}
		if ents := must[[]shedfs.DirEntry](t)(s.ReadDir(s.ShareRoot())); len(ents) != 19 {
			t.Errorf("read-only snapshot lists %d entries, want 19", len(ents))
		}
		if orphans := must[[]uint64](t)(s.Orphans()); len(orphans) != 1 {
			t.Errorf("orphans %v, want one", orphans)
		}
		rep, err := s.Check(nil, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if kinds(rep) != "orphan-inode,usage" {
			t.Errorf("check of the snapshot: %+v", rep.Problems)
		}
		if _, err := s.Check(nil, true, nil); err == nil {
			t.Error("a repair on a read-only store was accepted")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if after := dirHashes(t, dir); after != before {
		t.Errorf("a read-only open changed meta/:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if tmpAfter, _ := filepath.Glob(filepath.Join(os.TempDir(), "shedfs-snapshot-*")); len(tmpAfter) != len(tmpBefore) {
		t.Errorf("snapshots left behind: %v", tmpAfter)
	}
	s := openTest(t, dir)
	if s.WasClean() {
		t.Error("after read-only opens, the store no longer looks dirty")
	}
}
