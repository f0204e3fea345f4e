package metadata

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

// countingKV counts the engine snapshots a Store opens, and the point
// reads in them.
type countingKV struct {
	*badgerKV
	snaps atomic.Int64
	gets  atomic.Int64
}

func (c *countingKV) View(fn func(tx Txn) error) error {
	c.snaps.Add(1)
	return c.badgerKV.View(fn)
}

func (c *countingKV) snapshot() (Txn, func()) {
	c.snaps.Add(1)
	tx, discard := c.badgerKV.snapshot()
	return gettingTxn{Txn: tx, gets: &c.gets}, discard
}

func newCountingStore(t *testing.T) (*Store, *countingKV) {
	t.Helper()
	kv, err := openBadger("", true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ckv := &countingKV{badgerKV: kv.(*badgerKV)}
	s, err := openKV(ckv, "", false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ckv
}

// TestCacheServesKnownEntries: lookup, getattr and quota reads of what
// this store just wrote, and a lookup of a name known absent, open no
// engine snapshot, and always return the latest commit.
func TestCacheServesKnownEntries(t *testing.T) {
	s, kv := newCountingStore(t)
	root := s.ShareRoot()
	d := must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	f := must[*shedfs.Inode](t)(s.Create(d.Ino, "f", file(0o644), nil))
	must[*shedfs.Inode](t)(s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size = 5000; return nil }, nil))
	var before int64
	for round := range 3 {
		if round == 1 {
			// Round 0 reads what no write put in: the absent
			// name and limit.
			before = kv.snaps.Load()
		}
		n := must[*shedfs.Inode](t)(s.Lookup(d.Ino, "f"))
		if n.Ino != f.Ino || n.Size != 5000 {
			t.Fatalf("lookup: ino %d size %d", n.Ino, n.Size)
		}
		if n := must[*shedfs.Inode](t)(s.GetInode(d.Ino)); n.Nlink != 2 {
			t.Fatalf("directory nlink %d", n.Nlink)
		}
		if u := must[shedfs.Usage](t)(s.Usage("share")); u.Inodes != 3 || u.Bytes != 8192 {
			t.Fatalf("usage %+v", u)
		}
		must[shedfs.Limit](t)(s.GetLimit("share"))
		_, err := s.Lookup(d.Ino, "missing")
		wantErrno(t, err, syscall.ENOENT)
		_, err = s.Lookup(f.Ino, "x")
		wantErrno(t, err, syscall.ENOTDIR)
	}
	if n := kv.snaps.Load() - before; n != 0 {
		t.Errorf("%d engine snapshots for reads of known records, want 0", n)
	}
	// Changes show at once: unlink, reclaim, a new limit.
	must[*shedfs.Inode](t)(s.Unlink(d.Ino, "f", false))
	_, err := s.Lookup(d.Ino, "f")
	wantErrno(t, err, syscall.ENOENT)
	must[*shedfs.Inode](t)(s.Reclaim(f.Ino))
	_, err = s.GetInode(f.Ino)
	wantErrno(t, err, syscall.ENOENT)
	must[error](t)(nil, s.SetLimit("share", shedfs.Limit{Inodes: 10}))
	if l := must[shedfs.Limit](t)(s.GetLimit("share")); l.Inodes != 10 {
		t.Fatalf("limit %+v after SetLimit", l)
	}
	// Invalidate drops what another writer changed in the engine.
	must[error](t)(nil, kv.badgerKV.Update(func(tx Txn) error {
		n := *d
		n.Mode = syscall.S_IFDIR | 0o700
		return tx.Set(s.keys.inode(d.Ino), encodeInode(&n))
	}))
	if n := must[*shedfs.Inode](t)(s.GetInode(d.Ino)); n.Mode&0o777 != 0o755 {
		t.Fatalf("before Invalidate: mode %o, want the cached 755", n.Mode)
	}
	s.kv.(*cachedKV).Invalidate(s.keys.inode(d.Ino))
	if n := must[*shedfs.Inode](t)(s.GetInode(d.Ino)); n.Mode&0o777 != 0o700 {
		t.Fatalf("after Invalidate: mode %o", n.Mode)
	}
}

// TestCacheReadsOwnWrites: a transaction that writes a cached key and
// reads it again sees its own write, not the cached value.
func TestCacheReadsOwnWrites(t *testing.T) {
	s := newStore(t)
	h := shedfs.Holder("share")
	must[shedfs.Usage](t)(s.Usage(h)) // cached
	must[error](t)(nil, s.update(func(o *op) error {
		if err := o.charge(h, 4096, 1); err != nil {
			return err
		}
		return o.charge(h, 4096, 1)
	}))
	if u := must[shedfs.Usage](t)(s.Usage(h)); u.Bytes != 8192 || u.Inodes != 3 {
		t.Fatalf("usage %+v after two charges in one transaction, want 8192 bytes, 3 inodes", u)
	}
}

// TestCacheViewMoved: a read-only transaction that got a value from the
// cache, and then misses after a write changed that value, runs again and
// sees one moment, never a mix.
func TestCacheViewMoved(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	a := must[*shedfs.Inode](t)(s.Create(root, "a", file(0o644), nil))
	b := must[*shedfs.Inode](t)(s.Create(root, "b", file(0o644), nil))
	s.kv.(*cachedKV).Invalidate(s.keys.inode(b.Ino))
	runs := 0
	var sizeA, sizeB uint64
	must[error](t)(nil, s.kv.View(func(tx Txn) error {
		runs++
		na, err := getInode(tx, &s.keys, a.Ino) // a hit
		if err != nil {
			return err
		}
		if runs == 1 {
			// Both change while this transaction runs.
			for _, ino := range []uint64{a.Ino, b.Ino} {
				if _, err := s.Update(ino, func(n *shedfs.Inode) error { n.Size = 7; return nil }, nil); err != nil {
					return err
				}
			}
			s.kv.(*cachedKV).Invalidate(s.keys.inode(b.Ino))
		}
		nb, err := getInode(tx, &s.keys, b.Ino) // a miss: the snapshot
		if err != nil {
			return err
		}
		sizeA, sizeB = na.Size, nb.Size
		return nil
	}))
	if runs != 2 || sizeA != 7 || sizeB != 7 {
		t.Fatalf("%d runs, sizes %d and %d; want 2 runs and both sizes 7", runs, sizeA, sizeB)
	}
}

// TestCacheNeverStale races readers against writers: once a write has
// returned, no reader sees an older value.
func TestCacheNeverStale(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	const files, rounds = 4, 300
	inos := make([]uint64, files)
	var done [files]atomic.Uint64
	for i := range inos {
		inos[i] = must[*shedfs.Inode](t)(s.Create(root, fmt.Sprintf("f%d", i), file(0o644), nil)).Ino
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 16)
	for i := range files {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for r := uint64(1); r <= rounds; r++ {
				if _, err := s.Update(inos[i], func(n *shedfs.Inode) error { n.Size = r; return nil }, nil); err != nil {
					errs <- err
					return
				}
				done[i].Store(r)
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				want := done[i].Load()
				n, err := s.Lookup(root, fmt.Sprintf("f%d", i))
				if err != nil {
					errs <- err
					return
				}
				if n.Size < want {
					errs <- fmt.Errorf("f%d: size %d after a write of %d returned", i, n.Size, want)
					return
				}
			}
		}()
	}
	for i := range files {
		for done[i].Load() < rounds {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			syscall.Gettid()
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestCacheKeepsRecordsAcrossRewrites: a record written once stays cached
// while other records are rewritten many times. A rewrite updates its
// record's slot in place; it does not take a fresh slot each time and so
// push out what was written once and not read yet (the entries of an
// untar, evicted by its many setattrs before find read them).
func TestCacheKeepsRecordsAcrossRewrites(t *testing.T) {
	s, kv := newCountingStore(t)
	s.kv.(*cachedKV).c = newCache(64)
	root := s.ShareRoot()
	f := must[*shedfs.Inode](t)(s.Create(root, "f", file(0o644), nil))
	g := must[*shedfs.Inode](t)(s.Create(root, "g", file(0o644), nil))
	for i := range 500 {
		must[*shedfs.Inode](t)(s.Update(g.Ino, func(n *shedfs.Inode) error { n.Size = uint64(i); return nil }, nil))
	}
	before := kv.snaps.Load()
	if n := must[*shedfs.Inode](t)(s.Lookup(root, "f")); n.Ino != f.Ino {
		t.Fatalf("lookup f: ino %d, want %d", n.Ino, f.Ino)
	}
	if n := must[*shedfs.Inode](t)(s.GetInode(g.Ino)); n.Size != 499 {
		t.Fatalf("g size %d, want 499", n.Size)
	}
	if n := kv.snaps.Load() - before; n != 0 {
		t.Errorf("%d engine snapshots after 500 rewrites of another record, want 0", n)
	}
}
