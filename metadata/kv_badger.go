package metadata

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// maxConflictRetries bounds how often Update re-runs a transaction that lost
// a commit race. Conflicts are short-lived (two creates in one directory), so
// a handful of retries always suffices unless something is badly wrong.
const maxConflictRetries = 100

// badgerKV is the embedded KV engine of a single-machine store.
type badgerKV struct {
	db       *badger.DB
	trim     *tableTrimmer       // nil in memory
	prealloc *memLogPreallocator // nil in memory or read-only
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

// Badger writes its memtable log (*.mem), the tables it flushes and
// compacts (*.sst), its discard statistics and values above valueThreshold
// (*.vlog) through memory maps of files it first extends sparse. On a full
// disk, writing such a page kills the process with SIGBUS, which no Go
// code can catch. These options bound how much of that can be under way
// at once, and Headroom turns them into the free space the disk must keep.
const (
	// memTableSize is the size of one memtable, and so of the log being
	// written and of the table being flushed.
	memTableSize = 4 << 20
	// maxBatch is the largest transaction badger accepts for a memtable
	// (15% of it): what the log may pass memTableSize by.
	maxBatch = memTableSize * 15 / 100
	// valueThreshold keeps every value up to 256 KiB in the LSM tree (all
	// of shedfs's records: the largest is an xattr value of 64 KiB), so
	// the value log is not written at all. Badger wants it below
	// maxBatch.
	valueThreshold = 256 << 10
	// tableSize is the size of every table below level 0 (badger's
	// TableSizeMultiplier is 1, so deeper levels do not double it). Badger
	// builds each table in a buffer from the Go heap that starts at twice
	// the table's size, a dozen builders run at once in a compaction, and
	// each also takes a 3 MiB index builder: with badger's defaults (2 MiB
	// doubling per level, snappy, which copies every block once more) the
	// builders held up to 217 MiB of live heap, far above the daemon's
	// memory limit, and the garbage collector ran without pause while they
	// did (TestBadgerCompactionHeap; docs/performance.md, "Badger's compactions and the memory limit"). Tables are
	// not compressed for the same reason, and snappy cost CPU on every
	// table written and every block read.
	tableSize = 1 << 20
	// blockCacheSize bounds badger's cache of decompressed table blocks.
	// Badger makes none while new tables are not compressed: it reads
	// blocks straight from the table's memory map (and decompresses, on
	// every read, the blocks of tables a store wrote before, until its
	// compactions rewrite them). So the size matters only if compression
	// comes back.
	// A lookup's directory entries are read from one block per some
	// hundred names, which a small cache keeps; inode records are spread
	// at random over the tables (inode numbers are permuted), so a large
	// cache hardly hits them, and the metadata cache above holds the
	// records in use. 16 MiB held 18 MiB of the daemon's 92 MiB of live
	// heap after a stat of 100,000 files.
	blockCacheSize = 4 << 20
	// discardFile is the size of badger's DISCARD file.
	discardFile = 1 << 20
	// headroomSlack covers the filesystem's own blocks for badger's new
	// files and an index or bloom filter larger than estimated.
	headroomSlack = 1 << 20
)

// Headroom is how many free bytes the disk that holds the metadata store in
// dir must keep so that badger never writes to a memory-mapped page without
// disk space behind it: the memtable log being written and the table being
// flushed at the same time (each at most a memtable and a batch, a quarter
// more for the table's index and filter), a compaction (at most every
// table on disk now, rewritten before the old ones are deleted), the
// discard statistics, one batch of values too large for the LSM tree and
// some slack.
// It reads only the directory listing, so it works before the store is
// opened and costs little to refresh.
func Headroom(dir string) int64 {
	var tables int64
	if des, err := os.ReadDir(dir); err == nil {
		for _, de := range des {
			if !strings.HasSuffix(de.Name(), ".sst") {
				continue
			}
			if fi, err := de.Info(); err == nil {
				tables += fi.Size()
			}
		}
	}
	perMemtable := int64(memTableSize+maxBatch) * 5 / 4
	return 2*perMemtable + tables + discardFile + maxBatch + headroomSlack
}

// openBadger opens the badger database in dir (or in memory). Options keep
// memory modest: the daemon must stay under 200 MiB RSS with a million
// inodes (memtable arenas are allocated whole, so they cost their size from
// the start; records are small, so small tables and caches do), and they
// bound what badger writes through memory maps (see Headroom). Writes are
// not synced one by one; Store.Sync makes them durable at fsync time.
func openBadger(dir string, inMemory, readOnly bool, logger *slog.Logger) (kv KV, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(false).
		WithLogger(slogBadger{logger}).
		WithLoggingLevel(badger.WARNING).
		WithMemTableSize(memTableSize).
		WithValueThreshold(valueThreshold).
		WithNumMemtables(2).
		WithBlockCacheSize(blockCacheSize).
		WithIndexCacheSize(8 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithNumLevelZeroTables(3).
		WithNumLevelZeroTablesStall(8).
		WithCompression(options.None).
		WithBaseTableSize(tableSize).
		WithReadOnly(readOnly)
	opts.TableSizeMultiplier = 1 // no option method for it
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
	bkv := &badgerKV{db: db}
	if !inMemory {
		bkv.trim = startTableTrimmer(dir, logger)
		if !readOnly {
			bkv.prealloc = startMemLogPreallocator(dir, logger)
		}
	}
	return bkv, nil
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
	b.trim.close()
	b.prealloc.close()
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
	// Values live in the LSM tree (valueThreshold), so reading one is a
	// slice of its block: prefetching them would only start a goroutine
	// per item.
	opts.PrefetchValues = false
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

// Size reports badger's on-disk size: the LSM tree and the value log.
func (b *badgerKV) Size() (lsm, vlog int64) { return b.db.Size() }

// snapshot opens a read-only transaction that stays open until discard,
// for cachedKV, which opens one only when the cache misses.
func (b *badgerKV) snapshot() (Txn, func()) {
	txn := b.db.NewTransaction(false)
	return &badgerTxn{txn: txn}, txn.Discard
}
