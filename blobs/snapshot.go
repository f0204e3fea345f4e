package blobs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A snapshot's files share the live files' blobs by hard link: making one
// costs a link(2) per file, whatever its size, and the blob's link count
// is the reference count that the core's copy-up reads (vfs/cow.go): a
// live blob with more than one link is copied before it is changed, so the
// snapshot's link keeps the old content. A snapshot's links lie under
// snapshots/<id>/ in the blob root, named "<ino>.s": Each skips names that
// are not numbers, so no check takes them for blobs of no inode.

// snapDir is the directory of snapshot id's links.
func (d *Dir) snapDir(id string) string { return filepath.Join(d.root, "snapshots", id) }

// SnapPath is where snapshot id keeps the content file ino had.
func (d *Dir) SnapPath(id string, ino uint64) string {
	return filepath.Join(d.snapDir(id), strconv.FormatUint(ino, 10)+".s")
}

// SnapLink gives snapshot id a link to the blob of ino and returns the
// size it holds then; a file never written (no blob) links nothing and
// holds 0 bytes.
func (d *Dir) SnapLink(id string, ino uint64) (int64, error) {
	if d.remote != nil {
		return 0, fmt.Errorf("snapshot %s: %w", id, ErrRemote)
	}
	if err := os.MkdirAll(d.snapDir(id), 0o700); err != nil {
		return 0, fmt.Errorf("snapshot directory: %w", err)
	}
	to := d.SnapPath(id, ino)
	if err := os.Link(d.Path(ino), to); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("link blob %d into snapshot %s: %w", ino, id, err)
	}
	st, err := os.Stat(to)
	if err != nil {
		return 0, fmt.Errorf("stat snapshot blob: %w", err)
	}
	return st.Size(), nil
}

// SnapOwned returns the size of snapshot id's content of ino and whether
// only the snapshot holds it (its link is the last one): those bytes are
// what deleting the snapshot frees.
func (d *Dir) SnapOwned(id string, ino uint64) (size int64, only bool, err error) {
	st, err := os.Stat(d.SnapPath(id, ino))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("stat snapshot blob: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return st.Size(), ok && sys.Nlink == 1, nil
}

// RemoveSnap removes every link of snapshot id; a blob only it held is
// freed with it.
func (d *Dir) RemoveSnap(id string) error {
	if err := os.RemoveAll(d.snapDir(id)); err != nil {
		return fmt.Errorf("remove snapshot %s blobs: %w", id, err)
	}
	return nil
}

// SnapIDs returns the ids of the snapshots that have links here.
func (d *Dir) SnapIDs() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(d.root, "snapshots"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshot blobs: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// LinkFrom gives inode number to the content file at src (a live blob or
// a snapshot's link) by link(2), as a fork does, and returns the size it
// holds then; src missing (a file never written) links nothing and holds
// 0 bytes. to must have no blob.
func (d *Dir) LinkFrom(src string, to uint64) (int64, error) {
	if d.remote != nil {
		return 0, fmt.Errorf("link %s to blob %d: %w", src, to, ErrRemote)
	}
	if err := d.mkShard(to); err != nil {
		return 0, err
	}
	if err := os.Link(src, d.Path(to)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("link %s to blob %d: %w", src, to, err)
	}
	st, err := os.Stat(d.Path(to))
	if err != nil {
		return 0, fmt.Errorf("stat blob %d: %w", to, err)
	}
	return st.Size(), nil
}

// copySuffix ends the name of a copy-up in progress (vfs/cow.go): the
// copy of a shared blob, renamed over it once whole.
const copySuffix = ".cow"

// CopyPath is where the copy-up of ino's blob is written before it takes
// the blob's place.
func (d *Dir) CopyPath(ino uint64) string { return d.Path(ino) + copySuffix }

// CopyLeftovers lists the copy-ups a crash cut short: copies that never
// took a blob's place, which only waste room (the blob they were made
// of is whole).
func (d *Dir) CopyLeftovers() ([]string, error) {
	var out []string
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && p == filepath.Join(d.root, "snapshots") {
			return filepath.SkipDir
		}
		if !e.IsDir() && strings.HasSuffix(e.Name(), copySuffix) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list copy-up leftovers: %w", err)
	}
	return out, nil
}
