package metadata

// This file is the contract between the store and its callers (fusefs, the
// command line, fsck). Bodies live in the other files of the package.

import (
	"errors"
	"log/slog"
	"time"

	"github.com/shedfs/shedfs"
)

// Errors callers match with errors.Is. Namespace errors are syscall.Errno
// values (ENOENT, EEXIST, ENOTEMPTY, ...) so the FUSE layer can hand them to
// the kernel unchanged; these are the store-level conditions that have no
// errno of their own.
var (
	// ErrLocked means another process holds the store open.
	ErrLocked = errors.New("store is locked by another process")
	// ErrSchema means the store was written by an incompatible version.
	ErrSchema = errors.New("unknown store schema version")
	// ErrCorrupt means the metadata cannot be read.
	ErrCorrupt = errors.New("metadata is corrupt")
	// ErrNoStore means the location holds no store and the open was not
	// asked to create one (Options.MustExist).
	ErrNoStore = errors.New("no shedfs store")
)

// Options tunes Open.
type Options struct {
	// ReadOnly opens the store without writing anything, not even the
	// dirty marker (for inspection while no daemon runs, fsck --dry-run).
	// A store left by an unclean stop is read from a private snapshot of
	// meta/ (see snapshot.go), since badger must replay its log first.
	ReadOnly bool
	// Logger receives what the store repairs and notices; nil discards.
	Logger *slog.Logger
	// InMemory keeps badger in memory (tests only); dir is then ignored.
	InMemory bool
	// MustExist refuses to initialise a store: a location that holds none
	// (a missing or empty directory, an empty etcd prefix) is ErrNoStore
	// and is left as it was. Only an explicit initialisation (shedfs init,
	// serve or mount --init) creates a store, so that a mistyped location
	// never silently becomes a new, empty one.
	MustExist bool
}

// BlobIndex is what fsck needs to know about file contents, kept as an
// interface so the metadata package never touches blob files itself.
type BlobIndex interface {
	// Each calls fn for every blob that exists, with its size in bytes.
	Each(fn func(ino uint64, size int64) error) error
	// Remove deletes the blob of ino; a missing blob is not an error.
	Remove(ino uint64) error
	// Truncate sets the blob of ino to size bytes, creating it if missing.
	Truncate(ino uint64, size int64) error
}

// Problem is one inconsistency fsck found.
type Problem struct {
	Kind     ProblemKind // what is wrong; check.go lists the kinds
	Ino      uint64
	Detail   string
	Repaired bool
}

// Report is what one fsck run found and did.
type Report struct {
	Started  time.Time
	Duration time.Duration
	Inodes   int
	Entries  int
	Blobs    int
	Problems []Problem
}

// Unrepaired counts the problems that are still there.
func (r *Report) Unrepaired() int {
	n := 0
	for _, p := range r.Problems {
		if !p.Repaired {
			n++
		}
	}
	return n
}

// CheckRecord is the summary of the last fsck, kept in the store.
type CheckRecord struct {
	At         time.Time
	Problems   int
	Unrepaired int
}

// RenameFlags mirror the kernel's renameat2 flags.
const (
	RenameNoReplace uint32 = 1 << 0 // RENAME_NOREPLACE
	RenameExchange  uint32 = 1 << 1 // RENAME_EXCHANGE
)

// Xattr flags mirror setxattr(2).
const (
	XattrCreate  = 1 // XATTR_CREATE
	XattrReplace = 2 // XATTR_REPLACE
)

// Limits on names and extended attributes, as on ext4 and in the kernel.
const (
	MaxNameLen       = shedfs.MaxNameLen
	MaxXattrNameLen  = shedfs.MaxXattrNameLen
	MaxXattrValueLen = shedfs.MaxXattrValueLen
)
