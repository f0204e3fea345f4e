// Package objstore is the seam to an S3-compatible bucket. This file is
// only the declaration the blob cache is written against; the package
// itself comes from the s3bucket branch, which replaces this file.
package objstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// Info describes one object.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// ErrNotFound is returned (wrapped) for a key the bucket does not hold.
var ErrNotFound = errors.New("object not found")

// Bucket is one bucket under a prefix.
type Bucket interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, sum []byte) error
	Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	Stat(ctx context.Context, key string) (Info, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix string, fn func(Info) error) error
}
