package vfs

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/zones"
)

// adminNames are the names the admin's operations told fr of, from a
// view of the door "admin".
func adminNames(fr *frontend) []string {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	var names []string
	for v, items := range fr.changes {
		if v.Door() != DoorAdmin || v.Kernel != nil {
			continue
		}
		for _, it := range items {
			if it.Name != "" {
				names = append(names, it.Name)
			}
		}
	}
	return names
}

// TestAdminImport: an import is admitted as a view's growth (the trash
// evicted for room, the quota then deciding), reaches the views through
// Changed from the admin's view, and is recorded with the door "admin".
func TestAdminImport(t *testing.T) {
	f := newFixture(t, nil)
	fr := &frontend{held: map[uint64]bool{}}
	f.core.Attach(fr)
	f.file(t, "old", 8*shedfs.ChargeUnit)
	f.trash(t, "old")
	f.limit(t, shedfs.Limit{Bytes: 10 * shedfs.ChargeUnit})
	body := strings.Repeat("x", 6*shedfs.ChargeUnit)
	res, err := f.core.Admin("alice").Import(context.Background(), Import{Name: "in.csv", Body: strings.NewReader(body), Size: int64(len(body))})
	if err != nil {
		t.Fatalf("import into a quota the trash fills: %v", err)
	}
	if res.Path != "uploads/in.csv" || res.Size != int64(len(body)) || f.trashed(t) != 0 {
		t.Errorf("import %+v, trash %d: want uploads/in.csv of %d, the trash evicted", res, f.trashed(t), len(body))
	}
	if got := adminNames(fr); len(got) != 1 || got[0] != "in.csv" {
		t.Errorf("views told %v, want [in.csv]", got)
	}
	e := f.events.last()
	if e.Op != "import" || e.Door != DoorAdmin || e.User != "alice" || e.Zone != zones.UploadsZone("alice") {
		t.Errorf("recorded %+v, want an import through the door admin", e)
	}
	// Again, now over the quota: EDQUOT with the operator's line.
	_, err = f.core.Admin("alice").Import(context.Background(), Import{Name: "more", Body: strings.NewReader(body), Size: int64(len(body))})
	var ae *AdminError
	if !errors.As(err, &ae) || !errors.Is(err, syscall.EDQUOT) || !strings.Contains(ae.Msg, "over the quota of user alice") {
		t.Errorf("import over the quota: %v", err)
	}
}

// TestAdminTrashRestore: a kept file put back by the admin reaches the
// views through Changed and is recorded with the door "admin".
func TestAdminTrashRestore(t *testing.T) {
	f := newFixture(t, nil)
	fr := &frontend{held: map[uint64]bool{}}
	f.core.Attach(fr)
	n := f.file(t, "doc", 10)
	f.trash(t, "doc")
	replaced, err := f.core.Admin("alice").RestoreKept(n.Ino, "trash/doc", "doc", zones.PrivateZone("alice").Label(), "sub/doc")
	if err != nil || replaced {
		t.Fatalf("restore: %v replaced=%v", err, replaced)
	}
	if got := adminNames(fr); len(got) != 2 || got[0] != "sub" || got[1] != "doc" {
		t.Errorf("views told %v, want [sub doc]", got)
	}
	if e := f.events.last(); e.Op != "admin_trash_restore" || e.Door != DoorAdmin || e.Path != "/sub/doc" {
		t.Errorf("recorded %+v", e)
	}
	if _, err := f.core.Admin("alice").RestoreKept(n.Ino, "trash/doc", "doc", zones.PrivateZone("alice").Label(), "share/doc"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("restore across zones: %v", err)
	}
}
