package daemon

import (
	"errors"
	"fmt"
	"path/filepath"

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

// BlobDir is the directory of the store's blobs.
func (l Location) BlobDir() string {
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
	case l.Meta != "" && l.Blobs == "":
		return errors.New("--meta needs --blobs DIR: the directory of the file contents, shared by every host")
	case l.Meta == "" && l.Dir == "":
		return errors.New("no store given: use --store DIR or set SHEDFS_STORE (or --meta URL with --blobs DIR)")
	case l.Meta != "" && len(l.Etcd.Endpoints) == 0:
		return fmt.Errorf("metadata URL %s: not parsed", l.Meta)
	}
	return nil
}
