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
	bl, err := blobs.OpenDirPlaced(dir, blobs.Placement{Order: order})
	if err != nil {
		return nil, nil, err
	}
	return openBucket(loc, bl, readOnly, log)
}
