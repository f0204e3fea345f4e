package metadata

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

// TestCacheCompleteDirLookups: in a directory this store made, a lookup of
// a name nobody made opens no engine snapshot, and every change of the
// directory (create, unlink, rename in and out, a write of another process
// made known by Invalidate) still shows at once.
func TestCacheCompleteDirLookups(t *testing.T) {
	s, kv := newCountingStore(t)
	root := s.ShareRoot()
	d := must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	sub := must[*shedfs.Inode](t)(s.Create(d.Ino, "sub", dir(), nil))
	a := must[*shedfs.Inode](t)(s.Create(d.Ino, "a", file(0o644), nil))
	must[*shedfs.Inode](t)(s.Create(d.Ino, "b", file(0o644), nil))

	before := kv.snaps.Load()
	for i := range 50 {
		name := fmt.Sprintf("new%d", i)
		_, err := s.Lookup(d.Ino, name)
		wantErrno(t, err, syscall.ENOENT)
		_, err = s.Lookup(sub.Ino, name)
		wantErrno(t, err, syscall.ENOENT)
	}
	if n := kv.snaps.Load() - before; n != 0 {
		t.Errorf("%d engine snapshots for lookups of absent names in new directories, want 0", n)
	}

	if n := must[*shedfs.Inode](t)(s.Lookup(d.Ino, "a")); n.Ino != a.Ino {
		t.Fatalf("lookup a: ino %d, want %d", n.Ino, a.Ino)
	}
	c := must[*shedfs.Inode](t)(s.Create(d.Ino, "c", file(0o644), nil))
	if n := must[*shedfs.Inode](t)(s.Lookup(d.Ino, "c")); n.Ino != c.Ino {
		t.Fatalf("lookup c after create: ino %d, want %d", n.Ino, c.Ino)
	}
	must[*shedfs.Inode](t)(s.Unlink(d.Ino, "a", false))
	_, err := s.Lookup(d.Ino, "a")
	wantErrno(t, err, syscall.ENOENT)
	must[*shedfs.Inode](t)(s.Rename(d.Ino, "b", sub.Ino, "b2", 0))
	_, err = s.Lookup(d.Ino, "b")
	wantErrno(t, err, syscall.ENOENT)
	must[*shedfs.Inode](t)(s.Lookup(sub.Ino, "b2"))
	_, err = s.Create(d.Ino, "c", file(0o644), nil)
	wantErrno(t, err, syscall.EEXIST)

	// Another process's entry, made known the way the change feed does.
	ext := must[*shedfs.Inode](t)(s.Create(root, "ext", file(0o644), nil))
	must[error](t)(nil, kv.badgerKV.Update(func(tx Txn) error {
		return tx.Set(s.keys.entry(d.Ino, "ext"), entryValue(ext.Ino, ext.Mode))
	}))
	s.kv.(*cachedKV).Invalidate(s.keys.entry(d.Ino, "ext"))
	if n := must[*shedfs.Inode](t)(s.Lookup(d.Ino, "ext")); n.Ino != ext.Ino {
		t.Fatalf("lookup ext after Invalidate: ino %d, want %d", n.Ino, ext.Ino)
	}
}

// TestCacheCompleteDirEviction: once a present entry of a complete
// directory leaves the cache (evicted, dropped, invalidated), or the
// directory's record is deleted, or the cache is reset, names the cache
// does not hold are asked of the engine again, never answered absent.
func TestCacheCompleteDirEviction(t *testing.T) {
	const dirIno = 7
	present := string(testKeys.entry(dirIno, "present"))
	other := []byte(testKeys.entry(dirIno, "other"))
	setup := func() *cache {
		c := newCache(4)
		c.markComplete([]uint64{dirIno})
		c.end([]cacheWrite{{key: present, val: []byte("v")}}, true, 0, 0)
		if _, absent, ok := c.get(other); !ok || !absent {
			t.Fatalf("complete directory: get(other) = absent %v ok %v, want known absent", absent, ok)
		}
		return c
	}
	missAfter := func(what string, c *cache) {
		t.Helper()
		if v, absent, ok := c.get(other); ok {
			t.Errorf("after %s: get(other) = %q absent %v from the cache, want a miss", what, v, absent)
		}
	}

	c := setup()
	for i := range 8 { // more keys than slots: the present entry is evicted
		c.fill(c.generation(), testKeys.inode(uint64(100+i)), []byte("x"), false, 0)
	}
	if _, ok := c.index[present]; ok {
		t.Fatal("the present entry still has its slot; the test evicts nothing")
	}
	missAfter("eviction of a present entry", c)

	c = setup()
	c.invalidate([][]byte{[]byte(present)})
	missAfter("invalidate", c)

	c = setup()
	c.invalidate([][]byte{testKeys.entry(dirIno, "never-cached")})
	missAfter("invalidate of a name the cache did not hold", c)

	c = setup()
	c.begin([]cacheWrite{{key: string(other), val: []byte("w")}})
	if _, _, ok := c.get(other); ok {
		t.Error("a name being written is served from the cache")
	}
	c.end([]cacheWrite{{key: string(other), val: []byte("w")}}, false, 0, 0)
	missAfter("a failed commit", c)

	c = setup()
	c.end([]cacheWrite{{key: string(testKeys.inode(dirIno)), del: true}}, true, 0, 0)
	missAfter("deletion of the directory's record", c)

	c = setup()
	c.reset()
	missAfter("reset", c)

	// An absent slot evicted changes nothing: the name is still absent.
	c = setup()
	c.fill(c.generation(), testKeys.entry(dirIno, "gone"), nil, true, 0)
	c.end([]cacheWrite{{key: present, del: true}}, true, 0, 0)
	for i := range 8 {
		c.fill(c.generation(), testKeys.inode(uint64(200+i)), []byte("x"), false, 0)
	}
	if _, absent, ok := c.get(other); !ok || !absent {
		t.Errorf("after evicting absent slots: get(other) = absent %v ok %v, want known absent", absent, ok)
	}
}
