package vfs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Snapshots share the live files' blobs by hard link (blobs/snapshot.go):
// a blob with more than one link is shared, and the first change to it
// through any door copies it first (copy-up), here in the core, on the
// resize path every write, truncate and fallocate takes. An open file
// carries a cow mark that says its blob may be shared: set at the first
// open when the blob has other links, and by Freeze when a snapshot links
// the blob of a file already open. Without the mark a write costs nothing
// more; with it, one fstat, and the copy when the blob is still shared.

// Freeze runs link, which links the blob of ino into a snapshot, so that
// no handle changes the shared blob afterwards: under the open-file
// table's lock (a first open then either sees the new link or is seen
// here), and marking an open file for copy-up. It reports whether the file
// was open in a view: the snapshot holds its content as last written to
// the store's blob, not what a writer's kernel still buffers.
func (c *Core) Freeze(ino uint64, link func() error) (open bool, err error) {
	c.ft.mu.Lock()
	defer c.ft.mu.Unlock()
	err = link()
	if oi := c.ft.open[ino]; oi != nil {
		// After the link: a copy-up that ran before it found the blob
		// unshared, and the mark makes the next change look again.
		oi.cow.Store(true)
		open = true
	}
	return open, err
}

// sharedBlob reports whether blob has links besides the live one.
func sharedBlob(blob *os.File) bool {
	var st unix.Stat_t
	if err := unix.Fstat(int(blob.Fd()), &st); err != nil {
		return true // unknown: the copy-up decides again
	}
	return st.Nlink > 1
}

// needsCopyUp reports whether oi's blob is shared and must be copied
// before it changes. oi.mu must be held.
func (c *Core) needsCopyUp(oi *openFile) bool {
	if !oi.cow.Load() {
		return false
	}
	if !sharedBlob(oi.blob) {
		oi.cow.Store(false)
		return false
	}
	return true
}

// copyUpLocked copies oi's shared blob and charges the old content, now
// only the snapshots', to the holder (metadata.Store.AddSnapshotHeld);
// for a file of a fork group, to whom it is left to (cow_fork.go). oi.mu
// and the holder's admission lock must be held.
func (c *Core) copyUpLocked(oi *openFile, charge int64, group []uint64) error {
	size, before := oi.size, len(oi.retired)
	if err := c.unshareLocked(oi); err != nil {
		return err
	}
	if len(group) > 0 && len(oi.retired) > before {
		c.chargeLeft(oi.ino, oi.retired[len(oi.retired)-1], group, size)
		return nil
	}
	if charge == 0 {
		return nil
	}
	if err := c.store.AddSnapshotHeld(oi.holder, charge, false); err != nil {
		// The copy stands; the next recount of the holder's
		// snapshots (any snapshot command) sets the figure right.
		c.log.Error("charge snapshot bytes", "holder", oi.holder, "err", err)
	}
	return nil
}

// unshareLocked gives an open file whose blob is shared a blob of its own
// before it is changed: a clone (FICLONE) where the host filesystem can,
// else a copy, put in the live blob's place by rename, so the snapshots'
// links keep the old content. Handles then use the new descriptor; the old
// one stays open until the last release (splicing readers). oi.mu must be
// held.
func (c *Core) unshareLocked(oi *openFile) error {
	if !oi.cow.Load() {
		return nil
	}
	if !sharedBlob(oi.blob) {
		oi.cow.Store(false)
		return nil
	}
	path, tmp := c.blobs.Path(oi.ino), c.blobs.CopyPath(oi.ino)
	dst, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("copy-up of blob %d: %w", oi.ino, err)
	}
	if err := cloneOrCopy(dst, oi.blob); err != nil {
		dst.Close()
		os.Remove(tmp)
		return fmt.Errorf("copy-up of blob %d: %w", oi.ino, err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		os.Remove(tmp)
		return fmt.Errorf("copy-up of blob %d: %w", oi.ino, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		dst.Close()
		os.Remove(tmp)
		return fmt.Errorf("copy-up of blob %d: %w", oi.ino, err)
	}
	oi.retired = append(oi.retired, oi.blob)
	oi.blob = dst
	oi.cow.Store(false)
	return nil
}

// cloneOrCopy makes dst hold src's content: FICLONE shares the extents
// (instant, on btrfs or XFS), else copy_file_range copies them in the
// kernel, holes skipped.
func cloneOrCopy(dst, src *os.File) error {
	if err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())); err == nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return err
	}
	size := st.Size
	if err := dst.Truncate(size); err != nil {
		return err
	}
	off := int64(0)
	for off < size {
		data, err := unix.Seek(int(src.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			data = off // no SEEK_DATA: copy everything
		}
		hole, err := unix.Seek(int(src.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			hole = size
		}
		for data < hole {
			in, out := data, data
			n, err := unix.CopyFileRange(int(src.Fd()), &in, int(dst.Fd()), &out, int(hole-data), 0)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("copy stopped short at %d of %d", data, size)
			}
			data += int64(n)
		}
		off = hole
	}
	return nil
}
