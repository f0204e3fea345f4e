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

// TestAdminPrincipals: the admin's changes of groups and users change the
// store and tell the frontends in the same step, with no mount.
func TestAdminPrincipals(t *testing.T) {
	f := newFixture(t, nil)
	fr := &frontend{held: map[uint64]bool{}}
	f.core.Attach(fr)
	if _, err := f.store.AddGroup("team"); err != nil {
		t.Fatal(err)
	}
	if err := f.core.Admin("alice").JoinGroup("team"); err != nil {
		t.Fatal(err)
	}
	if gs, _ := f.store.GroupsOf("alice"); len(gs) != 1 || len(fr.members) != 1 || fr.members[0] != "alice" {
		t.Fatalf("after join: groups %v, told %v", gs, fr.members)
	}
	if err := f.core.Admin("alice").LeaveGroup("team"); err != nil {
		t.Fatal(err)
	}
	if err := f.core.Admin("alice").LeaveGroup("team"); !errors.Is(err, syscall.ENOENT) && err == nil {
		t.Errorf("leaving a group twice: %v, want an error", err)
	}
	if err := f.core.Admin("alice").JoinGroup("team"); err != nil {
		t.Fatal(err)
	}
	fr.members = nil
	members, err := f.core.RemoveGroup("team")
	if err != nil || len(members) != 1 || len(fr.members) != 1 || fr.members[0] != "alice" {
		t.Fatalf("remove group: %v %v, told %v", members, err, fr.members)
	}
	if _, err := f.store.GetGroup("team"); err == nil {
		t.Errorf("the group is still stored")
	}

	u, opts, err := f.core.Admin("alice").SetOwner(1000, 1001, ViewOptions{Uid: 5, Gid: 5})
	if err != nil || u.Uid != 1000 || !opts.ForceOwner || opts.Uid != 1000 || opts.Gid != 1001 {
		t.Fatalf("set owner: %+v %+v %v", u, opts, err)
	}
	if _, opts, _ = f.core.Admin("alice").SetOwner(0, 0, ViewOptions{Uid: 5, Gid: 5}); opts.ForceOwner || opts.Uid != 5 {
		t.Errorf("owner 0:0 presents %+v, want the default", opts)
	}
	if len(fr.owners) != 2 || fr.owners[0] != "alice 1000:1001" || fr.owners[1] != "alice 5:5" {
		t.Errorf("views told %v", fr.owners)
	}
	bytes := int64(10 * shedfs.ChargeUnit)
	if lim, err := f.core.SetLimit(alice, &bytes, nil); err != nil || lim.Bytes != bytes {
		t.Fatalf("set limit: %+v %v", lim, err)
	}
	if q, _ := f.core.Quota(alice); q.Limit.Bytes != bytes {
		t.Errorf("the next admission decides by %+v, want %d bytes", q.Limit, bytes)
	}
}

// TestAdminDeletions: a trash purge frees the kept files nothing holds
// and tells the frontends; a quarantine delete unlinks every name, tells
// the views through the admin's Changed, and the file goes once nothing
// holds it.
func TestAdminDeletions(t *testing.T) {
	f := newFixture(t, nil)
	fr := &frontend{held: map[uint64]bool{}}
	f.core.Attach(fr)
	kept := f.file(t, "old", 3*shedfs.ChargeUnit)
	f.trash(t, "old")
	res, err := f.core.PurgeKept([]KeptFile{{Ino: kept.Ino, Entry: "trash/old", Size: 3 * shedfs.ChargeUnit}, {Ino: 999999, Entry: "trash/gone"}})
	if err != nil || res.Entries != 1 || res.Bytes != 3*shedfs.ChargeUnit {
		t.Fatalf("purge: %+v %v", res, err)
	}
	if f.trashed(t) != 0 || len(fr.freed) != 1 || fr.freed[0] != kept.Ino || fr.trash == 0 {
		t.Errorf("after the purge: trash %d, freed %v, trash changes %d", f.trashed(t), fr.freed, fr.trash)
	}
	if e := f.events.last(); e.Op != "admin_trash_purge" || e.Door != DoorAdmin || e.Bytes != res.Bytes {
		t.Errorf("recorded %+v", e)
	}

	bad := f.file(t, "bad", 10)
	if _, err := f.store.Link(bad.Ino, f.alice.Roots.Private, "bad2"); err != nil {
		t.Fatal(err)
	}
	names, err := f.store.NamesOf(bad.Ino)
	if err != nil || len(names) != 2 {
		t.Fatalf("names of bad: %v %v", names, err)
	}
	v, err := f.core.NewView(DoorFUSE, "alice", nil, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, _, e := v.Open(context.Background(), At{Ino: bad.Ino, Zone: bad.Zone}, syscall.O_RDONLY)
	if e != 0 {
		t.Fatalf("open: %v", e)
	}
	if err := f.core.DeleteNames(names); err != nil {
		t.Fatal(err)
	}
	if got := adminNames(fr); len(got) != 2 {
		t.Errorf("views told %v, want both names", got)
	}
	if _, err := f.store.Lookup(f.alice.Roots.Private, "bad"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("bad after the delete: %v", err)
	}
	if _, err := f.store.GetInode(bad.Ino); err != nil {
		t.Errorf("the open file went while open: %v", err)
	}
	h.Release()
	if _, err := f.store.GetInode(bad.Ino); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("the file after its last release: %v, want it gone", err)
	}
}
