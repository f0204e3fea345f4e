package metadata

import (
	"errors"
	"fmt"
)

// Blob layouts, recorded in 'S' "bloblayout" when a store is made: where a
// store's blobs lie on the host is fixed for its life, so a store made by
// an older shedfs (no record) keeps placing blobs by inode number.
const (
	// blobLayoutIno spreads blobs by the low bytes of the inode number.
	blobLayoutIno byte = 1
	// blobLayoutOrder places blobs by allocation order (blobs.Placement).
	blobLayoutOrder byte = 2
)

// BlobOrder is the store's blob placement: nil for a store that places
// blobs by inode number, else the function that maps an inode number back
// to its allocation counter value, from which blobs.Placement derives the
// shard directory. It reads the layout recorded when the store was made.
func (s *Store) BlobOrder() (func(ino uint64) (uint64, bool), error) {
	layout := blobLayoutIno
	err := s.kv.View(func(tx Txn) error {
		v, err := tx.Get(stateKey(stateBlobLayout))
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		case len(v) != 1:
			return fmt.Errorf("blob layout record of %d bytes: %w", len(v), ErrCorrupt)
		}
		layout = v[0]
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read blob layout: %w", err)
	}
	switch layout {
	case blobLayoutIno:
		return nil, nil
	case blobLayoutOrder:
		if s.inos == nil {
			return nil, fmt.Errorf("blob layout by allocation order without an inode number key: %w", ErrCorrupt)
		}
		return s.inos.counter, nil
	}
	return nil, fmt.Errorf("blob layout %d: unknown to this shedfs: %w", layout, ErrSchema)
}
