package blobs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func TestDirLifecycle(t *testing.T) {
	d, err := OpenDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(7, false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a missing blob without create: %v, want not exist", err)
	}
	b, err := d.Open(7, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteAt([]byte("hello"), 3); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := d.SyncDir(7); err != nil {
		t.Fatal(err)
	}
	if n, err := d.Size(7); err != nil || n != 8 {
		t.Fatalf("size %d, %v; want 8", n, err)
	}
	// The host path is built from the number alone.
	if p := d.Path(0x1234); !strings.HasSuffix(p, "/34/12/4660") {
		t.Fatalf("path %s", p)
	}
	if err := d.Truncate(9, 100); err != nil {
		t.Fatal(err)
	}
	// Stray files that are no inode numbers are not blobs.
	if err := os.WriteFile(filepath.Join(d.Root(), "junk"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var seen []string
	if err := d.Each(func(ino uint64, size int64) error {
		seen = append(seen, strconv.FormatUint(ino, 10)+"="+strconv.FormatInt(size, 10))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(seen)
	if strings.Join(seen, " ") != "7=8 9=100" {
		t.Fatalf("each saw %v", seen)
	}
	if err := d.Remove(7); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(7); err != nil {
		t.Fatalf("removing a missing blob: %v", err)
	}
}

func TestOpenDirOnFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(p); err == nil {
		t.Fatal("OpenDir on a regular file succeeded")
	}
}
