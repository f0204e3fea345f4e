package metadata

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
)

// ErrNotFound is what a Txn's Get returns for a missing key.
var ErrNotFound = errors.New("key not found")

// errStopScan ends a Scan early without an error.
var errStopScan = errors.New("stop scan")

// KV is the narrow transactional seam between the schema and the engine
// that holds it. Badger is the embedded default; anything that offers
// serializable transactions with prefix scans (TiKV, FoundationDB) can hold
// the same schema.
type KV interface {
	// Update runs fn in a read-write transaction and commits it, retrying
	// fn from the start when the commit conflicts with another one.
	Update(fn func(tx Txn) error) error
	// View runs fn in a read-only snapshot.
	View(fn func(tx Txn) error) error
	// Sync makes every committed transaction durable.
	Sync() error
	// Close releases the engine.
	Close() error
}

// Txn is one transaction of a KV.
type Txn interface {
	// Get returns the value of key, ErrNotFound if absent. The slice is
	// valid only inside the transaction.
	Get(key []byte) ([]byte, error)
	// Set writes key.
	Set(key, value []byte) error
	// Delete removes key.
	Delete(key []byte) error
	// Scan calls fn for each key with prefix, in key order, starting at
	// the first key >= start (start nil: the prefix itself). fn returning
	// errStopScan ends the scan without error. Slices are valid only
	// inside fn.
	Scan(prefix, start []byte, fn func(key, value []byte) error) error
}

// isTxnTooBig reports whether a transaction failed for holding too much,
// in either engine, so that callers that can split their work do.
func isTxnTooBig(err error) bool {
	return errors.Is(err, badger.ErrTxnTooBig) || errors.Is(err, errEtcdTooBig)
}
