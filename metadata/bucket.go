package metadata

import (
	"errors"
	"fmt"
)

// BlobBucket is the address of the bucket that holds the store's file
// contents (s3://BUCKET/PREFIX?endpoint=&region=, no credentials), as
// recorded when the store was made there or moved there; "" when they are
// in a directory. A daemon checks it at open, so that a store whose
// contents are in a bucket is never served from its cache alone, nor a
// store of local blobs from a bucket.
func (s *Store) BlobBucket() (string, error) {
	var url string
	err := s.kv.View(func(tx Txn) error {
		v, err := tx.Get(stateKey(stateBlobBucket))
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		url = string(v)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read blob bucket: %w", err)
	}
	return url, nil
}

// SetBlobBucket records url as the bucket of the store's contents (""
// for a directory).
func (s *Store) SetBlobBucket(url string) error {
	err := s.update(func(o *op) error {
		if url == "" {
			return o.tx.Delete(stateKey(stateBlobBucket))
		}
		return o.tx.Set(stateKey(stateBlobBucket), []byte(url))
	})
	if err != nil {
		return fmt.Errorf("record blob bucket: %w", err)
	}
	return nil
}
