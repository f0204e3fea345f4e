package metadata

import (
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

// TestEtcdAdmissionCountsReservations: a charge that lands in the stored
// usage directly (an xattr, an import's publish) is admitted with the
// other daemons' allotments of its holder counted as used (their
// writers fill them without asking), and without this daemon's own.
func TestEtcdAdmissionCountsReservations(t *testing.T) {
	a, b := openPair(t)
	h := shedfs.Holder("share")
	f := must[*shedfs.Inode](t)(a.Create(a.ShareRoot(), "f", file(0o644), nil))
	if shedfs.HolderOf(f.Zone) != h {
		t.Fatalf("share's holder is %q", shedfs.HolderOf(f.Zone))
	}
	stored := must[shedfs.Usage](t)(a.Usage(h)).Bytes
	if err := b.Allot(h, 1<<20, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Allot(h, 2<<20, 2<<20, nil); err != nil {
		t.Fatal(err)
	}
	var seen shedfs.Usage
	if err := a.SetXattr(f.Ino, "user.note", []byte("v"), 0, func(c XattrChange) error { seen = c.Usage; return nil }); err != nil {
		t.Fatal(err)
	}
	if seen.Bytes != stored+1<<20 {
		t.Errorf("xattr admitted against %d bytes, want the stored %d and b's allotment of 1 MiB", seen.Bytes, stored)
	}
	stored = must[shedfs.Usage](t)(a.Usage(h)).Bytes
	tmp := must[*shedfs.Inode](t)(a.CreateTmp(a.ShareRoot(), file(0o644), nil))
	if _, err := a.Publish(tmp.Ino, a.ShareRoot(), "g", 10<<10, time.Now(), false, func(u shedfs.Usage, l shedfs.Limit, delta int64) error {
		seen = u
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen.Bytes != stored+1<<20 {
		t.Errorf("publish admitted against %d bytes, want the stored %d and b's allotment of 1 MiB", seen.Bytes, stored)
	}
}
