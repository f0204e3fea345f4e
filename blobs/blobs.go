// Package blobs keeps file contents, one blob per regular-file inode, named
// by inode number only. No name a user chose ever becomes a host path, so
// there is nothing to traverse out of. The Store interface is the seam that
// lets an object store replace the local directory later.
package blobs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Blob is an open file content. *os.File satisfies it; the FUSE layer may
// also use an Fd() method, when present, for passthrough, fallocate and
// SEEK_DATA/SEEK_HOLE.
type Blob interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Truncate(size int64) error
	// Sync makes the content durable (fdatasync on a local file).
	Sync() error
}

// Store holds the blobs of one shedfs store.
type Store interface {
	// Open opens the blob of ino for reading and writing, creating an
	// empty one when create is set (ENOENT otherwise if missing).
	Open(ino uint64, create bool) (Blob, error)
	// Remove deletes the blob of ino; a missing blob is not an error.
	Remove(ino uint64) error
	// Truncate sets the blob of ino to size bytes, creating it if missing.
	Truncate(ino uint64, size int64) error
	// Each calls fn for every blob, with its size.
	Each(fn func(ino uint64, size int64) error) error
	// Size returns the size of the blob of ino (ENOENT if missing).
	Size(ino uint64) (int64, error)
}

// Dir is a Store in a local directory: blobs/ab/cd/<ino>, where the shard
// directory ab/cd is chosen by the store's Placement, so no directory of
// directories grows past 256 entries.
type Dir struct {
	root  string
	place Placement
	// made remembers shard directories known to exist, so a create costs
	// one open(2) and not a mkdir each time.
	made sync.Map
	// remote, when set, makes the directory the cache of a bucket
	// (remote.go).
	remote *Remote
}

var _ Store = (*Dir)(nil)

// OpenDir opens (creating if needed) the blob directory root, with the
// shard directories of the inode-number placement.
func OpenDir(root string) (*Dir, error) {
	return OpenDirPlaced(root, Placement{})
}

// OpenDirPlaced opens (creating if needed) the blob directory root, whose
// blobs lie where p puts them: a store's placement is fixed when the store
// is made (metadata.Store.BlobPlacement).
func OpenDirPlaced(root string, p Placement) (*Dir, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("blob directory %s: not a directory", root)
	}
	return &Dir{root: root, place: p}, nil
}

func (d *Dir) shard(ino uint64) string {
	s := d.place.shard(ino)
	return filepath.Join(d.root, hexByte(s>>8), hexByte(s&0xff))
}

// hexByte is b (< 256) as two lower-case hex digits.
func hexByte(b uint16) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4&0xf], digits[b&0xf]})
}

// Path is where the blob of ino lives on the host. It is built from the
// number alone.
func (d *Dir) Path(ino uint64) string {
	return filepath.Join(d.shard(ino), strconv.FormatUint(ino, 10))
}

// Open implements Store.
func (d *Dir) Open(ino uint64, create bool) (Blob, error) {
	return d.OpenFile(ino, create)
}

// OpenFile is Open returning the concrete *os.File, for callers that need
// its descriptor.
func (d *Dir) OpenFile(ino uint64, create bool) (*os.File, error) {
	if d.remote != nil {
		if err := d.remote.opening(ino, create); err != nil {
			return nil, err
		}
		create = false
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
		if err := d.mkShard(ino); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(d.Path(ino), flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open blob %d: %w", ino, err)
	}
	return f, nil
}

func (d *Dir) mkShard(ino uint64) error {
	dir := d.shard(ino)
	if _, ok := d.made.Load(dir); ok {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("blob shard: %w", err)
	}
	d.made.Store(dir, struct{}{})
	return nil
}

// Remove implements Store.
func (d *Dir) Remove(ino uint64) error {
	if d.remote != nil {
		return d.remote.remove(ino)
	}
	err := os.Remove(d.Path(ino))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove blob %d: %w", ino, err)
	}
	return nil
}

// Truncate implements Store.
func (d *Dir) Truncate(ino uint64, size int64) error {
	f, err := d.OpenFile(ino, true)
	if err != nil {
		return err
	}
	defer f.Close()
	done, err := d.Resizing(ino, size)
	if err != nil {
		return err
	}
	defer done()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("truncate blob %d: %w", ino, err)
	}
	return nil
}

// Size implements Store.
func (d *Dir) Size(ino uint64) (int64, error) {
	if d.remote != nil {
		return d.remote.size(ino)
	}
	st, err := os.Stat(d.Path(ino))
	if err != nil {
		return 0, fmt.Errorf("stat blob %d: %w", ino, err)
	}
	return st.Size(), nil
}

// Each implements Store. Files whose names are not inode numbers are
// skipped: only the daemon writes here.
func (d *Dir) Each(fn func(ino uint64, size int64) error) error {
	if d.remote != nil {
		return d.remote.each(fn)
	}
	return filepath.WalkDir(d.root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		ino, perr := strconv.ParseUint(e.Name(), 10, 64)
		if perr != nil {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		return fn(ino, info.Size())
	})
}

// SyncDir makes the creation and removal of blobs durable: it fsyncs the
// blob root and the shard directory of ino.
func (d *Dir) SyncDir(ino uint64) error {
	for _, dir := range []string{d.shard(ino), filepath.Dir(d.shard(ino)), d.root} {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("sync blob dir: %w", err)
		}
		err = unix.Fsync(fd)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("sync blob dir: %w", err)
		}
	}
	return nil
}

// Root is the blob directory, for statfs of the disk that holds it.
func (d *Dir) Root() string { return d.root }
