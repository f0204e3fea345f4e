package blobs

import (
	"fmt"
	"io"
	"os"
)

// The methods here are what the core tells the blob store around its own
// reads and writes of a blob's *os.File, so that a Dir that caches a
// bucket (Remote) has the bytes there before they are read or changed,
// and knows what to upload. On a plain directory they do nothing.

func nothing() {}

// Remote is the bucket this directory caches, nil for a plain directory.
func (d *Dir) Remote() *Remote { return d.remote }

// OpenFresh is OpenFile(ino, true) for an inode just made: on a bucket's
// cache it skips looking for a version the bucket cannot have.
func (d *Dir) OpenFresh(ino uint64) (*os.File, error) {
	if d.remote != nil {
		if _, err := d.remote.entry(ino, true, true); err != nil {
			return nil, err
		}
	}
	return d.OpenFile(ino, true)
}

// cachedOf is the cache state of ino on a bucket's cache.
func (d *Dir) cachedOf(ino uint64) (*cached, error) {
	return d.remote.entry(ino, true, false)
}

// Reading makes n bytes at off of ino's blob readable from its file, and
// keeps them there until done.
func (d *Dir) Reading(ino uint64, off, n int64) (done func(), err error) {
	if d.remote == nil {
		return nothing, nil
	}
	e, err := d.cachedOf(ino)
	if err != nil {
		return nil, err
	}
	e.use.RLock()
	if err := d.remote.fill(e, off, n, false); err != nil {
		e.use.RUnlock()
		return nil, err
	}
	return func() {
		if n > 0 {
			d.remote.unpin(e, off/e.chunk, (off+n-1)/e.chunk)
		}
		e.use.RUnlock()
	}, nil
}

// Changing prepares a write of n bytes at off to ino's blob (also a
// fallocate's range): the caller writes its file, then calls done.
func (d *Dir) Changing(ino uint64, off, n int64) (done func(), err error) {
	if d.remote == nil {
		return nothing, nil
	}
	e, err := d.cachedOf(ino)
	if err != nil {
		return nil, err
	}
	return d.remote.changing(e, off, n)
}

// Resizing prepares a truncate of ino's blob to size: the caller
// truncates its file, then calls done.
func (d *Dir) Resizing(ino uint64, size int64) (done func(), err error) {
	if d.remote == nil {
		return nothing, nil
	}
	e, err := d.cachedOf(ino)
	if err != nil {
		return nil, err
	}
	return d.remote.resizing(e, size)
}

// Flushed tells the store that a descriptor of ino was closed.
func (d *Dir) Flushed(ino uint64) {
	if d.remote != nil {
		d.remote.Flushed(ino)
	}
}

// Closed tells the store that the last handle of ino closed.
func (d *Dir) Closed(ino uint64) {
	if d.remote != nil {
		d.remote.Closed(ino)
	}
}

// Durable returns once ino's content is as durable as the store makes
// contents: in the bucket, for a bucket's cache (the local file's own
// fdatasync is the caller's).
func (d *Dir) Durable(ino uint64) error {
	if d.remote == nil {
		return nil
	}
	if err := d.remote.Sync(ino); err != nil {
		return fmt.Errorf("blob %d: %w", ino, err)
	}
	return nil
}

// Reader reads a blob through the cache, fetching what a bucket's cache
// lacks as it goes: for the readers of whole contents (digests, scans,
// links) that do not go through a view's handle.
type Reader struct {
	d         *Dir
	ino       uint64
	f         *os.File
	off, size int64
}

// OpenReader opens ino's blob for reading; a blob that does not exist
// is an error satisfying errors.Is(err, fs.ErrNotExist).
func (d *Dir) OpenReader(ino uint64) (*Reader, error) {
	f, err := d.OpenFile(ino, false)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat blob %d: %w", ino, err)
	}
	return &Reader{d: d, ino: ino, f: f, size: st.Size()}, nil
}

// Size is the blob's length when it was opened.
func (r *Reader) Size() int64 { return r.size }

// ReadAt implements io.ReaderAt.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	done, err := r.d.Reading(r.ino, off, min(int64(len(p)), r.size-off))
	if err != nil {
		return 0, err
	}
	defer done()
	return r.f.ReadAt(p, off)
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek implements io.Seeker.
func (r *Reader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += r.off
	case io.SeekEnd:
		off += r.size
	}
	if off < 0 {
		return 0, fmt.Errorf("seek blob %d: negative offset", r.ino)
	}
	r.off = off
	return off, nil
}

// Close implements io.Closer.
func (r *Reader) Close() error { return r.f.Close() }
