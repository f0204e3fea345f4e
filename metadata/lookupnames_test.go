package metadata

import (
	"testing"

	"github.com/shedfs/shedfs"
)

// TestLookupNames: a batch resolves each name as Lookup does (nil where
// Lookup fails), in one engine transaction however many names miss the
// cache.
func TestLookupNames(t *testing.T) {
	s, kv := newCountingStore(t)
	root := s.ShareRoot()
	d := must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	var names []string
	for _, name := range []string{"a", "b", "c", "sub"} {
		tmpl := file(0o644)
		if name == "sub" {
			tmpl = dir()
		}
		must[*shedfs.Inode](t)(s.Create(d.Ino, name, tmpl, nil))
		names = append(names, name)
	}
	names = append(names, "missing", "..", "")
	// Cold: the first read misses and the rest is scanned; warm: all
	// from the cache.
	for _, c := range []struct {
		name  string
		reset bool
		snaps int64
	}{{"cold", true, 1}, {"warm", false, 0}} {
		t.Run(c.name, func(t *testing.T) {
			if c.reset {
				s.kv.(*cachedKV).c.reset()
			}
			before := kv.snaps.Load()
			recs := must[[]*shedfs.Inode](t)(s.LookupNames(d.Ino, names))
			if n := kv.snaps.Load() - before; n != c.snaps {
				t.Errorf("%d engine snapshots for %d names, want %d", n, len(names), c.snaps)
			}
			checkLookupNames(t, s, d.Ino, names, recs)
		})
	}
}

func checkLookupNames(t *testing.T, s *Store, parent uint64, names []string, recs []*shedfs.Inode) {
	t.Helper()
	if len(recs) != len(names) {
		t.Fatalf("%d records for %d names", len(recs), len(names))
	}
	for i, name := range names {
		want, err := s.Lookup(parent, name)
		got := recs[i]
		switch {
		case err != nil && got != nil:
			t.Errorf("%q: batch found inode %d, Lookup says %v", name, got.Ino, err)
		case err == nil && got == nil:
			t.Errorf("%q: batch found nothing, Lookup found inode %d", name, want.Ino)
		case err == nil && (got.Ino != want.Ino || got.Mode != want.Mode || got.Nlink != want.Nlink || got.Size != want.Size):
			t.Errorf("%q: batch %+v, Lookup %+v", name, got, want)
		}
	}
}
