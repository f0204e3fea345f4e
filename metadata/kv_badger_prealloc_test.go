package metadata

import (
	"encoding/binary"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMemLogsAllocated: the memtable log badger opens with the store, and
// each it starts later, has the blocks it can take allocated, without
// its size changing (badger tells a new log by its size). A sparse log
// is what a commit on a disk filled from outside dies on (the integration
// test TestCommitsOnDiskFilledFromOutside shows that death).
func TestMemLogsAllocated(t *testing.T) {
	dir := t.TempDir()
	kv, err := openBadger(dir, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	// logs returns the logs in dir and how many bytes each has
	// allocated and how large it is.
	logs := func() map[string][2]int64 {
		t.Helper()
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string][2]int64{}
		for _, de := range des {
			if !strings.HasSuffix(de.Name(), memLogExt) {
				continue
			}
			fi, err := de.Info()
			if err != nil {
				continue // flushed and deleted meanwhile
			}
			st := fi.Sys().(*syscall.Stat_t)
			m[de.Name()] = [2]int64{st.Blocks * 512, st.Size}
		}
		return m
	}
	first := logs()
	if len(first) != 1 {
		t.Fatalf("logs after open: %v, want one", first)
	}
	for name, a := range first {
		if a[0] < memLogAlloc || a[1] != 2*memTableSize {
			t.Fatalf("%s: %d bytes allocated, size %d; want at least %d allocated, size %d", name, a[0], a[1], memLogAlloc, 2*memTableSize)
		}
	}
	// Past one memtable: badger starts a second log.
	val := make([]byte, 1000)
	for i := range 3 * memTableSize / len(val) {
		if err := kv.Update(func(tx Txn) error {
			k := binary.BigEndian.AppendUint64([]byte{'t'}, uint64(i))
			return tx.Set(k, val)
		}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for {
		short := ""
		for name, a := range logs() {
			if first[name] == ([2]int64{}) {
				seen[name] = true
			}
			if a[0] < memLogAlloc {
				short = name
			}
		}
		if short == "" && len(seen) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: new logs %v, %s not allocated: %v", seen, short, logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
