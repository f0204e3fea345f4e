package daemon

import (
	"fmt"

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
)

// openBlobs opens the blob directory with the placement the store was made
// with, so that every path to a blob (the callbacks, content, fsck, the
// trash, sessions, links) goes through the one placement of this store.
func openBlobs(dir string, meta *metadata.Store) (*blobs.Dir, error) {
	order, err := meta.BlobOrder()
	if err != nil {
		return nil, fmt.Errorf("blobs: %w", err)
	}
	return blobs.OpenDirPlaced(dir, blobs.Placement{Order: order})
}
