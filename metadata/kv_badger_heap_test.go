package metadata

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// TestBadgerCompactionHeap writes a store the way a busy view does (records
// under random inode keys, audit records under rising keys, deletes) until
// badger compacts into several levels, and samples the Go heap meanwhile.
// Badger's table builders take their buffers from the Go heap; with snappy
// and tables of 2 MiB and more, a dozen builders at once held 100-180 MiB,
// above the daemon's 128 MiB memory limit, and the garbage collector then
// ran without pause (the benchmark's second and third repetitions cost
// three times the first's CPU).
func TestBadgerCompactionHeap(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes about 100 MiB to badger; measures the heap, which the race detector distorts")
	}
	kv, err := openBadger(t.TempDir(), false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()

	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				metrics.Read(s)
				peak = max(peak, s[0].Value.Uint64())
			}
		}
	}()

	rng := rand.New(rand.NewPCG(1, 2))
	fill := rand.NewChaCha8([32]byte{1})
	inode := make([]byte, 90)
	audit := make([]byte, 240)
	const files = 400_000
	var live [][]byte
	for i := 0; i < files; i++ {
		err := kv.Update(func(tx Txn) error {
			k := make([]byte, 9)
			k[0] = 'i'
			binary.BigEndian.PutUint64(k[1:], rng.Uint64())
			_, _ = fill.Read(inode[:24]) // the rest stays as records are: mostly small numbers
			if err := tx.Set(k, inode); err != nil {
				return err
			}
			live = append(live, k)
			a := make([]byte, 9)
			a[0] = 'z'
			binary.BigEndian.PutUint64(a[1:], uint64(i))
			_, _ = fill.Read(audit[:64])
			if err := tx.Set(a, audit); err != nil {
				return err
			}
			if i%3 == 2 {
				j := rng.IntN(len(live))
				if err := tx.Delete(live[j]); err != nil {
					return err
				}
				live[j] = live[len(live)-1]
				live = live[:len(live)-1]
			}
			return nil
		})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("peak live Go heap (as the last GC marked it) while writing %d records: %d MiB", files, peak>>20)
	if limit := uint64(128 << 20); peak > limit {
		t.Errorf("peak Go heap %d MiB, want at most %d MiB, the daemon's default memory limit", peak>>20, limit>>20)
	}
}
