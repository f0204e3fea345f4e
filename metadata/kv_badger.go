package metadata

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// maxConflictRetries bounds how often Update re-runs a transaction that lost
// a commit race. Conflicts are short-lived (two creates in one directory), so
// a handful of retries always suffices unless something is badly wrong.
const maxConflictRetries = 100

// badgerKV is the embedded KV engine of a single-machine store.
type badgerKV struct {
	db *badger.DB
}

// slogBadger routes badger's own logging to slog, keeping only warnings and
// errors so that a busy daemon's log stays readable.
type slogBadger struct{ l *slog.Logger }

func (s slogBadger) Errorf(f string, a ...any) {
	s.l.Error("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (s slogBadger) Warningf(f string, a ...any) {
	s.l.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (slogBadger) Infof(string, ...any)  {}
func (slogBadger) Debugf(string, ...any) {}

// openBadger opens the badger database in dir (or in memory). Options keep
// memory modest: the daemon must stay under 200 MiB RSS with a million
// inodes (memtable arenas are allocated whole, so they cost their size from
// the start; records are small, so small tables and caches do). Writes are not synced one by one; Store.Sync makes them durable at
// fsync time.
func openBadger(dir string, inMemory, readOnly bool, logger *slog.Logger) (kv KV, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(false).
		WithLogger(slogBadger{logger}).
		WithLoggingLevel(badger.WARNING).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(8 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithNumLevelZeroTables(3).
		WithNumLevelZeroTablesStall(8).
		WithReadOnly(readOnly)
	if inMemory {
		opts = opts.WithDir("").WithValueDir("").WithInMemory(true)
	} else if err := preflightTables(dir); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	// Badger panics on some kinds of corrupt input; a damaged store must be
	// an error, never a crashed daemon.
	defer func() {
		if r := recover(); r != nil {
			kv = nil
			err = fmt.Errorf("open store %s: %w: badger panicked: %v", dir, ErrCorrupt, r)
		}
	}()
	db, err := badger.Open(opts)
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "Another process is using this Badger database"),
			strings.Contains(msg, "resource temporarily unavailable"):
			return nil, fmt.Errorf("open store %s: %w", dir, ErrLocked)
		case errors.Is(err, os.ErrPermission):
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		case readOnly && strings.Contains(msg, badger.ErrTruncateNeeded.Error()):
			return nil, fmt.Errorf("open store %s read-only: %w", dir, errNeedsReplay)
		default:
			return nil, fmt.Errorf("open store %s: %w: %s", dir, ErrCorrupt, msg)
		}
	}
	return &badgerKV{db: db}, nil
}

// Update runs fn in a read-write transaction, retrying on commit conflicts.
func (b *badgerKV) Update(fn func(tx Txn) error) error {
	var err error
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		txn := b.db.NewTransaction(true)
		err = fn(&badgerTxn{txn: txn})
		if err != nil {
			txn.Discard()
			return err
		}
		err = txn.Commit()
		if !errors.Is(err, badger.ErrConflict) {
			if err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			return nil
		}
		// Tiny, growing backoff so that colliding writers spread out.
		time.Sleep(time.Duration(attempt+1) * 20 * time.Microsecond)
	}
	return fmt.Errorf("commit after %d attempts: %w", maxConflictRetries, err)
}

// View runs fn in a read-only snapshot.
func (b *badgerKV) View(fn func(tx Txn) error) error {
	txn := b.db.NewTransaction(false)
	defer txn.Discard()
	return fn(&badgerTxn{txn: txn})
}

// Sync makes every committed transaction durable.
func (b *badgerKV) Sync() error {
	if err := b.db.Sync(); err != nil {
		return fmt.Errorf("sync metadata: %w", err)
	}
	return nil
}

// Close releases the database.
func (b *badgerKV) Close() error {
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("close metadata: %w", err)
	}
	return nil
}

// badgerTxn adapts a badger transaction to Txn.
type badgerTxn struct {
	txn *badger.Txn
}

func (t *badgerTxn) Get(key []byte) ([]byte, error) {
	item, err := t.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

func (t *badgerTxn) Set(key, value []byte) error { return t.txn.Set(key, value) }

func (t *badgerTxn) Delete(key []byte) error { return t.txn.Delete(key) }

func (t *badgerTxn) Scan(prefix, start []byte, fn func(key, value []byte) error) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchSize = 64
	it := t.txn.NewIterator(opts)
	defer it.Close()
	if start == nil {
		start = prefix
	}
	for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		var ferr error
		if err := item.Value(func(v []byte) error {
			ferr = fn(item.Key(), v)
			return nil
		}); err != nil {
			return err
		}
		if ferr == errStopScan {
			return nil
		}
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// isTxnTooBig reports whether a transaction failed for holding too much.
func isTxnTooBig(err error) bool { return errors.Is(err, badger.ErrTxnTooBig) }

// Size reports badger's on-disk size: the LSM tree and the value log.
func (b *badgerKV) Size() (lsm, vlog int64) { return b.db.Size() }
