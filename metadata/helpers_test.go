package metadata

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

func openTest(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newStore opens a fresh store: embedded, or on the shared etcd cluster
// when SHEDFS_TEST_META=etcd (make test runs the package both ways), so
// that the schema's tests hold on both engines.
func newStore(t *testing.T) *Store {
	t.Helper()
	if os.Getenv("SHEDFS_TEST_META") == "etcd" {
		s, err := OpenEtcd(testEtcd(t), Options{})
		if err != nil {
			t.Fatalf("OpenEtcd: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return openTest(t, filepath.Join(t.TempDir(), "meta"))
}

func wantErrno(t *testing.T, err error, want syscall.Errno) {
	t.Helper()
	var got syscall.Errno
	if !errors.As(err, &got) || got != want {
		t.Fatalf("error %v, want %v (%d)", err, want, int(want))
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func file(mode uint32) *shedfs.Inode {
	return &shedfs.Inode{Mode: syscall.S_IFREG | mode, Uid: 1000, Gid: 1000}
}
func dir() *shedfs.Inode { return &shedfs.Inode{Mode: syscall.S_IFDIR | 0o755} }

// dirBlobs is a BlobIndex over a directory of files named by inode number.
type dirBlobs struct{ dir string }

func (b dirBlobs) path(ino uint64) string { return filepath.Join(b.dir, strconv.FormatUint(ino, 10)) }

func (b dirBlobs) Each(fn func(uint64, int64) error) error {
	des, err := os.ReadDir(b.dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		ino, err := strconv.ParseUint(de.Name(), 10, 64)
		if err != nil {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		if err := fn(ino, fi.Size()); err != nil {
			return err
		}
	}
	return nil
}

func (b dirBlobs) Remove(ino uint64) error {
	err := os.Remove(b.path(ino))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (b dirBlobs) Truncate(ino uint64, size int64) error {
	f, err := os.OpenFile(b.path(ino), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Truncate(size)
}

// testKeys makes keys of the current layout for tests of the engine and
// cache layers, which never decode them: numbers as they are.
var testKeys = keyCodec{pInode: pInode, pEntry: pEntry}
