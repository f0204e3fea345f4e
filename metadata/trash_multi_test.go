package metadata

import (
	"errors"
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

// TestEtcdUnlinkTrashUnhold: a daemon's rm of a file it no longer holds
// open but whose open marker it kept (a lingering one) takes the marker
// back in the unlink's own transaction, so that when another daemon that
// holds the kept file open purges it and lets go, it reclaims it at
// once; a plain UnlinkTrash leaves the marker, and the reclaim is refused
// while it stands.
func TestEtcdUnlinkTrashUnhold(t *testing.T) {
	for _, tc := range []struct {
		name   string
		unhold bool
	}{{"the marker goes with the unlink", true}, {"a plain unlink leaves it", false}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := openPair(t)
			root := a.ShareRoot()
			n := must[*shedfs.Inode](t)(a.Create(root, "f", file(0o644), nil))
			size(t, a, n.Ino, 2*uint64(shedfs.ChargeUnit))
			for _, s := range []*Store{a, b} {
				if err := s.Hold(n.Ino); err != nil {
					t.Fatal(err)
				}
			}
			var unhold uint64
			if tc.unhold {
				unhold = n.Ino
			}
			always := func(uint64) bool { return true }
			if _, _, kept, err := a.UnlinkTrashUnhold(root, "f", false, always, &TrashNote{Why: TrashUnlink, Path: "f"}, unhold); err != nil || !kept {
				t.Fatalf("unlink into the trash: kept %v, %v", kept, err)
			}
			if _, freed, err := b.PurgeTrash(n.Ino, func(uint64) bool { return false }); err != nil || freed {
				t.Fatalf("purge on b, which holds it open: freed %v, %v", freed, err)
			}
			if orphan, err := b.Unhold(n.Ino); err != nil || !orphan {
				t.Fatalf("b lets go: orphan %v, %v", orphan, err)
			}
			_, err := b.ReclaimIdle(n.Ino)
			if tc.unhold && err != nil {
				t.Errorf("b's reclaim after a's unlink took a's marker: %v, want it reclaimed", err)
			}
			if !tc.unhold && !errors.Is(err, ErrHeld) {
				t.Errorf("b's reclaim with a's marker standing: %v, want ErrHeld", err)
			}
		})
	}
}

// TestEtcdRenameTrashUnhold: a rename that replaces a file, kept in the
// trash, takes back this daemon's marker of it in its transaction when
// asked, as an rm does (TestEtcdUnlinkTrashUnhold).
func TestEtcdRenameTrashUnhold(t *testing.T) {
	for _, tc := range []struct {
		name   string
		unhold bool
	}{{"the marker goes with the rename", true}, {"a plain rename leaves it", false}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := openPair(t)
			root := a.ShareRoot()
			n := must[*shedfs.Inode](t)(a.Create(root, "f", file(0o644), nil))
			size(t, a, n.Ino, 2*uint64(shedfs.ChargeUnit))
			must[*shedfs.Inode](t)(a.Create(root, "g", file(0o644), nil))
			for _, s := range []*Store{a, b} {
				if err := s.Hold(n.Ino); err != nil {
					t.Fatal(err)
				}
			}
			var unhold uint64
			if tc.unhold {
				unhold = n.Ino
			}
			if _, kept, err := a.RenameTrashUnhold(root, "g", root, "f", 0, &TrashNote{Why: TrashRenameOver, Path: "f"}, nil, unhold); err != nil || !kept {
				t.Fatalf("rename over f: kept %v, %v", kept, err)
			}
			if _, freed, err := b.PurgeTrash(n.Ino, func(uint64) bool { return false }); err != nil || freed {
				t.Fatalf("purge on b, which holds it open: freed %v, %v", freed, err)
			}
			if orphan, err := b.Unhold(n.Ino); err != nil || !orphan {
				t.Fatalf("b lets go: orphan %v, %v", orphan, err)
			}
			_, err := b.ReclaimIdle(n.Ino)
			if tc.unhold && err != nil {
				t.Errorf("b's reclaim after a's rename took a's marker: %v, want it reclaimed", err)
			}
			if !tc.unhold && !errors.Is(err, ErrHeld) {
				t.Errorf("b's reclaim with a's marker standing: %v, want ErrHeld", err)
			}
		})
	}
}
