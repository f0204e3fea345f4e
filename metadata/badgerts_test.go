package metadata

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestBadgerClockDiscard checks the store's own clock of badger's
// timestamps (badgerts.go) against compactions: a read transaction open
// across many commits still reads what it began with after its versions
// were compacted, and once it is closed, compactions drop the versions
// nothing can read any more (badger keeps every version below its discard
// timestamp otherwise, and the store would grow with every rewrite).
func TestBadgerClockDiscard(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 40 MiB to badger")
	}
	kv, err := openBadger(t.TempDir(), false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	b := kv.(*badgerKV)

	pad := bytes.Repeat([]byte{'x'}, 100<<10)
	put := func(key, tag string) {
		t.Helper()
		if err := kv.Update(func(tx Txn) error {
			return tx.Set([]byte(key), append([]byte(tag), pad...))
		}); err != nil {
			t.Fatal(err)
		}
	}
	// rewrite writes key n times, then fills the memtables with another
	// key, so that every version of key reaches the tables, and compacts.
	rewrite := func(key string, n int) {
		t.Helper()
		for i := range n {
			put(key, fmt.Sprintf("new%d:", i))
		}
		for i := range 120 {
			put("filler", fmt.Sprintf("f%d:", i))
		}
		deadline := time.Now().Add(20 * time.Second)
		for len(b.db.Tables()) < 3 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if err := b.db.Flatten(1); err != nil {
			t.Fatal(err)
		}
	}
	versions := func(key string) int {
		t.Helper()
		txn := b.db.NewTransactionAt(b.clock.done.Load(), false)
		defer txn.Discard()
		opts := badger.DefaultIteratorOptions
		opts.AllVersions = true
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		n := 0
		for it.Seek([]byte(key)); it.ValidForPrefix([]byte(key)); it.Next() {
			if string(it.Item().Key()) == key {
				n++
			}
		}
		return n
	}

	put("k", "old:")
	snap, discard := b.snapshot()
	rewrite("k", 60)
	v, err := snap.Get([]byte("k"))
	if err != nil {
		t.Fatalf("an open read lost its version of k to a compaction: %v", err)
	}
	if !bytes.HasPrefix(v, []byte("old:")) {
		t.Fatalf("an open read sees k = %.8q, want what it began with (old:)", v)
	}
	discard()

	rewrite("k", 60)
	if n := versions("k"); n > 2 {
		t.Fatalf("k has %d versions after its rewrites were compacted with no read open, want at most 2", n)
	}
	if v, ok := kvGet(t, kv, "k"); !ok || !bytes.HasPrefix([]byte(v), []byte("new59:")) {
		t.Fatalf("k = %.8q after the rewrites, want new59:", v)
	}
}
