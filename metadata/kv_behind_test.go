package metadata

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func openBehind(t *testing.T, dir string) *writeBehind {
	t.Helper()
	kv, err := openBadger(dir, dir == "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newWriteBehind(kv.(*badgerKV), nil)
}

// scanAll returns prefix's keys and values as "k=v" in order.
func scanAll(t *testing.T, tx Txn, prefix, start string) []string {
	t.Helper()
	var out []string
	var st []byte
	if start != "" {
		st = []byte(start)
	}
	if err := tx.Scan([]byte(prefix), st, func(k, v []byte) error {
		out = append(out, string(k)+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func set(t *testing.T, kv KV, kvs ...string) {
	t.Helper()
	if err := kv.Update(func(tx Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			var err error
			if kvs[i+1] == "-" {
				err = tx.Delete([]byte(kvs[i]))
			} else {
				err = tx.Set([]byte(kvs[i]), []byte(kvs[i+1]))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestWriteBehindScanMerges: a Scan merges pending writes and deletes,
// in every layer and the transaction's own, into badger's keys, in key
// order, from start, and stops when told.
func TestWriteBehindScanMerges(t *testing.T) {
	w := openBehind(t, "")
	defer w.Close()
	set(t, w, "a1", "x", "b1", "1", "b3", "3", "b5", "5", "c1", "x")
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	set(t, w, "b2", "2", "b3", "-", "b5", "55", "b7", "7") // pending over badger
	want := []string{"b1=1", "b2=2", "b5=55", "b7=7"}
	w.View(func(tx Txn) error {
		if got := scanAll(t, tx, "b", ""); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("scan: %v, want %v", got, want)
		}
		if got := scanAll(t, tx, "b", "b4"); fmt.Sprint(got) != fmt.Sprint(want[2:]) {
			t.Errorf("scan from b4: %v, want %v", got, want[2:])
		}
		n := 0
		tx.Scan([]byte("b"), nil, func(k, v []byte) error {
			n++
			if n == 2 {
				return errStopScan
			}
			return nil
		})
		if n != 2 {
			t.Errorf("a scan told to stop at the 2nd key saw %d", n)
		}
		if _, err := tx.Get([]byte("b3")); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get of a key deleted while pending: %v", err)
		}
		return nil
	})
	// Within an Update: its own writes on top.
	if err := w.Update(func(tx Txn) error {
		tx.Set([]byte("b0"), []byte("0"))
		tx.Delete([]byte("b5"))
		tx.Set([]byte("b7"), []byte("77"))
		got := scanAll(t, tx, "b", "")
		if want := []string{"b0=0", "b1=1", "b2=2", "b7=77"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("scan in an update: %v, want %v", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestWriteBehindSnapshots: a read sees the writes committed before it
// began and none after, whether they were flushed meanwhile or not.
func TestWriteBehindSnapshots(t *testing.T) {
	w := openBehind(t, "")
	defer w.Close()
	set(t, w, "k", "1")
	tx, done := w.snapshot()
	set(t, w, "k", "2", "new", "x")
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	set(t, w, "k", "3")
	if v, err := tx.Get([]byte("k")); err != nil || string(v) != "1" {
		t.Errorf("old snapshot: k=%q, %v; want 1", v, err)
	}
	if _, err := tx.Get([]byte("new")); !errors.Is(err, ErrNotFound) {
		t.Errorf("old snapshot sees a later key: %v", err)
	}
	done()
	w.View(func(tx Txn) error {
		if v, _ := tx.Get([]byte("k")); string(v) != "3" {
			t.Errorf("new snapshot: k=%q, want 3", v)
		}
		return nil
	})
}

// TestWriteBehindDurable: what is pending reaches badger at a flush, at
// Sync and at Close, and a reopened store has it.
func TestWriteBehindDurable(t *testing.T) {
	dir := t.TempDir()
	w := openBehind(t, dir)
	set(t, w, "a", "1")
	raw := func(key string) string {
		var out string
		w.engine.View(func(tx Txn) error {
			v, err := tx.Get([]byte(key))
			if err == nil {
				out = string(v)
			}
			return nil
		})
		return out
	}
	deadline := time.Now().Add(5 * time.Second)
	for raw("a") != "1" {
		if time.Now().After(deadline) {
			t.Fatal("the flusher did not write a pending change in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	set(t, w, "b", "2")
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if raw("b") != "2" {
		t.Fatal("Sync returned before the pending change was in badger")
	}
	set(t, w, "c", "3")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = openBehind(t, dir)
	defer w.Close()
	w.View(func(tx Txn) error {
		if got := scanAll(t, tx, "", ""); fmt.Sprint(got) != "[a=1 b=2 c=3]" {
			t.Errorf("after a reopen: %v", got)
		}
		return nil
	})
}

// TestWriteBehindTooBig: one Update refuses what one badger transaction
// would, so that callers still split their work, and a layer of many
// Updates larger than one badger transaction is written in several.
func TestWriteBehindTooBig(t *testing.T) {
	w := openBehind(t, "")
	defer w.Close()
	val := make([]byte, 64<<10)
	err := w.Update(func(tx Txn) error {
		for i := range 100 {
			if err := tx.Set([]byte("big"+strconv.Itoa(i)), val); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, badger.ErrTxnTooBig) {
		t.Fatalf("6 MiB in one update: %v, want ErrTxnTooBig", err)
	}
	for i := range 100 { // 100 updates of 64 KiB: several badger commits
		set(t, w, "big"+strconv.Itoa(i), string(val))
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.engine.View(func(tx Txn) error {
		n := 0
		tx.Scan([]byte("big"), nil, func(k, v []byte) error { n++; return nil })
		if n != 100 {
			t.Errorf("%d of 100 keys in badger after Sync", n)
		}
		return nil
	})
}

// TestWriteBehindConsistentReads: with an Update moving a counter through
// two keys at once and flushes under way, every read sees both keys at
// the same value, by Get and by Scan, and never an older value than a
// read before it (run it with -race).
func TestWriteBehindConsistentReads(t *testing.T) {
	w := openBehind(t, t.TempDir())
	defer w.Close()
	set(t, w, "p/a", "0", "p/b", "0")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the writer
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := []byte(strconv.Itoa(i))
			// Not set: t.Fatal belongs to the test's own goroutine.
			if err := w.Update(func(tx Txn) error {
				tx.Set([]byte("p/a"), v)
				tx.Set([]byte("p/b"), v)
				tx.Delete([]byte("p/tmp" + strconv.Itoa(i%7)))
				return tx.Set([]byte("p/tmp"+strconv.Itoa((i+1)%7)), v)
			}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { // explicit flushes besides the flusher's
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Microsecond):
			}
			if err := w.flush(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Stopped before w.Close (deferred earlier) also when a read fails.
	var once sync.Once
	stopAll := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer stopAll()
	deadline := time.Now().Add(time.Second)
	reads, last := 0, 0
	for time.Now().Before(deadline) {
		w.View(func(tx Txn) error {
			a, err1 := tx.Get([]byte("p/a"))
			b, err2 := tx.Get([]byte("p/b"))
			if err1 != nil || err2 != nil || string(a) != string(b) {
				t.Fatalf("Get: a=%q (%v) b=%q (%v)", a, err1, b, err2)
			}
			// Never back in time: a flush must not leave a moment
			// where its writes are in neither the layers nor badger.
			if n, _ := strconv.Atoi(string(a)); n < last {
				t.Fatalf("read %d after %d", n, last)
			} else {
				last = n
			}
			got := scanAll(t, tx, "p/", "")
			if len(got) < 2 || got[0][len("p/a="):] != got[1][len("p/b="):] {
				t.Fatalf("Scan: %v", got)
			}
			return nil
		})
		reads++
	}
	stopAll()
	if w.flushes.Load() < 10 {
		t.Errorf("only %d flushes under way during the reads", w.flushes.Load())
	}
	t.Logf("%d reads, %d flushes", reads, w.flushes.Load())
}

// TestWriteBehindScanByHead: a Scan under a record kind and inode number
// (a directory's entries) reads the pending entries filed under it, and
// only those, in every layer.
func TestWriteBehindScanByHead(t *testing.T) {
	w := openBehind(t, "")
	defer w.Close()
	dir, other := string(testKeys.entryPrefix(7)), string(testKeys.entryPrefix(8))
	set(t, w, dir+"a", "1", dir+"c", "3", other+"a", "x")
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	set(t, w, dir+"b", "2", dir+"c", "-", other+"b", "y")
	tx, done := w.snapshot()
	defer done()
	set(t, w, dir+"d", "4") // after the snapshot
	w.View(func(now Txn) error {
		got := scanAll(t, now, dir, "")
		if want := []string{dir + "a=1", dir + "b=2", dir + "d=4"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("scan of the directory: %q, want %q", got, want)
		}
		return nil
	})
	got := scanAll(t, tx, dir, "")
	if want := []string{dir + "a=1", dir + "b=2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("scan of the directory at the snapshot: %q, want %q", got, want)
	}
	if got := scanAll(t, tx, other, ""); len(got) != 2 {
		t.Errorf("scan of the other directory: %q", got)
	}
}

// TestWriteBehindLargestUpdate: an Update filled until it is refused
// (ErrTxnTooBig) keeps what it had, and badger takes that in one
// transaction when it is flushed: the two count alike.
func TestWriteBehindLargestUpdate(t *testing.T) {
	for _, valSize := range []int{0, 100, 1000} {
		w := openBehind(t, "")
		val := make([]byte, valSize)
		n := 0
		if err := w.Update(func(tx Txn) error {
			for ; ; n++ {
				err := tx.Set([]byte(fmt.Sprintf("key%08d", n)), val)
				if errors.Is(err, badger.ErrTxnTooBig) {
					return nil
				}
				if err != nil {
					return err
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatalf("values of %d bytes: flush of an update of %d writes: %v", valSize, n, err)
		}
		w.Close()
	}
}
