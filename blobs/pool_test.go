package blobs

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// counter is an allocator of distinct numbers, as the store's is.
type counter struct {
	mu   sync.Mutex
	next uint64
	err  error
}

func (c *counter) alloc() (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.next++
	return c.next<<8 | 7, nil
}

func waitReady(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Ready() < n {
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %d blobs after 5s, want %d", p.Ready(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func regularFiles(t *testing.T, root string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[filepath.Base(p)] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPoolMakesBlobsAhead(t *testing.T) {
	d, err := OpenDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	p := d.NewPool(4, c.alloc, nil)
	waitReady(t, p, 4)
	seen := map[uint64]bool{}
	var taken []Made
	for range 6 {
		m, ok := p.Take()
		if !ok {
			waitReady(t, p, 1)
			continue
		}
		if seen[m.Ino] {
			t.Fatalf("number %d handed out twice", m.Ino)
		}
		seen[m.Ino] = true
		if fi, err := os.Stat(d.Path(m.Ino)); err != nil || fi.Size() != 0 {
			t.Fatalf("blob %d made ahead: %v, %v; want an empty file", m.Ino, fi, err)
		}
		if _, err := m.File.WriteAt([]byte("data"), 0); err != nil {
			t.Fatalf("write to blob %d made ahead: %v", m.Ino, err)
		}
		taken = append(taken, m)
	}
	p.Drop(taken[0])
	if _, err := os.Stat(d.Path(taken[0].Ino)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dropped blob: %v, want removed", err)
	}
	p.Close()
	p.Close()
	select {
	case <-p.done:
	default:
		t.Fatal("the pool's goroutine runs on after Close")
	}
	if _, ok := p.Take(); ok {
		t.Fatal("Take after Close handed out a blob")
	}
	// What Close leaves is what was taken and kept, nothing else.
	files := regularFiles(t, d.Root())
	if len(files) != len(taken)-1 {
		t.Fatalf("after Close: %v, want the %d blobs taken and kept", files, len(taken)-1)
	}
	for _, m := range taken[1:] {
		m.File.Close()
	}
}

// A pool whose allocator fails makes nothing, and still stops.
func TestPoolAllocFails(t *testing.T) {
	d, err := OpenDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	p := d.NewPool(4, (&counter{err: errors.New("read-only")}).alloc, nil)
	time.Sleep(20 * time.Millisecond)
	if m, ok := p.Take(); ok {
		t.Fatalf("took %+v from a pool that cannot allocate", m)
	}
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close of a failing pool hangs")
	}
	var nilPool *Pool
	if _, ok := nilPool.Take(); ok || nilPool.Ready() != 0 {
		t.Fatal("a nil pool handed out a blob")
	}
	nilPool.Close()
}
