package metadata

import (
	"testing"
)

// TestLookupNames: a batch resolves each name as Lookup does (nil where
// Lookup fails), in one engine transaction however many names miss the
// cache.
func TestLookupNames(t *testing.T) {
	s, kv := newCountingStore(t)
	root := s.ShareRoot()
	d := must[*Inode](t)(s.Create(root, "d", dir(), nil))
	var names []string
	for _, name := range []string{"a", "b", "c", "sub"} {
		tmpl := file(0o644)
		if name == "sub" {
			tmpl = dir()
		}
		must[*Inode](t)(s.Create(d.Ino, name, tmpl, nil))
		names = append(names, name)
	}
	names = append(names, "missing", "..", "")
	s.kv.(*cachedKV).c.reset() // every read misses the cache
	before := kv.snaps.Load()
	recs := must[[]*Inode](t)(s.LookupNames(d.Ino, names))
	if n := kv.snaps.Load() - before; n != 1 {
		t.Errorf("%d engine snapshots for %d names, want 1", n, len(names))
	}
	if len(recs) != len(names) {
		t.Fatalf("%d records for %d names", len(recs), len(names))
	}
	for i, name := range names {
		want, err := s.Lookup(d.Ino, name)
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
