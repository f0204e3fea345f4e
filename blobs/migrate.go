package blobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/shedfs/shedfs/objstore"
)

// MigrateStats is what Migrate did.
type MigrateStats struct {
	// Blobs is how many blobs the directory holds, Uploaded how many of
	// them this run uploaded (the others were in the bucket already).
	Blobs, Uploaded int
	// Bytes is the bytes of chunks this run uploaded.
	Bytes int64
}

// Migrate copies every blob of the local directory d into bucket b in
// the layout a Remote reads (manifest.go): chunks of chunk bytes, then a
// manifest. A blob's version is its file's modification time, so a run
// cut short and started again finds what it uploaded before under the
// same keys and skips it: a manifest present means the whole version is
// there (it is written after its chunks), a chunk present with its size
// means the bucket took it (every Put is verified against its SHA-256).
// A blob changed between two runs gets a newer version, which is the
// current one. d must not be served meanwhile, nor have snapshots (a
// bucket holds none yet). progress, if not nil, is called after each
// blob.
func Migrate(ctx context.Context, d *Dir, b objstore.Bucket, chunk int64, progress func(MigrateStats)) (MigrateStats, error) {
	var st MigrateStats
	if d.remote != nil {
		return st, errors.New("migrate: the blob directory is already a bucket's cache")
	}
	if ids, err := d.SnapIDs(); err != nil {
		return st, fmt.Errorf("migrate: %w", err)
	} else if len(ids) > 0 {
		return st, fmt.Errorf("migrate: the store has %d snapshots, which a bucket cannot hold yet: remove them first", len(ids))
	}
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	var inos []uint64
	if err := d.Each(func(ino uint64, _ int64) error {
		inos = append(inos, ino)
		return nil
	}); err != nil {
		return st, fmt.Errorf("migrate: list blobs: %w", err)
	}
	st.Blobs = len(inos)
	for _, ino := range inos {
		n, up, err := migrateOne(ctx, d, b, ino, chunk)
		if err != nil {
			return st, fmt.Errorf("migrate: blob %d: %w", ino, err)
		}
		st.Bytes += n
		if up {
			st.Uploaded++
		}
		if progress != nil {
			progress(st)
		}
	}
	return st, nil
}

// migrateOne uploads the blob ino unless the bucket has its version. It
// returns the bytes it uploaded and whether it wrote the manifest.
func migrateOne(ctx context.Context, d *Dir, b objstore.Bucket, ino uint64, chunk int64) (int64, bool, error) {
	f, err := os.Open(d.Path(ino))
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	size := fi.Size()
	ver := uint64(max(1, fi.ModTime().UnixNano()))
	mkey := manifestKey(ino, ver)
	if _, err := b.Stat(ctx, mkey); err == nil {
		return 0, false, nil
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return 0, false, err
	}
	m := &manifest{Size: size, Chunk: chunk, Ver: ver, Keys: make([]string, chunks(size, chunk))}
	buf := make([]byte, min(chunk, size))
	var sent int64
	for i := range int64(len(m.Keys)) {
		p := buf[:min(chunk, size-i*chunk)]
		if _, err := f.ReadAt(p, i*chunk); err != nil && err != io.EOF {
			return sent, false, err
		}
		if allZero(p) {
			continue // a hole, as the Remote leaves it
		}
		key := chunkKey(ino, ver, i)
		m.Keys[i] = key
		if info, err := b.Stat(ctx, key); err == nil && info.Size == int64(len(p)) {
			continue
		}
		if err := putVerified(ctx, b, key, p); err != nil {
			return sent, false, err
		}
		sent += int64(len(p))
	}
	if err := putVerified(ctx, b, mkey, encodeManifest(m)); err != nil {
		return sent, false, err
	}
	return sent, true, nil
}
