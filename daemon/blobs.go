package daemon

import (
	"fmt"
	"log/slog"

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/objstore"
)

// openBlobs opens the blob directory with the placement the store was made
// with, so that every path to a blob (the callbacks, content, fsck, the
// trash, sessions, links) goes through the one placement of this store.
// With the contents in a bucket, the directory is its cache (openBucket).
func openBlobs(loc Location, dir string, meta *metadata.Store, readOnly bool, log *slog.Logger) (*blobs.Dir, *objstore.Metrics, error) {
	order, err := meta.BlobOrder()
	if err != nil {
		return nil, nil, fmt.Errorf("blobs: %w", err)
	}
	if err := checkBucket(loc, meta, readOnly); err != nil {
		return nil, nil, err
	}
	bl, err := blobs.OpenDirPlaced(dir, blobs.Placement{Order: order})
	if err != nil {
		return nil, nil, err
	}
	return openBucket(loc, bl, readOnly, log)
}

// checkBucket holds a store to where its contents are: a store made on a
// bucket records it, and is opened only with that bucket, so that it is
// never served from a cache alone (files the cache lacks would read as
// empty, and writes would never be uploaded), nor a store of local blobs
// from a bucket. Hosts may reach the bucket by other endpoints; the bucket
// and prefix must be the recorded ones.
func checkBucket(loc Location, meta *metadata.Store, readOnly bool) error {
	recorded, err := meta.BlobBucket()
	if err != nil {
		return err
	}
	if loc.Bucket == "" {
		if recorded != "" {
			return fmt.Errorf("the store's file contents are in the bucket %s: give --blobs '%s' (or SHEDFS_BLOBS) and a --cache", recorded, recorded)
		}
		return nil
	}
	want, err := objstore.ParseURL(loc.Bucket)
	if err != nil {
		return err
	}
	if recorded == "" {
		if meta.Created() && !readOnly {
			return meta.SetBlobBucket(loc.Bucket)
		}
		dir := loc.Dir
		if dir == "" {
			dir = "STORE"
		}
		return fmt.Errorf("the store keeps its file contents in a directory, not in a bucket: move them there with shedfs migrate --from %s --blobs-to '%s'", dir, loc.Bucket)
	}
	have, err := objstore.ParseURL(recorded)
	if err != nil {
		return fmt.Errorf("the store's recorded bucket: %w", err)
	}
	if have.Bucket != want.Bucket || have.Prefix != want.Prefix {
		return fmt.Errorf("the store's file contents are in the bucket %s, not %s", recorded, loc.Bucket)
	}
	return nil
}
