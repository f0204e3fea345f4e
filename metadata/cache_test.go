package metadata

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// countingKV counts the read-only transactions a Store opens.
type countingKV struct {
	KV
	views atomic.Int64
}

func (c *countingKV) View(fn func(tx Txn) error) error {
	c.views.Add(1)
	return c.KV.View(fn)
}

func newCountingStore(t *testing.T) (*Store, *countingKV) {
	t.Helper()
	kv, err := openBadger("", true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ckv := &countingKV{KV: kv}
	s, err := openKV(ckv, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ckv
}

// TestCacheServesKnownEntries: lookup, getattr and quota reads of what
// this store just wrote, and a lookup of a name known absent, open no
// transaction, and always return the latest commit.
func TestCacheServesKnownEntries(t *testing.T) {
	s, kv := newCountingStore(t)
	root := s.ShareRoot()
	d := must[*Inode](t)(s.Create(root, "d", dir(), nil))
	f := must[*Inode](t)(s.Create(d.Ino, "f", file(0o644), nil))
	must[*Inode](t)(s.Update(f.Ino, func(n *Inode) error { n.Size = 5000; return nil }, nil))
	_, err := s.Lookup(d.Ino, "missing")
	wantErrno(t, err, syscall.ENOENT)
	var before int64
	for round := range 3 {
		if round == 1 {
			// Round 0 reads what no write put in: the absent
			// limit, the ENOTDIR lookup.
			before = kv.views.Load()
		}
		n := must[*Inode](t)(s.Lookup(d.Ino, "f"))
		if n.Ino != f.Ino || n.Size != 5000 {
			t.Fatalf("lookup: ino %d size %d", n.Ino, n.Size)
		}
		if n := must[*Inode](t)(s.GetInode(d.Ino)); n.Nlink != 2 {
			t.Fatalf("directory nlink %d", n.Nlink)
		}
		if u := must[Usage](t)(s.Usage("share")); u.Inodes != 3 || u.Bytes != 8192 {
			t.Fatalf("usage %+v", u)
		}
		must[Limit](t)(s.GetLimit("share"))
		_, err := s.Lookup(d.Ino, "missing")
		wantErrno(t, err, syscall.ENOENT)
		_, err = s.Lookup(f.Ino, "x")
		wantErrno(t, err, syscall.ENOTDIR)
	}
	if n := kv.views.Load() - before; n != 0 {
		t.Errorf("%d transactions for reads of known records, want 0", n)
	}
	// Changes show at once: unlink, rename, a new limit.
	must[*Inode](t)(s.Unlink(d.Ino, "f", false))
	_, err = s.Lookup(d.Ino, "f")
	wantErrno(t, err, syscall.ENOENT)
	must[*Inode](t)(s.Reclaim(f.Ino))
	_, err = s.GetInode(f.Ino)
	wantErrno(t, err, syscall.ENOENT)
	must[error](t)(nil, s.SetLimit("share", Limit{Inodes: 10}))
	if l := must[Limit](t)(s.GetLimit("share")); l.Inodes != 10 {
		t.Fatalf("limit %+v after SetLimit", l)
	}
	// Invalidate drops what another writer changed.
	must[error](t)(nil, s.kv.Update(func(tx Txn) error {
		n := *d
		n.Mode = syscall.S_IFDIR | 0o700
		return tx.Set(inodeKey(d.Ino), encodeInode(&n))
	}))
	s.cache.Invalidate(inodeKey(d.Ino))
	if n := must[*Inode](t)(s.GetInode(d.Ino)); n.Mode&0o777 != 0o700 {
		t.Fatalf("after Invalidate: mode %o", n.Mode)
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
		inos[i] = must[*Inode](t)(s.Create(root, fmt.Sprintf("f%d", i), file(0o644), nil)).Ino
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 16)
	for i := range files {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for r := uint64(1); r <= rounds; r++ {
				if _, err := s.Update(inos[i], func(n *Inode) error { n.Size = r; return nil }, nil); err != nil {
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
			syscallYield()
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func syscallYield() { syscall.Gettid() }

// TestCacheTxnReadsItsOwnWrites: within one transaction, a cached key
// read after it was set returns the new value, not the cached old one (two
// charges of one holder in one transaction must add up), and a
// transaction that fails leaves the cache with the committed value.
func TestCacheTxnReadsItsOwnWrites(t *testing.T) {
	s, _ := newCountingStore(t)
	h := HolderOf(Zone{Kind: ZoneShare})
	before := must[Usage](t)(s.Usage(h)) // cached now
	if err := s.update(func(o *op) error {
		if err := o.charge(h, 100, 1); err != nil {
			return err
		}
		return o.charge(h, 20, 0)
	}); err != nil {
		t.Fatal(err)
	}
	want := Usage{Bytes: before.Bytes + 120, Inodes: before.Inodes + 1}
	if u := must[Usage](t)(s.Usage(h)); u != want {
		t.Fatalf("usage after two charges in one transaction: %+v, want %+v", u, want)
	}
	err := s.update(func(o *op) error {
		if err := o.charge(h, 7, 0); err != nil {
			return err
		}
		if _, err := o.usage(h); err != nil {
			return err
		}
		return syscall.EIO
	})
	wantErrno(t, err, syscall.EIO)
	if u := must[Usage](t)(s.Usage(h)); u != want {
		t.Fatalf("usage after a failed transaction: %+v, want %+v", u, want)
	}
}

// TestCacheFollowsMainWritePaths: xattr charges, their removal, a publish
// over an inline file and the reclaim of what it replaced all leave the
// cache equal to the engine; a published file is a blob even when made
// with Inline set.
func TestCacheFollowsMainWritePaths(t *testing.T) {
	s, _ := newCountingStore(t)
	root := s.ShareRoot()
	h := HolderOf(Zone{Kind: ZoneShare})
	same := func(step string, inos ...uint64) {
		t.Helper()
		var u Usage
		engine := map[uint64]*Inode{}
		if err := s.kv.View(func(tx Txn) error {
			var err error
			if u, err = readUsage(tx, h); err != nil {
				return err
			}
			for _, ino := range inos {
				n, err := getInode(tx, ino)
				if err != nil && err != syscall.ENOENT {
					return err
				}
				engine[ino] = n
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if c := must[Usage](t)(s.Usage(h)); c != u {
			t.Fatalf("%s: cached usage %+v, engine %+v", step, c, u)
		}
		for _, ino := range inos {
			c, err := s.GetInode(ino)
			e := engine[ino]
			switch {
			case e == nil && err == nil:
				t.Fatalf("%s: inode %d cached but gone", step, ino)
			case e != nil && err != nil:
				t.Fatalf("%s: inode %d: %v", step, ino, err)
			case e != nil && (c.Size != e.Size || c.Nlink != e.Nlink || c.Inline != e.Inline):
				t.Fatalf("%s: inode %d cached %+v, engine %+v", step, ino, c, e)
			}
		}
	}
	tmpl := file(0o644)
	tmpl.Inline = true
	old := must[*Inode](t)(s.Create(root, "f", tmpl, nil))
	must[*Inode](t)(s.UpdateContent(old.Ino, func(n *Inode) error { n.Size = 3; return nil }, []byte("abc")))
	same("inline write", old.Ino)
	must[error](t)(nil, s.SetXattr(old.Ino, "user.a", make([]byte, 300), 0, nil))
	same("setxattr", old.Ino)
	must[error](t)(nil, s.RemoveXattr(old.Ino, "user.a"))
	same("removexattr", old.Ino)
	must[error](t)(nil, s.SetXattr(old.Ino, "user.b", make([]byte, 100), 0, nil))
	tmp := must[*Inode](t)(s.CreateTmp(root, tmpl, nil))
	same("createtmp", tmp.Ino)
	replaced := must[*Inode](t)(s.Publish(tmp.Ino, root, "f", 70000, time.Now(), true, nil))
	same("publish", tmp.Ino, old.Ino)
	if n := must[*Inode](t)(s.Lookup(root, "f")); n.Ino != tmp.Ino || n.Inline {
		t.Fatalf("published: ino %d (want %d) inline %v", n.Ino, tmp.Ino, n.Inline)
	}
	must[*Inode](t)(s.Reclaim(replaced.Ino))
	same("reclaim", tmp.Ino, old.Ino)
	if c := must[[]byte](t)(s.ReadInline(old.Ino)); len(c) != 0 {
		t.Fatalf("inline content after reclaim: %q", c)
	}
}
