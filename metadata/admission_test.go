package metadata

import (
	"testing"
	"time"
)

// TestEtcdAdmissionCountsReservations: a charge that lands in the stored
// usage directly (an xattr, an import's publish) is admitted with the
// other daemons' reservations of its holder counted as used (their
// writers fill them without asking), and without this daemon's own.
func TestEtcdAdmissionCountsReservations(t *testing.T) {
	a, b := openPair(t)
	h := Holder("share")
	f := must[*Inode](t)(a.Create(a.ShareRoot(), "f", file(0o644), nil))
	if HolderOf(f.Zone) != h {
		t.Fatalf("share's holder is %q", HolderOf(f.Zone))
	}
	stored := must[Usage](t)(a.Usage(h)).Bytes
	if err := b.Reserve(h, 1<<20, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Reserve(h, 2<<20, 2<<20, nil); err != nil {
		t.Fatal(err)
	}
	var seen Usage
	if err := a.SetXattr(f.Ino, "user.note", []byte("v"), 0, func(c XattrChange) error { seen = c.Usage; return nil }); err != nil {
		t.Fatal(err)
	}
	if seen.Bytes != stored+1<<20 {
		t.Errorf("xattr admitted against %d bytes, want the stored %d and b's reservation of 1 MiB", seen.Bytes, stored)
	}
	stored = must[Usage](t)(a.Usage(h)).Bytes
	tmp := must[*Inode](t)(a.CreateTmp(a.ShareRoot(), file(0o644), nil))
	if _, err := a.Publish(tmp.Ino, a.ShareRoot(), "g", 10<<10, time.Now(), false, func(u Usage, l Limit, delta int64) error {
		seen = u
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen.Bytes != stored+1<<20 {
		t.Errorf("publish admitted against %d bytes, want the stored %d and b's reservation of 1 MiB", seen.Bytes, stored)
	}
}
