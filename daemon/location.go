package daemon

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/shedfs/shedfs/metadata"
)

// Location says where the parts of a store live. An embedded store is one
// directory (meta/, blobs/, the admin socket); a store whose metadata is
// on an etcd cluster has no directory of its own: its blobs are in a
// directory every host shares, and each daemon's admin socket is where
// its operator puts it.
type Location struct {
	// Dir is the store directory of an embedded store.
	Dir string
	// Meta is the metadata URL (etcd://h1:2379,h2:2379/prefix) of a store
	// on etcd; empty for an embedded store.
	Meta string
	// Etcd is Meta parsed, with TLS, credentials and the request timeout
	// added by the caller.
	Etcd metadata.EtcdConfig
	// Blobs is the blob directory; empty means Dir/blobs.
	Blobs string
	// Bucket is the URL of the bucket that holds the contents
	// (s3://BUCKET/PREFIX?endpoint=&region=), "" when a directory does;
	// the blob directory is then its local cache (Cache).
	Bucket string
	// Cache is the cache directory of a bucket; empty means Dir/blobs.
	Cache Cache
	// Socket is the admin socket; empty means Dir/admin.sock, and no
	// admin socket at all for a store on etcd.
	Socket string
}

// String names the store in logs and messages.
func (l Location) String() string {
	if l.Meta != "" {
		return l.Meta
	}
	return l.Dir
}

// Cache is how a bucket's contents are cached on this host.
type Cache struct {
	// Dir is the cache directory; empty means the store's Dir/blobs.
	Dir string
	// Size is the bytes the cache keeps (DefaultCacheSize if 0).
	Size int64
	// Timeout bounds a wait for the bucket (DefaultBlobTimeout if 0).
	Timeout time.Duration
}

// DefaultCacheSize and DefaultBlobTimeout are a bucket cache's size and
// wait when none is given.
const (
	DefaultCacheSize   = 10 << 30
	DefaultBlobTimeout = 30 * time.Second
)

// BlobDir is the directory of the store's blobs: a bucket's cache when
// the contents are in a bucket.
func (l Location) BlobDir() string {
	if l.Bucket != "" && l.Cache.Dir != "" {
		return l.Cache.Dir
	}
	if l.Blobs != "" {
		return l.Blobs
	}
	return filepath.Join(l.Dir, "blobs")
}

// StateDir is where files the daemon keeps beside the metadata live (the
// link signing key): the store directory, or for a store on etcd the blob
// directory, which every host shares.
func (l Location) StateDir() string {
	if l.Meta != "" {
		return l.BlobDir()
	}
	return l.Dir
}

// SocketPath is the admin socket of the store, "" when it has none.
func (l Location) SocketPath() string {
	if l.Socket != "" {
		return l.Socket
	}
	if l.Meta != "" {
		return ""
	}
	return SocketPath(l.Dir)
}

// InitCommand is the command line that creates a store at l.
func (l Location) InitCommand() string {
	if l.Meta != "" && l.Bucket != "" {
		return "shedfs init --meta " + l.Meta + " --blobs " + l.Bucket + " --cache " + l.BlobDir()
	}
	if l.Meta != "" {
		return "shedfs init --meta " + l.Meta + " --blobs " + l.BlobDir()
	}
	return "shedfs init --store " + l.Dir
}

// Check refuses a Location that names no store or two.
func (l Location) Check() error {
	switch {
	case l.Meta != "" && l.Dir != "":
		return errors.New("give --store DIR or --meta URL, not both")
	case l.Meta != "" && l.Bucket != "" && l.Cache.Dir == "":
		return errors.New("--meta with --blobs s3://... needs --cache DIR: this host's cache of the bucket")
	case l.Meta != "" && l.Blobs == "" && l.Bucket == "":
		return errors.New("--meta needs --blobs DIR or s3://...: where the file contents live, shared by every host")
	case l.Bucket != "" && l.Blobs != "":
		return errors.New("give --blobs DIR or --blobs s3://..., not both")
	case l.Meta == "" && l.Dir == "":
		return errors.New("no store given: use --store DIR or set SHEDFS_STORE (or --meta URL with --blobs DIR)")
	case l.Meta != "" && len(l.Etcd.Endpoints) == 0:
		return fmt.Errorf("metadata URL %s: not parsed", l.Meta)
	}
	return nil
}
