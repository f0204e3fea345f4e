package metadata

import (
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

// TestEtcdTrashRespectsOtherDaemons: a kept file another daemon holds
// open is not freed by this daemon's purge (it becomes an orphan, still
// charged, which the holder reclaims at its last release) nor by its
// evictions (quota, disk, expiry), whose charge and blob must stay while
// the other daemon reads it. Only this daemon's handles are what unused
// says.
func TestEtcdTrashRespectsOtherDaemons(t *testing.T) {
	a, b := openPair(t)
	root := a.ShareRoot()
	always := func(uint64) bool { return true }
	keep := func(name string) *shedfs.Inode {
		t.Helper()
		n := must[*shedfs.Inode](t)(a.Create(root, name, file(0o644), nil))
		size(t, a, n.Ino, 2*uint64(shedfs.ChargeUnit))
		if err := b.Hold(n.Ino); err != nil {
			t.Fatal(err)
		}
		if _, _, kept, err := a.UnlinkTrash(root, name, false, always, &TrashNote{Why: TrashUnlink, Path: name}); err != nil || !kept {
			t.Fatalf("unlink %s into the trash: kept %v, %v", name, kept, err)
		}
		return n
	}
	f := keep("f")
	before := must[shedfs.Usage](t)(a.Usage("share"))

	// Evictions skip it: for the quota, for the disk, for expiry.
	if err := a.SetLimit("share", shedfs.Limit{Bytes: before.Bytes}); err != nil {
		t.Fatal(err)
	}
	if got := must[[]*shedfs.Inode](t)(a.EvictTrash("share", shedfs.ChargeUnit, 0, always)); len(got) != 0 {
		t.Errorf("quota eviction freed %d kept files another daemon holds open", len(got))
	}
	if got := must[[]*shedfs.Inode](t)(a.EvictOldest(1<<20, always)); len(got) != 0 {
		t.Errorf("disk eviction freed %d kept files another daemon holds open", len(got))
	}
	if got := must[[]*shedfs.Inode](t)(a.ExpireTrash(time.Now().Add(time.Hour), nil, 0, always)); len(got) != 0 {
		t.Errorf("expiry freed %d kept files another daemon holds open", len(got))
	}
	if u := must[shedfs.Usage](t)(a.Usage("share")); u != before {
		t.Errorf("usage %+v after the evictions, want %+v: the charge left with the blob still read", u, before)
	}

	// A purge takes it out of the trash, but it stays, charged, until b
	// lets go.
	if _, freed, err := a.PurgeTrash(f.Ino, always); err != nil || freed {
		t.Fatalf("purge on a of a kept file b holds open: freed %v, %v", freed, err)
	}
	if _, err := b.GetInode(f.Ino); err != nil {
		t.Fatalf("inode b holds open after a's purge: %v", err)
	}
	if u := must[shedfs.Usage](t)(a.Usage("share")); u != before {
		t.Errorf("usage %+v after the purge, want %+v while b holds the file", u, before)
	}
	if orphan, err := b.Unhold(f.Ino); err != nil || !orphan {
		t.Fatalf("b lets go: orphan %v, %v", orphan, err)
	}
	if _, err := b.ReclaimIdle(f.Ino); err != nil {
		t.Fatalf("b reclaims the purged file at its last release: %v", err)
	}
	if u := must[shedfs.Usage](t)(b.Usage("share")); u.Bytes != before.Bytes-2*shedfs.ChargeUnit {
		t.Errorf("usage %+v after b's reclaim, want %d bytes", u, before.Bytes-2*shedfs.ChargeUnit)
	}

	// Let go first, the kept file goes at the first eviction.
	g := keep("g")
	if _, err := b.Unhold(g.Ino); err != nil {
		t.Fatal(err)
	}
	if got := must[[]*shedfs.Inode](t)(a.EvictOldest(1, always)); len(got) != 1 || got[0].Ino != g.Ino {
		t.Errorf("disk eviction after b let go: %+v, want g", got)
	}
	rep := must[*Report](t)(a.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
}
