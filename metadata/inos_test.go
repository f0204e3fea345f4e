package metadata

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

func testPerm(t *testing.T) *inoPerm {
	t.Helper()
	p, err := newInoPerm([]byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The Feistel network is a permutation: backward undoes forward, and
// number/counter are inverse on the counter range, never yielding a
// reserved number.
func TestInoPermutationInverts(t *testing.T) {
	p := testPerm(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100000 {
		x := rng.Uint64()
		if got := p.backward(p.forward(x)); got != x {
			t.Fatalf("backward(forward(%d)) = %d", x, got)
		}
		c := uint64(i) + FirstIno
		if i%2 == 1 {
			c = rng.Uint64N(maxInoCounter + 1)
		}
		ino := p.number(c)
		if reservedIno(ino) {
			t.Fatalf("number(%d) = %d, a reserved number", c, ino)
		}
		if back, ok := p.counter(ino); !ok || back != c {
			t.Fatalf("counter(number(%d)) = %d, %v", c, back, ok)
		}
	}
	for _, ino := range []uint64{0, 1, FirstIno - 1, SyntheticIno, math.MaxUint64} {
		if _, ok := p.counter(ino); ok {
			t.Errorf("counter(%d) ok for a number the store never assigns", ino)
		}
	}
	if c, ok := p.counter(5000); !ok || c != 5000 {
		t.Errorf("counter of an older store's sequential number 5000 = %d, %v", c, ok)
	}
	if _, err := newInoPerm([]byte("short")); err == nil {
		t.Error("newInoPerm accepts a 5-byte key")
	}
}

// Cycle walking with a reserved set covering nine tenths of the space
// still maps the allowed values one to one onto allowed values, and the
// inverse walk undoes it.
func TestCycleWalk(t *testing.T) {
	p := testPerm(t)
	reserved := func(x uint64) bool { return x%10 != 0 }
	seen := map[uint64]uint64{}
	for i := range uint64(20000) {
		x := i * 10
		y := cycleWalk(x, p.forward, reserved)
		if reserved(y) {
			t.Fatalf("walk(%d) = %d, reserved", x, y)
		}
		if prev, dup := seen[y]; dup {
			t.Fatalf("walk(%d) = walk(%d) = %d", x, prev, y)
		}
		seen[y] = x
		if back := cycleWalk(y, p.backward, reserved); back != x {
			t.Fatalf("inverse walk(%d) = %d, want %d", y, back, x)
		}
	}
}

// Sequential creates by one user show no arithmetic relation: no two
// numbers are close, the gaps are not constant, and a gap tells nothing
// about the creates made in between by someone else.
func TestInoNumbersRevealNothing(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	var inos []uint64
	for i := range 64 {
		n := must[*shedfs.Inode](t)(s.Create(root, fmt.Sprintf("carol-%d", i), file(0o644), nil))
		inos = append(inos, n.Ino)
	}
	const near = 1 << 20
	for i := range inos {
		if reservedIno(inos[i]) {
			t.Fatalf("create %d got reserved number %d", i, inos[i])
		}
		for j := range i {
			if d := absDiff(inos[i], inos[j]); d < near {
				t.Fatalf("creates %d and %d got numbers %d apart (%d, %d)", j, i, d, inos[j], inos[i])
			}
		}
	}
	gaps := map[uint64]bool{}
	for i := 1; i < len(inos); i++ {
		gaps[inos[i]-inos[i-1]] = true
	}
	if len(gaps) < len(inos)-1 {
		t.Errorf("%d distinct gaps between %d sequential creates", len(gaps), len(inos))
	}

	// The case: carol, then 37 creates of alice elsewhere, then
	// carol again.
	a := must[*shedfs.Inode](t)(s.Create(root, "carol-a", file(0o644), nil)).Ino
	other := must[*shedfs.Inode](t)(s.Create(root, "alice-dir", dir(), nil)).Ino
	for i := range 37 {
		must[*shedfs.Inode](t)(s.Create(other, fmt.Sprintf("f%d", i), file(0o644), nil))
	}
	b := must[*shedfs.Inode](t)(s.Create(root, "carol-b", file(0o644), nil)).Ino
	if d := absDiff(a, b); d < near {
		t.Errorf("carol's two numbers are %d apart across 38 other creates", d)
	}
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// Many allocations, across lease boundaries, never repeat a number nor
// yield a reserved one.
func TestInoUniqueMany(t *testing.T) {
	s := newStore(t)
	seen := map[uint64]bool{s.ShareRoot(): true}
	for i := range 200000 {
		ino, err := s.allocIno()
		if err != nil {
			t.Fatal(err)
		}
		if seen[ino] || reservedIno(ino) {
			t.Fatalf("allocation %d: %d (seen %v)", i, ino, seen[ino])
		}
		seen[ino] = true
	}
}

// Numbers stay stable and unique across a clean restart and across a stop
// that loses the in-memory lease (as a crash does); the key is kept in the
// store.
func TestInoAcrossRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	seen := map[uint64]string{}
	create := func(s *Store, round int) {
		t.Helper()
		for i := range 1500 {
			name := fmt.Sprintf("r%d-%d", round, i)
			n := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), name, file(0o644), nil))
			if prev, dup := seen[n.Ino]; dup || reservedIno(n.Ino) {
				t.Fatalf("%s got %d, already %q", name, n.Ino, prev)
			}
			seen[n.Ino] = name
		}
	}
	check := func(s *Store) {
		t.Helper()
		for ino, name := range seen {
			if n, err := s.Lookup(s.ShareRoot(), name); err != nil || n.Ino != ino {
				t.Fatalf("after reopen %s: %v, %v; want ino %d", name, n, err, ino)
			}
		}
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	create(s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(s)
	create(s, 1)
	// Drop the engine without Close: the rest of the lease is lost.
	if err := s.kv.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	if s.WasClean() {
		t.Fatal("store dropped without Close reports a clean stop")
	}
	check(s)
	create(s, 2)
	if rep := must[*Report](t)(s.Check(nil, false, nil)); len(rep.Problems) != 0 {
		t.Errorf("check after restarts: %s", kinds(rep))
	}
}

// A store made before numbers were permuted has sequential numbers and no
// key: it gets a key at the next open, its numbers stay valid, and new
// numbers never meet them.
func TestInoOlderStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// What an older store holds: no key, a counter just past its numbers,
	// and an inode with a sequential number below it.
	legacy := uint64(FirstIno + 7)
	rec := &shedfs.Inode{Ino: legacy, Mode: syscall.S_IFREG | 0o644, Nlink: 1, Parent: s.ShareRoot(), Zone: shedfs.Zone{Kind: shedfs.ZoneShare}}
	downgradeToV1(t, s) // the key layout of such a store
	err = s.kv.Update(func(tx Txn) error {
		if err := tx.Delete(stateKey(stateInoKey)); err != nil {
			return err
		}
		if err := tx.Set(nextInoKey(), encodeU64(FirstIno+10)); err != nil {
			return err
		}
		if err := tx.Set(formatV1Codec.inode(legacy), encodeInode(rec)); err != nil {
			return err
		}
		return tx.Set(formatV1Codec.entry(s.ShareRoot(), "old"), entryValue(legacy, rec.Mode))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a store without a key: %v", err)
	}
	if _, err := ro.allocIno(); err == nil {
		t.Error("read-only store allocated a number")
	}
	ro.Close()

	s = openTest(t, dir)
	if got := must[*shedfs.Inode](t)(s.Lookup(s.ShareRoot(), "old")); got.Ino != legacy {
		t.Fatalf("older number after reopen: %d", got.Ino)
	}
	for i := range 100 {
		n := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), fmt.Sprintf("new-%d", i), file(0o644), nil))
		if n.Ino < permutedBase || reservedIno(n.Ino) {
			t.Fatalf("new number %d in an older store", n.Ino)
		}
	}
}

// fsck finds a counter lease behind a number in use and repairs it, so
// that later allocations stay unique.
func TestCheckInoLease(t *testing.T) {
	s := newStore(t)
	var inos []uint64
	for i := range 50 {
		inos = append(inos, must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), fmt.Sprintf("f%d", i), file(0o644), nil)).Ino)
	}
	if err := s.kv.Update(func(tx Txn) error { return tx.Set(nextInoKey(), encodeU64(FirstIno)) }); err != nil {
		t.Fatal(err)
	}
	if rep := must[*Report](t)(s.Check(nil, false, nil)); kinds(rep) != "ino-lease" {
		t.Fatalf("check of a lease behind its numbers: %s", kinds(rep))
	}
	if rep := must[*Report](t)(s.Check(nil, true, nil)); kinds(rep) != "ino-lease" || rep.Unrepaired() != 0 {
		t.Fatalf("repair: %s, %d unrepaired", kinds(rep), rep.Unrepaired())
	}
	if rep := must[*Report](t)(s.Check(nil, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("check after repair: %s", kinds(rep))
	}
	seen := map[uint64]bool{}
	for _, ino := range inos {
		seen[ino] = true
	}
	for i := range 2000 {
		ino := must[uint64](t)(s.allocIno())
		if seen[ino] {
			t.Fatalf("allocation %d after repair reuses %d", i, ino)
		}
		seen[ino] = true
	}
}

func BenchmarkInoNumber(b *testing.B) {
	p, err := newInoPerm([]byte("0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := range b.N {
		p.number(uint64(i))
	}
}
