package metadata

import (
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

// TestTrashUsageTally: once counted, a holder's trash usage follows every
// change to the trash (unlink and rename-over into it, a kept version,
// restore, purge, eviction, expiry) without scanning the trash
// again, and always equals a scan's count.
func TestTrashUsageTally(t *testing.T) {
	s, kv := newCountingStore(t)
	root := s.ShareRoot()
	unused := func(uint64) bool { return true }
	var scans int64
	check := func(step string) {
		t.Helper()
		before := kv.snaps.Load()
		got := must[shedfs.Usage](t)(s.TrashUsage("share"))
		scans += kv.snaps.Load() - before
		want := must[shedfs.Usage](t)(s.scanTrashUsage("share"))
		if got != want {
			t.Fatalf("%s: TrashUsage %+v, a scan counts %+v", step, got, want)
		}
	}
	check("empty")
	ino := map[string]uint64{}
	for i, name := range []string{"a", "b", "c", "d", "e"} {
		n := must[*shedfs.Inode](t)(s.Create(root, name, file(0o644), nil))
		size(t, s, n.Ino, uint64(1000*(i+1)))
		ino[name] = n.Ino
	}
	note := func(p string) *TrashNote { return &TrashNote{By: "bob", Why: TrashUnlink, Path: p} }
	for _, name := range []string{"a", "b", "c"} {
		if _, _, kept, err := s.UnlinkTrash(root, name, false, unused, note(name)); err != nil || !kept {
			t.Fatalf("UnlinkTrash %s: %v kept=%v", name, err, kept)
		}
		check("unlink " + name)
	}
	if _, kept, err := s.RenameTrash(root, "d", root, "e", 0, note("e"), nil); err != nil || !kept {
		t.Fatalf("RenameTrash: %v kept=%v", err, kept)
	}
	check("rename over")
	must[*shedfs.Inode](t)(s.KeepVersion(ino["d"], must[uint64](t)(s.AllocIno()), &TrashNote{Why: TrashTruncate, Path: "e"}))
	check("version")
	if _, _, _, err := s.RestoreTrash(ino["a"], root, "a", note("a")); err != nil {
		t.Fatal(err)
	}
	check("restore")
	if _, _, err := s.PurgeTrash(ino["b"], unused); err != nil {
		t.Fatal(err)
	}
	check("purge")
	if err := s.SetLimit("share", shedfs.Limit{Inodes: must[shedfs.Usage](t)(s.Usage("share")).Inodes}); err != nil {
		t.Fatal(err)
	}
	if out, err := s.EvictTrash("share", 0, 1, unused); err != nil || len(out) != 1 {
		t.Fatalf("EvictTrash: %v, %d evicted", err, len(out))
	}
	if err := s.SetLimit("share", shedfs.Limit{}); err != nil {
		t.Fatal(err)
	}
	check("evict")
	if _, _, _, err := s.UnlinkTrash(root, "a", false, unused, note("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ExpireTrash(time.Now().Add(time.Hour), func(shedfs.Holder) bool { return false }, 0, unused); err != nil {
		t.Fatal(err)
	}
	check("expire")
	if scans != 1 {
		t.Errorf("TrashUsage scanned the trash %d times, want once (its first call)", scans)
	}
	if rep := must[*Report](t)(s.Check(nil, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
	check("after check")
}
