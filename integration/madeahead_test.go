package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// aheadBlobs is the daemon's pool of blobs made ahead of creates
// (fusefs/madeahead.go).
const aheadBlobs = 32

// emptyBlobs are the inode numbers of the empty blobs under store/blobs.
func emptyBlobs(t testing.TB, store string) map[uint64]bool {
	t.Helper()
	out := map[uint64]bool{}
	root := filepath.Join(store, "blobs")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		ino, perr := strconv.ParseUint(d.Name(), 10, 64)
		fi, ierr := d.Info()
		if perr == nil && ierr == nil && fi.Size() == 0 {
			out[ino] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return out
}

// aheadBlob reports whether the blob file p may be one made ahead: empty.
func aheadBlob(store, p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Size() == 0
}

// waitPool waits until the daemon of store holds a full pool of blobs
// made ahead, and returns their numbers.
func waitPool(t testing.TB, store string) map[uint64]bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b := emptyBlobs(t, store)
		if len(b) >= aheadBlobs {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d empty blobs made ahead after 10s, want %d", len(b), aheadBlobs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func statIno(t testing.TB, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

// Creates take the blobs made ahead: each new file's inode number is one
// whose empty blob existed before the create, and its content is right.
// A clean stop removes the blobs nobody took.
func TestCreateUsesBlobsMadeAhead(t *testing.T) {
	t.Parallel()
	store := noTrashStore(t, "alice")
	v := startView(t, store, "alice")
	pooled := waitPool(t, store)
	for i := range 10 {
		name := v.Path(fmt.Sprintf("f%d", i))
		data := []byte(fmt.Sprintf("content of file %d\n", i))
		mustWrite(t, name, data, 0o644)
		if ino := statIno(t, name); !pooled[ino] {
			t.Errorf("file %d got inode %d, not one of the %d blobs made ahead", i, ino, len(pooled))
		}
		if got := string(mustRead(t, name)); got != string(data) {
			t.Errorf("file %d reads %q, want %q", i, got, data)
		}
	}
	v.Stop()
	if left := emptyBlobs(t, store); len(left) != 0 {
		t.Errorf("after a clean stop: %d empty blobs left, want 0", len(left))
	}
	if n := len(blobFiles(t, store)); n != 10 {
		t.Errorf("after a clean stop: %d blobs, want 10", n)
	}
	fsckClean(t, store)
}

// kill -9 with a full pool leaves its empty blobs; fsck finds the store
// clean (they are no damage), the next start removes them, and no number
// taken before the crash is handed out again.
func TestBlobsMadeAheadCrash(t *testing.T) {
	t.Parallel()
	store := noTrashStore(t, "alice")
	v := startView(t, store, "alice")
	waitPool(t, store)
	mustWrite(t, v.Path("kept"), []byte("kept"), 0o644)
	f, err := os.OpenFile(v.Path("kept"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync kept: %v", err)
	}
	f.Close()
	syncDir(t, v.Dir)
	before := waitPool(t, store)
	before[statIno(t, v.Path("kept"))] = true
	v.Kill()
	if left := emptyBlobs(t, store); len(left) < aheadBlobs {
		t.Fatalf("after kill -9: %d empty blobs, want the pool's %d", len(left), aheadBlobs)
	}
	fsckClean(t, store)

	v2 := startView(t, store, "alice")
	if got := string(mustRead(t, v2.Path("kept"))); got != "kept" {
		t.Errorf("kept after the crash: %q", got)
	}
	for i := range 2 * aheadBlobs {
		name := v2.Path(fmt.Sprintf("g%d", i))
		mustWrite(t, name, []byte("new"), 0o644)
		if ino := statIno(t, name); before[ino] {
			t.Errorf("file %d after the restart got inode %d, taken before the crash", i, ino)
		}
	}
	v2.Stop()
	if left := emptyBlobs(t, store); len(left) != 0 {
		t.Errorf("after the restart and a clean stop: %d empty blobs left, want 0", len(left))
	}
	fsckClean(t, store)
}
