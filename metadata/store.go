package metadata

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// FirstIno is the first value of the inode allocation counter, and the
// lowest inode number the store assigns (inos.go: numbers are the counter
// permuted, or, in stores made before, the counter itself). Numbers below
// it are never used, so a view can give its synthetic directories numbers
// of their own; FUSE reserves node ID 1 for the root.
const FirstIno = 1024

// inoLeaseSize is how many counter values one persisted lease hands out
// from memory, so that creates never contend on a single counter key.
// Values of a lease not used before a crash are simply skipped.
const inoLeaseSize = 1024

// Store is the metadata of one shedfs store: the namespace, principals,
// quotas and usage. It is safe for concurrent use; every multi-key change is
// one transaction, retried on conflict.
type Store struct {
	kv       KV
	log      *slog.Logger
	readOnly bool
	wasClean bool
	// created: this open initialised the store (Created).
	created   bool
	shareRoot uint64

	// auditSeq tells apart audit records of the same nanosecond (and
	// orders those of one batch, which share a time). It starts at a
	// random number in its lower half, so that daemons sharing a store (which
	// do not coordinate it) practically never pick the same key.
	auditSeq atomic.Uint32
	// host names this daemon in the audit records it writes to a store
	// shared with other daemons; empty on an embedded store.
	host string
	// trashClock is the time of the last trash record, unix nanos: each
	// new one is later, so names made from the times never collide.
	trashClock atomic.Int64
	// commits counts read-write transactions committed (commits.go).
	commits atomic.Uint64
	// trash counts what each holder's trash holds (trashtally.go).
	trash trashTally

	inoMu   sync.Mutex
	inoNext uint64 // next counter value of the current lease
	inoEnd  uint64
	inos    *inoPerm // nil only for a read-only open of a store without a key
	// keys makes the keys of inode records and entries (layout.go); set
	// by the open, before any other use.
	keys keyCodec
	// halfMigrated: a read-only open found a layout migration cut short
	// (layout.go); Check reports it.
	halfMigrated bool

	// follow hands the changes of other daemons on (feed.go).
	follow follower

	// closeSteps, set by tests, makes CloseSession take the stepped path
	// (as for a tree too big for one transaction) with steps of that many
	// inodes; closeStop, set by tests, runs between its first and second
	// step and ends the close with its error, as a crash would there.
	closeSteps int
	closeStop  func() error

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if empty) the metadata store in dir (the store's
// meta/ directory). A fresh store gets the schema version record and the
// share root. Open fails with ErrLocked when another process holds it, with
// ErrSchema for an unknown schema version, ErrCorrupt when badger cannot
// read it. Unless ReadOnly, it marks the store dirty until Close, so that
// WasClean tells the next Open whether the last stop was clean.
func Open(dir string, opts Options) (*Store, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if !opts.InMemory {
		fi, err := os.Stat(dir)
		switch {
		case err == nil && !fi.IsDir():
			return nil, fmt.Errorf("open store %s: exists and is not a directory: %w", dir, syscall.ENOTDIR)
		case errors.Is(err, os.ErrNotExist) && opts.MustExist:
			return nil, fmt.Errorf("open store %s: %w", dir, ErrNoStore)
		case errors.Is(err, os.ErrNotExist) && !opts.ReadOnly:
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("open store: %w", err)
			}
		case err != nil:
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	kv, err := openBadger(dir, opts.InMemory, opts.ReadOnly, logger)
	if errors.Is(err, errNeedsReplay) {
		kv, err = openSnapshot(dir, logger)
	}
	if err != nil {
		return nil, err
	}
	if b, ok := kv.(*badgerKV); ok && !opts.ReadOnly {
		kv = newWriteBehind(b, logger)
	}
	s, err := openKV(kv, dir, opts.ReadOnly, opts.MustExist, logger)
	if err != nil {
		kv.Close()
		return nil, err
	}
	return s, nil
}

// openKV brings up a Store over an open KV: schema check, fresh-store
// initialisation (refused with ErrNoStore when mustExist) and the dirty
// marker.
func openKV(kv KV, dir string, readOnly, mustExist bool, logger *slog.Logger) (*Store, error) {
	s := &Store{kv: kv, log: logger, readOnly: readOnly}
	s.auditSeq.Store(randomU32() >> 1) // 2^31 records before it wraps
	if _, ok := kv.(*etcdKV); ok {
		s.host = daemonHost()
		s.trash.off = true
	}
	if _, ok := kv.(snapshotter); ok && !readOnly {
		// badger's directory lock keeps every other process from
		// writing an embedded store while this one has it open; the
		// daemons sharing an etcd store follow each other's changes
		// into the cache (startFeed), and their writes compare what
		// they read from it (cache.go). A read-only open is not cached:
		// it follows no feed.
		s.kv = newCachedKV(kv, cacheSlots)
	}
	var version uint64
	fresh := false
	err := kv.View(func(tx Txn) error {
		v, err := tx.Get(versionKey())
		if errors.Is(err, ErrNotFound) {
			empty := true
			if err := tx.Scan(nil, nil, func(k, _ []byte) error {
				empty = false
				return errStopScan
			}); err != nil {
				return err
			}
			if !empty {
				return fmt.Errorf("open store %s: no schema version record: %w", dir, ErrSchema)
			}
			fresh = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("open store %s: %w: %v", dir, ErrCorrupt, err)
		}
		if version, err = decodeU64(v); err != nil {
			return fmt.Errorf("open store %s: schema version: %w", dir, err)
		}
		if version != schemaVersion && version != schemaVersionV1 {
			return fmt.Errorf("open store %s: found version %d, this shedfs reads %d and %d: %w", dir, version, schemaVersionV1, schemaVersion, ErrSchema)
		}
		if v, err = tx.Get(stateKey(stateShareRoot)); err != nil {
			return fmt.Errorf("open store %s: share root record: %w: %v", dir, ErrCorrupt, err)
		}
		if s.shareRoot, err = decodeU64(v); err != nil {
			return fmt.Errorf("open store %s: share root: %w", dir, err)
		}
		v, err = tx.Get(stateKey(stateClean))
		s.wasClean = err == nil && len(v) == 1 && v[0] == 1
		return nil
	})
	if err != nil {
		return nil, err
	}
	if fresh && mustExist {
		return nil, fmt.Errorf("open store %s: %w", dir, ErrNoStore)
	}
	if fresh && readOnly {
		return nil, fmt.Errorf("open store %s read-only: store is empty: %w", dir, ErrCorrupt)
	}
	inoKey, err := s.loadInoKey(fresh)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if err := s.openLayout(kv, dir, version, fresh); err != nil {
		return nil, err
	}
	if _, ok := s.kv.(*cachedKV); ok {
		// After the layout is known (the feed reads keys with it) and
		// before anything cacheable is read or written.
		s.startFeed()
	}
	if fresh {
		if err := s.initFresh(inoKey); err != nil {
			return nil, fmt.Errorf("initialise store %s: %w", dir, err)
		}
		s.wasClean = true
		s.created = true
	}
	if !readOnly {
		if err := kv.Update(func(tx Txn) error {
			return tx.Set(stateKey(stateClean), []byte{0})
		}); err != nil {
			return nil, fmt.Errorf("mark store %s in use: %w", dir, err)
		}
		if err := kv.Sync(); err != nil {
			return nil, err
		}
	}
	if !s.wasClean {
		// A store several daemons serve is marked in use by the first
		// and clean by the last to stop: one that finds others
		// serving it (a daemon joining, fsck --dry-run, status) finds
		// it in use, not abandoned by a crash. What a daemon that died
		// meanwhile held goes with its lease.
		if peers, err := s.Peers(); err == nil && len(peers) > 0 {
			s.wasClean = true
			logger.Info("other daemons serve the store", "dir", dir, "daemons", len(peers))
		}
	}
	if !s.wasClean {
		logger.Warn("metadata store was not closed cleanly; run a check", "dir", dir)
	}
	return s, nil
}

// initFresh writes what an empty store starts with: the schema version, the
// inode number key and the share root, in one transaction.
func (s *Store) initFresh(inoKey []byte) error {
	ino, err := s.allocIno()
	if err != nil {
		return err
	}
	now := time.Now()
	root := &shedfs.Inode{
		Ino: ino, Mode: syscall.S_IFDIR | 0o755, Nlink: 2,
		Atime: now, Mtime: now, Ctime: now,
		Zone: shedfs.Zone{Kind: shedfs.ZoneShare}, OwnMode: shedfs.OwnModeGroup,
	}
	err = s.kv.Update(func(tx Txn) error {
		if err := tx.Set(versionKey(), encodeU64(schemaVersion)); err != nil {
			return err
		}
		if err := tx.Set(stateKey(stateInoKey), inoKey); err != nil {
			return err
		}
		if err := tx.Set(stateKey(stateBlobLayout), []byte{blobLayoutOrder}); err != nil {
			return err
		}
		if err := tx.Set(s.keys.inode(ino), encodeInode(root)); err != nil {
			return err
		}
		if err := tx.Set(usageKey(shedfs.HolderOf(root.Zone)), encodePair(0, 1)); err != nil {
			return err
		}
		return tx.Set(stateKey(stateShareRoot), encodeU64(ino))
	})
	if err != nil {
		return err
	}
	s.shareRoot = ino
	return nil
}

// Close marks the store clean and closes it.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		// Of the daemons sharing a store, the last to close marks it
		// clean: a stop is clean only if no other is still running.
		peers, perr := s.Peers()
		if !s.readOnly && perr == nil && len(peers) == 0 {
			if err := s.kv.Update(func(tx Txn) error {
				return tx.Set(stateKey(stateClean), []byte{1})
			}); err != nil {
				errs = append(errs, fmt.Errorf("mark store clean: %w", err))
			}
			if err := s.kv.Sync(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := s.kv.Close(); err != nil {
			errs = append(errs, err)
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// WasClean reports whether the previous process closed the store
// cleanly, or other daemons serve it still (a store on etcd).
// When false, the caller must run Check with repair before serving.
func (s *Store) WasClean() bool { return s.wasClean }

// Created reports whether this open initialised the store: the location
// held none before (shedfs init says which).
func (s *Store) Created() bool { return s.created }

// Sync makes every committed change durable (badger fsync of its log).
func (s *Store) Sync() error { return s.kv.Sync() }

// ShareRoot is the root directory inode of the share zone.
func (s *Store) ShareRoot() uint64 { return s.shareRoot }

// allocIno hands out the next inode number: the next value of the
// allocation counter, permuted (inos.go). It leases a new range of counter
// values in its own small transaction when the current one is used up.
func (s *Store) allocIno() (uint64, error) {
	if s.readOnly {
		return 0, syscall.EROFS
	}
	s.inoMu.Lock()
	defer s.inoMu.Unlock()
	if s.inoNext == s.inoEnd {
		var start uint64
		err := s.kv.Update(func(tx Txn) error {
			start = FirstIno
			v, err := tx.Get(nextInoKey())
			switch {
			case err == nil:
				if start, err = decodeU64(v); err != nil {
					return err
				}
			case !errors.Is(err, ErrNotFound):
				return err
			}
			return tx.Set(nextInoKey(), encodeU64(start+inoLeaseSize))
		})
		if err != nil {
			return 0, fmt.Errorf("lease inode numbers: %w", err)
		}
		s.inoNext, s.inoEnd = start, start+inoLeaseSize
	}
	return s.nextIno()
}

// EngineSize reports the storage engine's on-disk size (for badger: the
// LSM tree and the value log), so operators can watch it grow. Engines
// that cannot tell report zeros.
func (s *Store) EngineSize() (lsm, vlog int64) {
	if sz, ok := s.kv.(interface{ Size() (int64, int64) }); ok {
		return sz.Size()
	}
	return 0, 0
}
