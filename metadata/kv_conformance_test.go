package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
)

// The KV conformance suite: what the schema relies on from an engine,
// run against badger and against a real etcd cluster alike.

// kvEngines returns a constructor of a fresh, empty KV per engine.
func kvEngines(t *testing.T) map[string]func(t *testing.T) KV {
	return map[string]func(t *testing.T) KV{
		"badger": func(t *testing.T) KV {
			kv, err := openBadger("", true, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { kv.Close() })
			return kv
		},
		"etcd": func(t *testing.T) KV {
			cfg := testEtcd(t)
			kv, err := openEtcd(cfg, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { kv.Close() })
			return kv
		},
	}
}

func TestKVConformance(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, kv KV)
	}{
		{"GetSetDelete", kvGetSetDelete},
		{"ErrorCommitsNothing", kvErrorCommitsNothing},
		{"ScanOrderPrefixStart", kvScanOrder},
		{"ScanSeesOwnWrites", kvScanOwnWrites},
		{"ScanPages", kvScanPages},
		{"ConcurrentIncrements", kvConcurrentIncrements},
		{"CreateIfAbsentOnce", kvCreateOnce},
		{"NoPhantoms", kvNoPhantoms},
		{"DeleteConflicts", kvDeleteConflicts},
		{"ViewIsASnapshot", kvViewSnapshot},
		{"LargeValue", kvLargeValue},
		{"EmptyValueIsAKey", kvEmptyValue},
	}
	for name, open := range kvEngines(t) {
		t.Run(name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
			}
		})
	}
}

func kvGet(t *testing.T, kv KV, key string) (string, bool) {
	t.Helper()
	var val string
	found := false
	err := kv.View(func(tx Txn) error {
		v, err := tx.Get([]byte(key))
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		val, found = string(v), true
		return nil
	})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return val, found
}

func kvSet(t *testing.T, kv KV, kvs ...string) {
	t.Helper()
	if err := kv.Update(func(tx Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			if err := tx.Set([]byte(kvs[i]), []byte(kvs[i+1])); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func kvScan(t *testing.T, kv KV, prefix, start string) []string {
	t.Helper()
	var got []string
	var st []byte
	if start != "" {
		st = []byte(start)
	}
	if err := kv.View(func(tx Txn) error {
		return tx.Scan([]byte(prefix), st, func(k, v []byte) error {
			got = append(got, string(k)+"="+string(v))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func kvGetSetDelete(t *testing.T, kv KV) {
	if _, ok := kvGet(t, kv, "a"); ok {
		t.Fatal("a fresh KV has key a")
	}
	kvSet(t, kv, "a", "1", "b", "")
	if v, ok := kvGet(t, kv, "a"); !ok || v != "1" {
		t.Fatalf("a = %q, %v", v, ok)
	}
	if v, ok := kvGet(t, kv, "b"); !ok || v != "" {
		t.Fatalf("an empty value reads back as %q, %v", v, ok)
	}
	if err := kv.Update(func(tx Txn) error {
		if err := tx.Delete([]byte("a")); err != nil {
			return err
		}
		if _, err := tx.Get([]byte("a")); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("a deleted key in the same transaction: %v", err)
		}
		if err := tx.Set([]byte("c"), []byte("3")); err != nil {
			return err
		}
		v, err := tx.Get([]byte("c"))
		if err != nil || string(v) != "3" {
			return fmt.Errorf("own write: %q, %v", v, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := kvGet(t, kv, "a"); ok {
		t.Fatal("a survived its delete")
	}
}

func kvErrorCommitsNothing(t *testing.T, kv KV) {
	boom := errors.New("boom")
	err := kv.Update(func(tx Txn) error {
		tx.Set([]byte("x"), []byte("1"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want fn's error", err)
	}
	if _, ok := kvGet(t, kv, "x"); ok {
		t.Fatal("a failed transaction committed its write")
	}
}

func kvScanOrder(t *testing.T, kv KV) {
	kvSet(t, kv, "p/b", "2", "p/a", "1", "p/c", "3", "q/a", "x", "p", "root", "o/z", "y")
	want := []string{"p/a=1", "p/b=2", "p/c=3"}
	if got := kvScan(t, kv, "p/", ""); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("scan p/: %v, want %v", got, want)
	}
	if got := kvScan(t, kv, "p/", "p/b"); fmt.Sprint(got) != fmt.Sprint(want[1:]) {
		t.Fatalf("scan p/ from p/b: %v", got)
	}
	if got := kvScan(t, kv, "p/", "p/bb"); fmt.Sprint(got) != fmt.Sprint(want[2:]) {
		t.Fatalf("scan p/ from p/bb: %v", got)
	}
	if got := kvScan(t, kv, "", ""); len(got) != 6 {
		t.Fatalf("scan of everything: %v", got)
	}
	var first []string
	kv.View(func(tx Txn) error {
		return tx.Scan([]byte("p/"), nil, func(k, _ []byte) error {
			first = append(first, string(k))
			return errStopScan
		})
	})
	if fmt.Sprint(first) != "[p/a]" {
		t.Fatalf("errStopScan did not stop: %v", first)
	}
}

func kvScanOwnWrites(t *testing.T, kv KV) {
	kvSet(t, kv, "d/1", "a", "d/3", "c", "d/5", "e")
	var got []string
	if err := kv.Update(func(tx Txn) error {
		tx.Set([]byte("d/2"), []byte("b"))
		tx.Set([]byte("d/3"), []byte("C"))
		tx.Delete([]byte("d/5"))
		tx.Set([]byte("d/9"), []byte("z"))
		return tx.Scan([]byte("d/"), nil, func(k, v []byte) error {
			got = append(got, string(k)+"="+string(v))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	want := "[d/1=a d/2=b d/3=C d/9=z]"
	if fmt.Sprint(got) != want {
		t.Fatalf("scan with own writes: %v, want %s", got, want)
	}
}

func kvScanPages(t *testing.T, kv KV) {
	const n = 1300 // more than one page of the etcd engine
	for i := 0; i < n; i += 100 {
		if err := kv.Update(func(tx Txn) error {
			for j := i; j < i+100; j++ {
				if err := tx.Set([]byte(fmt.Sprintf("s/%05d", j)), []byte(strconv.Itoa(j))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	got := kvScan(t, kv, "s/", "")
	if len(got) != n {
		t.Fatalf("scan of %d keys gave %d", n, len(got))
	}
	for i, kv := range got {
		if want := fmt.Sprintf("s/%05d=%d", i, i); kv != want {
			t.Fatalf("key %d: %s, want %s", i, kv, want)
		}
	}
}

// kvConcurrentIncrements: read-modify-write of one counter from many
// goroutines loses no increment.
func kvConcurrentIncrements(t *testing.T, kv KV) {
	const workers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := kv.Update(func(tx Txn) error {
					n := 0
					v, err := tx.Get([]byte("counter"))
					if err == nil {
						n, _ = strconv.Atoi(string(v))
					} else if !errors.Is(err, ErrNotFound) {
						return err
					}
					return tx.Set([]byte("counter"), []byte(strconv.Itoa(n+1)))
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if v, _ := kvGet(t, kv, "counter"); v != strconv.Itoa(workers*each) {
		t.Fatalf("counter %s after %d increments", v, workers*each)
	}
}

// kvCreateOnce: of many transactions that create a key if absent, exactly
// one wins (as two creates of one name in a directory must).
func kvCreateOnce(t *testing.T, kv KV) {
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			won := false
			err := kv.Update(func(tx Txn) error {
				won = false
				if _, err := tx.Get([]byte("name")); err == nil {
					return nil
				} else if !errors.Is(err, ErrNotFound) {
					return err
				}
				won = true
				return tx.Set([]byte("name"), []byte(strconv.Itoa(i)))
			})
			if err != nil {
				t.Error(err)
			}
			if won {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d creates of one name succeeded", wins)
	}
}

// kvNoPhantoms: transactions that count a prefix by scanning and insert
// only while fewer than max are there never overshoot, provided each also
// reads and writes one guard key (as a create reads and writes its
// directory's inode). Scans alone are not protected against phantoms:
// badger's iterators are not (the etcd engine's are, by a range compare),
// so the schema never relies on it.
func kvNoPhantoms(t *testing.T, kv KV) {
	const workers, max = 6, 3
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := kv.Update(func(tx Txn) error {
				guard, err := tx.Get([]byte("slots"))
				if err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
				n := 0
				if err := tx.Scan([]byte("slot/"), nil, func(_, _ []byte) error {
					n++
					return nil
				}); err != nil {
					return err
				}
				if n >= max {
					return nil
				}
				if err := tx.Set([]byte("slots"), append(guard, 'x')); err != nil {
					return err
				}
				return tx.Set([]byte(fmt.Sprintf("slot/%d", i)), []byte("x"))
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := kvScan(t, kv, "slot/", ""); len(got) != max {
		t.Fatalf("%d slots taken, want %d: %v", len(got), max, got)
	}
}

// kvDeleteConflicts: a transaction that read a key another one deletes
// before it commits runs again and sees the delete.
func kvDeleteConflicts(t *testing.T, kv KV) {
	kvSet(t, kv, "src", "data")
	runs := 0
	read := make(chan struct{})
	deleted := make(chan struct{})
	go func() {
		<-read
		if err := kv.Update(func(tx Txn) error { return tx.Delete([]byte("src")) }); err != nil {
			t.Error(err)
		}
		close(deleted)
	}()
	err := kv.Update(func(tx Txn) error {
		runs++
		v, err := tx.Get([]byte("src"))
		if runs == 1 {
			close(read)
			<-deleted
		}
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return tx.Set([]byte("copy"), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs < 2 {
		t.Fatal("the transaction committed over a delete of what it read")
	}
	if _, ok := kvGet(t, kv, "copy"); ok {
		t.Fatal("a copy of a deleted key was committed")
	}
}

func kvViewSnapshot(t *testing.T, kv KV) {
	kvSet(t, kv, "v/a", "1")
	err := kv.View(func(tx Txn) error {
		if _, err := tx.Get([]byte("v/a")); err != nil {
			return err
		}
		kvSet(t, kv, "v/a", "2", "v/b", "new")
		v, err := tx.Get([]byte("v/a"))
		if err != nil {
			return err
		}
		if string(v) != "1" {
			return fmt.Errorf("a view saw a later commit: %q", v)
		}
		if _, err := tx.Get([]byte("v/b")); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("a view saw a key created after it began: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func kvLargeValue(t *testing.T, kv KV) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB, the largest xattr
	if err := kv.Update(func(tx Txn) error { return tx.Set([]byte("big"), big) }); err != nil {
		t.Fatal(err)
	}
	if v, _ := kvGet(t, kv, "big"); v != string(big) {
		t.Fatal("64 KiB value did not read back")
	}
}

// kvEmptyValue: a key set to an empty value (an orphan marker) is
// there for Get and Scan, inside and after its transaction.
func kvEmptyValue(t *testing.T, kv KV) {
	if err := kv.Update(func(tx Txn) error {
		if err := tx.Set([]byte("e/1"), nil); err != nil {
			return err
		}
		n := 0
		tx.Scan([]byte("e/"), nil, func(_, _ []byte) error { n++; return nil })
		if n != 1 {
			return fmt.Errorf("own empty write not scanned")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v, ok := kvGet(t, kv, "e/1"); !ok || v != "" {
		t.Fatalf("empty value: %q, %v", v, ok)
	}
	if got := kvScan(t, kv, "e/", ""); fmt.Sprint(got) != "[e/1=]" {
		t.Fatalf("scan of an empty value: %v", got)
	}
}
