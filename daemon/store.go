// Package daemon is the process-level life of one shedfs store: opening it
// (and repairing it after an unclean stop), mounting and unmounting views,
// and answering the admin API. It exists because this wiring belongs to
// neither the callback path (fusefs) nor the command line, which only
// parses flags and prints.
package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/objstore"
	"github.com/shedfs/shedfs/space"
)

// Store is an opened store: its metadata and its blobs, and the guard of
// its disk.
type Store struct {
	// Dir is the store directory of an embedded store, "" on etcd.
	Dir string
	// Where is where its parts live.
	Where Location
	Meta  *metadata.Store
	Blobs *blobs.Dir
	// BucketMetrics counts the traffic of the bucket that holds the
	// contents; nil for a blob directory.
	BucketMetrics *objstore.Metrics
	// Space admits growth by the free space of the store's disk; nil when
	// the store is open read-only.
	Space *space.Guard
	// Recovery is the repair report when the previous stop was unclean,
	// nil otherwise.
	Recovery *metadata.Report
	// Created: this open initialised the store (OpenOptions.Create and
	// the location held none).
	Created bool
}

// OpenOptions tunes OpenStore.
type OpenOptions struct {
	// Create initialises a store when the location holds none (shedfs
	// init, serve and mount --init). Without it such a location is a
	// *NoStoreError, and nothing is written there: a mistyped --store
	// must not become a new, empty store.
	Create bool
	// NoRecover skips the automatic repair after an unclean stop (fsck
	// does its own).
	NoRecover bool
	// ReadOnly opens the store without changing anything, dirty marker
	// included (fsck --dry-run, and reading commands on a full disk): no
	// repair, no reclaiming of orphans, and a store left by an unclean
	// stop still looks unclean to the next open, which then repairs it.
	ReadOnly bool
	Logger   *slog.Logger
}

// OpenStore opens the embedded store in dir (see Open).
func OpenStore(dir string, opts OpenOptions) (*Store, error) {
	return Open(Location{Dir: dir}, opts)
}

// Open opens the store at loc. After an unclean stop it checks and
// repairs the store before returning, and logs what it fixed.
func Open(loc Location, opts OpenOptions) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := loc.Check(); err != nil {
		return nil, err
	}
	if loc.Meta != "" {
		return openEtcd(loc, opts, log)
	}
	dir := loc.Dir
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && opts.Create:
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create store: %w", err)
		}
	case errors.Is(err, fs.ErrNotExist):
		return nil, &NoStoreError{Where: loc, Missing: true}
	case err != nil:
		return nil, fmt.Errorf("store %s: %w", dir, err)
	case !st.IsDir():
		return nil, fmt.Errorf("store %s is not a directory", dir)
	}
	metaDir := filepath.Join(dir, "meta")
	// Before anything is written (the disk guard's reserve file, badger's
	// files): a directory without meta/ holds no store.
	if _, err := os.Stat(metaDir); errors.Is(err, fs.ErrNotExist) && !opts.Create {
		return nil, &NoStoreError{Where: loc}
	}
	if opts.ReadOnly {
		return openReadOnly(loc, dir, log)
	}
	// Before the metadata: opening it for writing needs room on the
	// disk, which the guard makes by releasing the reserve.
	guard, err := space.Open(dir, space.Options{
		Headroom: func() int64 { return metadata.Headroom(metaDir) },
		Logger:   log,
	})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	meta, err := metadata.Open(metaDir, metadata.Options{Logger: log, MustExist: !opts.Create})
	if errors.Is(err, metadata.ErrNoStore) {
		return nil, &NoStoreError{Where: loc}
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	bl, bm, err := openBlobs(loc, loc.BlobDir(), meta, false, log)
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	s := &Store{Dir: dir, Where: loc, Meta: meta, Blobs: bl, BucketMetrics: bm, Space: guard, Created: meta.Created()}
	return s.recover(opts, log)
}

// openEtcd opens a store whose metadata is on etcd. Its disk guard
// watches the blob directory's filesystem; no metadata lives there, so it
// needs no headroom for it.
func openEtcd(loc Location, opts OpenOptions, log *slog.Logger) (*Store, error) {
	meta, err := metadata.OpenEtcd(loc.Etcd, metadata.Options{Logger: log, ReadOnly: opts.ReadOnly, MustExist: !opts.Create})
	if errors.Is(err, metadata.ErrNoStore) {
		return nil, &NoStoreError{Where: loc}
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	if opts.Create {
		if err := os.MkdirAll(loc.BlobDir(), 0o700); err != nil {
			meta.Close()
			return nil, fmt.Errorf("store %s: blobs: %w", loc, err)
		}
	}
	bl, bm, err := openBlobs(loc, loc.BlobDir(), meta, opts.ReadOnly, log)
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	s := &Store{Where: loc, Meta: meta, Blobs: bl, BucketMetrics: bm, Created: meta.Created()}
	if opts.ReadOnly {
		return s, nil
	}
	if s.Space, err = space.Open(loc.BlobDir(), space.Options{
		Headroom: func() int64 { return 0 },
		Logger:   log,
	}); err != nil {
		meta.Close()
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	return s.recover(opts, log)
}

// recover repairs the store after an unclean stop and reclaims inodes
// unlinked while open when the last process stopped.
func (s *Store) recover(opts OpenOptions, log *slog.Logger) (*Store, error) {
	meta, bl, dir := s.Meta, s.Blobs, s.Where.String()
	peers, err := meta.Peers()
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("recover store %s: %w", dir, err)
	}
	if len(peers) > 0 && !meta.WasClean() {
		// The others keep serving: a repair now would race them. The
		// transactions of a store on etcd leave it whole; what a dead
		// daemon held goes with its lease (reclaimOrphans).
		log.Warn("store was not closed cleanly, but other daemons serve it; skipping the recovery check (run shedfs fsck when all are stopped)",
			"store", dir, "daemons", peers)
	} else if !meta.WasClean() && !opts.NoRecover {
		log.Warn("store was not closed cleanly; checking it", "store", dir)
		rep, err := meta.Check(bl, true, nil)
		if err != nil {
			meta.Close()
			return nil, fmt.Errorf("recover store %s: %w", dir, err)
		}
		for _, p := range rep.Problems {
			log.Warn("recovery", "kind", p.Kind, "ino", p.Ino, "detail", p.Detail, "repaired", p.Repaired)
		}
		log.Info("recovery done", "problems", len(rep.Problems), "unrepaired", rep.Unrepaired(), "took", rep.Duration)
		s.Recovery = rep
	}
	if err := s.reclaimOrphans(log); err != nil {
		meta.Close()
		return nil, err
	}
	return s, nil
}

// NoStoreError is the open of a location that holds no store, without
// OpenOptions.Create. It says how to create one; errors.Is matches it with
// metadata.ErrNoStore.
type NoStoreError struct {
	Where Location
	// Missing: the store directory does not exist at all.
	Missing bool
}

func (e *NoStoreError) Error() string {
	what := fmt.Sprintf("%s holds no shedfs store", e.Where)
	if e.Missing {
		what = fmt.Sprintf("store %s does not exist", e.Where)
	}
	return what + " (create one with: " + e.Where.InitCommand() + ")"
}

func (e *NoStoreError) Unwrap() error { return metadata.ErrNoStore }

// openReadOnly opens an existing store for inspection only.
func openReadOnly(loc Location, dir string, log *slog.Logger) (*Store, error) {
	blobDir := filepath.Join(dir, "blobs")
	if fi, err := os.Stat(blobDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("store %s has no blobs directory", dir)
	}
	meta, err := metadata.Open(filepath.Join(dir, "meta"), metadata.Options{Logger: log, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	bl, _, err := openBlobs(loc, blobDir, meta, true, log)
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	return &Store{Dir: dir, Where: loc, Meta: meta, Blobs: bl}, nil
}

// Location is where the store's parts live (a Store made by hand with
// only Dir is an embedded store there).
func (s *Store) Location() Location {
	if s.Where.Dir == "" && s.Where.Meta == "" {
		return Location{Dir: s.Dir}
	}
	return s.Where
}

// Close closes the metadata, marking the stop clean (unless read-only).
func (s *Store) Close() error {
	if s.Space != nil {
		s.Space.Close()
	}
	if r := s.Blobs.Remote(); r != nil {
		r.Close()
	}
	if err := s.Meta.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.Location(), err)
	}
	return nil
}

// reclaimOrphans deletes inodes that were unlinked while open when the
// previous process stopped: nothing can hold them open any more. On a
// store shared by several daemons it leaves those a live daemon holds open
// (their open markers), and runs again whenever another daemon stops or
// dies (FollowDepartures).
func (s *Store) reclaimOrphans(log *slog.Logger) error {
	orphans, err := s.Meta.Orphans()
	if err != nil {
		return fmt.Errorf("list orphans: %w", err)
	}
	for _, ino := range orphans {
		n, err := s.Meta.Reclaim(ino)
		if errors.Is(err, metadata.ErrHeld) || errors.Is(err, syscall.ENOENT) {
			continue // held open by a daemon sharing the store, or gone already
		}
		if err != nil {
			return fmt.Errorf("reclaim orphan %d: %w", ino, err)
		}
		if n.IsRegular() {
			if err := s.Blobs.Remove(ino); err != nil {
				return fmt.Errorf("reclaim orphan %d: %w", ino, err)
			}
		}
		log.Info("reclaimed inode unlinked while open", "ino", ino)
	}
	return nil
}
