package metadata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

// downgradeToV1 rewrites the store in the layout of schema version 1, as
// shedfs wrote it before layout.go: inode records and entries keyed by
// inode number under 'I' and 'D', schema version 1. The values were the
// same then, so this is an older store, made by code.
func downgradeToV1(t *testing.T, s *Store) {
	t.Helper()
	err := s.kv.Update(func(tx Txn) error {
		type rec struct{ k, v []byte }
		var sets, dels []rec
		for _, p := range [][2]byte{{pInode, pInodeV1}, {pEntry, pEntryV1}} {
			if err := tx.Scan([]byte{p[0]}, nil, func(k, v []byte) error {
				old := make([]byte, 9, len(k))
				old[0] = p[1]
				binary.BigEndian.PutUint64(old[1:], s.keys.ino(k))
				sets = append(sets, rec{append(old, k[9:]...), bytes.Clone(v)})
				dels = append(dels, rec{k: bytes.Clone(k)})
				return nil
			}); err != nil {
				return err
			}
		}
		for _, r := range dels {
			if err := tx.Delete(r.k); err != nil {
				return err
			}
		}
		for _, r := range sets {
			if err := tx.Set(r.k, r.v); err != nil {
				return err
			}
		}
		return tx.Set(versionKey(), encodeU64(schemaVersionV1))
	})
	if err != nil {
		t.Fatalf("downgrade to the version 1 layout: %v", err)
	}
}

// layoutEngine opens the same store again and again: embedded, or on etcd
// when SHEDFS_TEST_META=etcd.
type layoutEngine func(t *testing.T, readOnly bool) (*Store, error)

func newLayoutEngine(t *testing.T) layoutEngine {
	if os.Getenv("SHEDFS_TEST_META") == "etcd" {
		cfg := testEtcd(t)
		return func(t *testing.T, ro bool) (*Store, error) { return OpenEtcd(cfg, Options{ReadOnly: ro}) }
	}
	dir := filepath.Join(t.TempDir(), "meta")
	return func(t *testing.T, ro bool) (*Store, error) { return Open(dir, Options{ReadOnly: ro}) }
}

func (e layoutEngine) open(t *testing.T, ro bool) *Store {
	t.Helper()
	s, err := e(t, ro)
	if err != nil {
		t.Fatalf("open (read-only %v): %v", ro, err)
	}
	return s
}

// fillLayout makes a small namespace of every kind of record keyed by
// inode: users, a group, directories, files, a hard link, a symlink,
// xattrs.
func fillLayout(t *testing.T, s *Store) {
	t.Helper()
	alice := must[*shedfs.User](t)(s.AddUser("alice"))
	must[*shedfs.Group](t)(s.AddGroup("team"))
	d := must[*shedfs.Inode](t)(s.Create(alice.Roots.Private, "d", dir(), nil))
	for i := range 20 {
		f := must[*shedfs.Inode](t)(s.Create(d.Ino, fmt.Sprintf("f%02d", i), file(0o644), nil))
		if i == 3 {
			must[error](t)(nil, s.SetXattr(f.Ino, "user.x", []byte("v"), 0, nil))
			must[*shedfs.Inode](t)(s.Link(f.Ino, alice.Roots.Private, "hard"))
		}
	}
	must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), "sym", &shedfs.Inode{Mode: syscall.S_IFLNK | 0o777, Target: "d/f01"}, nil))
	must[*shedfs.Inode](t)(s.Create(alice.Roots.Output, "out", file(0o644), nil))
}

// namespaceOf lists every path reachable from the zone roots with its
// inode, as the API answers it, for comparing a store before and after a
// migration.
func namespaceOf(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	var walk func(path string, ino uint64)
	walk = func(path string, ino uint64) {
		n := must[*shedfs.Inode](t)(s.GetInode(ino))
		out = append(out, fmt.Sprintf("%s %d %o nlink=%d parent=%d %s", path, n.Ino, n.Mode, n.Nlink, n.Parent, n.Target))
		if !n.IsDir() {
			return
		}
		for _, e := range must[[]shedfs.DirEntry](t)(s.ReadDir(ino)) {
			if got := must[*shedfs.Inode](t)(s.Lookup(ino, e.Name)); got.Ino != e.Ino {
				t.Fatalf("lookup %s/%s: %d, readdir says %d", path, e.Name, got.Ino, e.Ino)
			}
			walk(path+"/"+e.Name, e.Ino)
		}
	}
	walk("share", s.ShareRoot())
	for _, u := range must[[]shedfs.User](t)(s.ListUsers()) {
		walk("private:"+u.Name, u.Roots.Private)
		walk("output:"+u.Name, u.Roots.Output)
		walk("uploads:"+u.Name, u.Roots.Uploads)
	}
	for _, g := range must[[]shedfs.Group](t)(s.ListGroups()) {
		walk("group:"+g.Name, g.Root)
	}
	orphans := must[[]uint64](t)(s.Orphans())
	slices.Sort(orphans)
	for _, o := range orphans {
		out = append(out, fmt.Sprintf("orphan %d", o))
	}
	return out
}

// layoutCounts counts the records of each layout in the engine.
func layoutCounts(t *testing.T, s *Store) (old, new int) {
	t.Helper()
	old, new, err := countLayout(s.kv)
	if err != nil {
		t.Fatal(err)
	}
	return old, new
}

func checkClean(t *testing.T, s *Store, what string) {
	t.Helper()
	rep := must[*Report](t)(s.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("check of %s: %s", what, kinds(rep))
	}
}

// A store of schema version 1 (records keyed by inode number) is read as it
// is by a read-only open (fsck --dry-run checks it in that form), and
// migrated by the first writable open: same numbers, same namespace, the
// records under keys in allocation order, version 2.
func TestLayoutMigration(t *testing.T) {
	eng := newLayoutEngine(t)
	s := eng.open(t, false)
	fillLayout(t, s)
	want := namespaceOf(t, s)
	downgradeToV1(t, s)
	must[error](t)(nil, s.Close())

	ro := eng.open(t, true)
	if ro.keys.pInode != pInodeV1 {
		t.Fatalf("read-only open of a version 1 store reads prefix %c", ro.keys.pInode)
	}
	if got := namespaceOf(t, ro); !slices.Equal(got, want) {
		t.Fatalf("version 1 store read as it is:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkClean(t, ro, "a version 1 store")
	old, nw := layoutCounts(t, ro)
	must[error](t)(nil, ro.Close())
	if old == 0 || nw != 0 {
		t.Fatalf("version 1 store holds %d old-form and %d new-form records", old, nw)
	}

	s = eng.open(t, false)
	if o, n := layoutCounts(t, s); o != 0 || n != old {
		t.Fatalf("after migration: %d old-form, %d new-form records, want 0 and %d", o, n, old)
	}
	if got := namespaceOf(t, s); !slices.Equal(got, want) {
		t.Fatalf("migrated store:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkClean(t, s, "a migrated store")
	// New inodes keep to allocation order.
	var last []byte
	for i := range 5 {
		n := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), fmt.Sprintf("new%d", i), file(0o644), nil))
		k := s.keys.inode(n.Ino)
		if last != nil && bytes.Compare(k, last) <= 0 {
			t.Fatalf("inode %d made after the last has key %x <= %x", n.Ino, k, last)
		}
		last = k
	}
	must[error](t)(nil, s.Close())
	var version uint64
	s = eng.open(t, true)
	must[error](t)(nil, s.kv.View(func(tx Txn) error {
		v, err := tx.Get(versionKey())
		if err != nil {
			return err
		}
		version, err = decodeU64(v)
		return err
	}))
	if version != schemaVersion {
		t.Fatalf("schema version after migration: %d", version)
	}
	must[error](t)(nil, s.Close())
}

// A migration cut short (a crash between two batches) leaves records of
// both layouts under version 1: a read-only check reports the store as
// half-migrated and nothing else, and the next writable open finishes it.
func TestLayoutMigrationInterrupted(t *testing.T) {
	eng := newLayoutEngine(t)
	s := eng.open(t, false)
	fillLayout(t, s)
	want := namespaceOf(t, s)
	downgradeToV1(t, s)
	// What a crash after one batch of 5 leaves.
	v2 := keyCodec{perm: s.inos, pInode: pInode, pEntry: pEntry}
	if n, _, err := migrateBatch(s.kv, &v2, pInodeV1, pInode, nil, 5); err != nil || n != 5 {
		t.Fatalf("one batch: %d, %v", n, err)
	}
	must[error](t)(nil, s.Close())

	ro := eng.open(t, true)
	rep := must[*Report](t)(ro.Check(nil, false, nil))
	if kinds(rep) != "layout" || rep.Unrepaired() != 1 || !strings.Contains(rep.Problems[0].Detail, "half way") {
		t.Fatalf("check of a half-migrated store: %s %+v", kinds(rep), rep.Problems)
	}
	must[error](t)(nil, ro.Close())

	s = eng.open(t, false)
	if o, _ := layoutCounts(t, s); o != 0 {
		t.Fatalf("%d old-form records after the migration was finished", o)
	}
	if got := namespaceOf(t, s); !slices.Equal(got, want) {
		t.Fatalf("store after a resumed migration:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkClean(t, s, "a store whose migration was resumed")
	must[error](t)(nil, s.Close())
}

// fsck finds damage in either layout: a version 1 store checked as it is
// (read-only), and the same store migrated.
func TestLayoutCheckBothForms(t *testing.T) {
	eng := newLayoutEngine(t)
	s := eng.open(t, false)
	fillLayout(t, s)
	alice := must[*shedfs.User](t)(s.GetUser("alice"))
	d := must[*shedfs.Inode](t)(s.Lookup(alice.Roots.Private, "d"))
	victim := must[*shedfs.Inode](t)(s.Lookup(d.Ino, "f07"))
	downgradeToV1(t, s)
	// Damage the version 1 form: the record of an inode an entry names.
	must[error](t)(nil, s.kv.Update(func(tx Txn) error { return tx.Delete(formatV1Codec.inode(victim.Ino)) }))
	must[error](t)(nil, s.Close())

	ro := eng.open(t, true)
	rep := must[*Report](t)(ro.Check(nil, false, nil))
	if !strings.Contains(kinds(rep), "dangling-entry") {
		t.Fatalf("check of a damaged version 1 store: %s", kinds(rep))
	}
	must[error](t)(nil, ro.Close())

	s = eng.open(t, false)
	rep = must[*Report](t)(s.Check(nil, false, nil))
	if !strings.Contains(kinds(rep), "dangling-entry") {
		t.Fatalf("check of the damaged store migrated: %s", kinds(rep))
	}
	if rep := must[*Report](t)(s.Check(nil, true, nil)); rep.Unrepaired() != 0 {
		t.Fatalf("repair: %s", kinds(rep))
	}
	checkClean(t, s, "the repaired store")
	must[error](t)(nil, s.Close())
}

// The key of an inode is its allocation order, and names it alone.
func TestKeyCodecOrder(t *testing.T) {
	p := must[*inoPerm](t)(newInoPerm([]byte("0123456789abcdef")))
	for _, k := range []keyCodec{{perm: p, pInode: pInode, pEntry: pEntry}, newKeyCodec(p)} {
		testKeyCodecOrder(t, p, &k)
	}
}

func testKeyCodecOrder(t *testing.T, p *inoPerm, k *keyCodec) {
	// Three passes: the memo's slots filled, then hit, then replaced by
	// other numbers that share them.
	for c := uint64(FirstIno); c < FirstIno+3*orderMemoSlots; c++ {
		ino := p.number(c)
		if got := k.order(ino); got != c+permutedBase {
			t.Fatalf("order of counter value %d: %d", c, got)
		}
		if got := k.ino(k.inode(ino)); got != ino {
			t.Fatalf("inode key of %d reads back as %d", ino, got)
		}
		if got := k.ino(k.entry(ino, "x")); got != ino {
			t.Fatalf("entry key of %d reads back as %d", ino, got)
		}
	}
	for _, ino := range []uint64{1, FirstIno, FirstIno + 7, permutedBase - 1, SyntheticIno, ^uint64(0)} {
		if k.order(ino) != ino || k.number(ino) != ino {
			t.Fatalf("number %d outside the permuted range is not keyed as itself", ino)
		}
	}
}

// On etcd a version 1 store is migrated only when no other daemon serves
// it: one of an older shedfs would go on writing the old keys.
func TestLayoutMigrationWaitsForPeers(t *testing.T) {
	if os.Getenv("SHEDFS_TEST_META") != "etcd" {
		t.Skip("etcd only (SHEDFS_TEST_META=etcd): an embedded store has one process")
	}
	cfg := testEtcd(t)
	a := must[*Store](t)(OpenEtcd(cfg, Options{}))
	fillLayout(t, a)
	want := namespaceOf(t, a)
	downgradeToV1(t, a)
	if b, err := OpenEtcd(cfg, Options{}); err == nil {
		b.Close()
		t.Fatal("a version 1 store another daemon serves was opened (and migrated)")
	} else if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "stop them") {
		t.Fatalf("open beside a peer: %v", err)
	}
	must[error](t)(nil, a.Close())
	b := must[*Store](t)(OpenEtcd(cfg, Options{}))
	defer b.Close()
	if got := namespaceOf(t, b); !slices.Equal(got, want) {
		t.Fatalf("store migrated once alone:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkClean(t, b, "the migrated etcd store")
}
