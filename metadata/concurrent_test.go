package metadata

import (
	"fmt"
	"sync"
	"testing"

	"github.com/shedfs/shedfs"
)

// Creates racing in one directory conflict on the parent and the usage
// record; retries must make every one of them land exactly once.
func TestConcurrentCreates(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	const workers, per = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers*per)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if _, err := s.Create(root, fmt.Sprintf("w%d-%d", w, i), file(0o644), nil); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ents := must[[]shedfs.DirEntry](t)(s.ReadDir(root))
	seen := map[uint64]bool{}
	for _, e := range ents {
		if seen[e.Ino] {
			t.Fatalf("inode %d handed out twice", e.Ino)
		}
		seen[e.Ino] = true
	}
	if len(ents) != workers*per {
		t.Fatalf("%d entries", len(ents))
	}
	if u := must[shedfs.Usage](t)(s.Usage("share")); u.Inodes != workers*per+1 {
		t.Fatalf("usage %+v", u)
	}
}

func BenchmarkCreateLookup(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	root := s.ShareRoot()
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("f%d", i)
		if _, err := s.Create(root, name, file(0o644), nil); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Lookup(root, name); err != nil {
			b.Fatal(err)
		}
	}
}
