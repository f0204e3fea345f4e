package metadata

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/shedfs/shedfs"
)

// TestGetInodes: records read in runs are the records getInode reads one
// by one, for runs with gaps (another directory's files made between), a
// number with no record, two names of one inode, and a directory; and a
// cold batch leaves them in the cache, as point reads did.
func TestGetInodes(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	d := must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	e := must[*shedfs.Inode](t)(s.Create(root, "e", dir(), nil))
	var names []string
	for i := range 60 {
		name := fmt.Sprintf("f%02d", i)
		tmpl := file(0o644)
		if i%17 == 0 {
			tmpl = dir()
		}
		must[*shedfs.Inode](t)(s.Create(d.Ino, name, tmpl, nil))
		names = append(names, name)
		// Gaps in allocation order below, at and above runGap.
		for j := range (i % 4) * runGap / 2 {
			must[*shedfs.Inode](t)(s.Create(e.Ino, fmt.Sprintf("e%d-%d", i, j), file(0o600), nil))
		}
	}
	f03 := must[*shedfs.Inode](t)(s.Lookup(d.Ino, "f03"))
	must[*shedfs.Inode](t)(s.Link(f03.Ino, d.Ino, "link-to-f03"))
	names = append(names, "link-to-f03", "missing")
	ck, cached := s.kv.(*cachedKV)
	if cached {
		ck.c.reset()
	}
	recs := must[[]*shedfs.Inode](t)(s.LookupNames(d.Ino, names))
	checkLookupNames(t, s, d.Ino, names, recs)

	var inos []uint64
	for _, r := range recs[:len(recs)-1] {
		inos = append(inos, r.Ino)
	}
	// A number with no record, next in order to the last one made,
	// within a run with it.
	last := must[*shedfs.Inode](t)(s.Create(d.Ino, "last", file(0o644), nil))
	inos = append(inos, last.Ino)
	absent := s.keys.number(s.keys.order(last.Ino) + 1)
	if _, err := s.GetInode(absent); err == nil {
		t.Fatalf("inode %d exists", absent)
	}
	inos = append(inos, absent, inos[5])
	if cached {
		ck.c.reset()
	}
	var got []*shedfs.Inode
	if err := s.view(func(o *op) error {
		var err error
		got, err = getInodes(o.tx, o.k, inos)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i, ino := range inos {
		want, err := s.GetInode(ino)
		switch {
		case err != nil && got[i] != nil:
			t.Errorf("inode %d: read %+v, GetInode says %v", ino, got[i], err)
		case err == nil && (got[i] == nil || *got[i] != *want):
			t.Errorf("inode %d: read %+v, GetInode %+v", ino, got[i], want)
		}
	}
	if got[len(got)-1] == got[5] {
		t.Error("one record handed out twice: each caller may change its own")
	}
}

// TestLookupNamesScans: a cold batch of a directory's records reads the
// engine with a scan per run, not a point read per name, and fills the
// cache, so that lookups of the same names then read nothing.
func TestLookupNamesScans(t *testing.T) {
	s, kv := newCountingStore(t)
	root := s.ShareRoot()
	d := must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	var names []string
	for i := range 200 {
		name := fmt.Sprintf("f%03d", i)
		must[*shedfs.Inode](t)(s.Create(d.Ino, name, file(0o644), nil))
		names = append(names, name)
	}
	s.kv.(*cachedKV).c.reset()
	kv.gets.Store(0)
	recs := must[[]*shedfs.Inode](t)(s.LookupNames(d.Ino, names))
	if n := kv.gets.Load(); n > 2 {
		t.Errorf("%d engine point reads for %d names", n, len(names))
	}
	checkLookupNames(t, s, d.Ino, names, recs)
	before := kv.snaps.Load()
	for _, name := range names {
		must[*shedfs.Inode](t)(s.Lookup(d.Ino, name))
	}
	if n := kv.snaps.Load() - before; n != 0 {
		t.Errorf("%d engine snapshots for lookups after the batch, want 0", n)
	}
}

// gettingTxn counts the point reads of a snapshot into gets.
type gettingTxn struct {
	Txn
	gets *atomic.Int64
}

func (t gettingTxn) Get(key []byte) ([]byte, error) {
	t.gets.Add(1)
	return t.Txn.Get(key)
}
