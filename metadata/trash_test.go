package metadata

import (
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

func size(t *testing.T, s *Store, ino uint64, n uint64) {
	t.Helper()
	if _, err := s.Update(ino, func(r *shedfs.Inode) error { r.Size = n; return nil }, nil); err != nil {
		t.Fatal(err)
	}
}

// TestTrashKeepsUnlinkedAndReplaced: unlink and rename-over keep the
// inode (same number, still charged), restore links it again, purge frees
// it, and the checker finds nothing wrong at any step.
func TestTrashKeepsUnlinkedAndReplaced(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	a := must[*shedfs.Inode](t)(s.Create(root, "a", file(0o644), nil))
	size(t, s, a.Ino, 5000)
	b := must[*shedfs.Inode](t)(s.Create(root, "b", file(0o644), nil))
	before := must[shedfs.Usage](t)(s.Usage("share"))
	note := &TrashNote{By: "bob", Why: TrashUnlink, Path: "a"}
	n, freed, kept, err := s.UnlinkTrash(root, "a", false, func(uint64) bool { return true }, note)
	if err != nil || freed || !kept || n.Nlink != 0 {
		t.Fatalf("UnlinkTrash: %v freed=%v kept=%v", err, freed, kept)
	}
	if u := must[shedfs.Usage](t)(s.Usage("share")); u != before {
		t.Errorf("usage %+v after keeping, want %+v", u, before)
	}
	if _, err := s.Reclaim(a.Ino); err == nil {
		t.Error("Reclaim took a kept inode")
	}
	rep := must[*Report](t)(s.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
	c := must[*shedfs.Inode](t)(s.Create(root, "c", file(0o644), nil))
	if _, kept, err := s.RenameTrash(root, "c", root, "b", 0, &TrashNote{By: "bob", Why: TrashRenameOver, Path: "b"}, nil); err != nil || !kept {
		t.Fatalf("RenameTrash: %v kept=%v", err, kept)
	}
	list := must[[]TrashEntry](t)(s.ListTrash([]shedfs.Holder{"share"}))
	if len(list) != 2 || list[0].Ino != a.Ino || list[1].Ino != b.Ino || list[0].Path != "a" || list[0].Size != 5000 || list[1].Why != TrashRenameOver {
		t.Fatalf("ListTrash = %+v", list)
	}
	if tu := must[shedfs.Usage](t)(s.TrashUsage("share")); tu.Inodes != 2 || tu.Bytes != shedfs.Charge(5000) {
		t.Errorf("TrashUsage = %+v", tu)
	}
	// Restoring a over the live b (which is c) keeps c in turn.
	_, replaced, kept, err := s.RestoreTrash(a.Ino, root, "b", &TrashNote{By: "bob", Why: TrashRenameOver, Path: "b"})
	if err != nil || replaced == nil || replaced.Ino != c.Ino || !kept {
		t.Fatalf("RestoreTrash: %v %+v kept=%v", err, replaced, kept)
	}
	if got := must[*shedfs.Inode](t)(s.Lookup(root, "b")); got.Ino != a.Ino || got.Size != 5000 || got.Nlink != 1 {
		t.Fatalf("restored %+v", got)
	}
	if _, freed, err := s.PurgeTrash(b.Ino, nil); err != nil || !freed {
		t.Fatalf("PurgeTrash: %v", err)
	}
	if _, err := s.GetInode(b.Ino); err == nil {
		t.Error("purged inode still there")
	}
	if _, _, err := s.PurgeTrash(b.Ino, nil); err == nil {
		t.Error("second purge succeeded")
	}
	rep = must[*Report](t)(s.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
}

// TestEvictTrashOldestFirst: eviction frees the oldest kept files of the
// holder until the charge fits, and no more.
func TestEvictTrashOldestFirst(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	var inos []uint64
	for _, name := range []string{"x", "y", "z"} {
		n := must[*shedfs.Inode](t)(s.Create(root, name, file(0o644), nil))
		size(t, s, n.Ino, uint64(shedfs.ChargeUnit))
		inos = append(inos, n.Ino)
		if _, _, _, err := s.UnlinkTrash(root, name, false, nil, &TrashNote{Why: TrashUnlink, Path: name}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	u := must[shedfs.Usage](t)(s.Usage("share"))
	if err := s.SetLimit("share", shedfs.Limit{Bytes: u.Bytes}); err != nil {
		t.Fatal(err)
	}
	if got := must[[]*shedfs.Inode](t)(s.EvictTrash("share", 0, 1, nil)); len(got) != 0 {
		t.Fatalf("evicted %d with room", len(got))
	}
	got := must[[]*shedfs.Inode](t)(s.EvictTrash("share", shedfs.ChargeUnit+1, 0, nil))
	if len(got) != 2 || got[0].Ino != inos[0] || got[1].Ino != inos[1] {
		t.Fatalf("evicted %+v, want the two oldest", got)
	}
	if l := must[[]TrashEntry](t)(s.ListTrash(nil)); len(l) != 1 || l[0].Ino != inos[2] {
		t.Fatalf("left %+v", l)
	}
	gone := must[[]*shedfs.Inode](t)(s.ExpireTrash(time.Now().Add(time.Hour), nil, 0, nil))
	if len(gone) != 1 {
		t.Fatalf("expired %d", len(gone))
	}
	rep := must[*Report](t)(s.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
}

// TestKeepVersion: the old content's record moves to a new inode in the
// trash, the live file is empty, and the bytes stay charged once.
func TestKeepVersion(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	a := must[*shedfs.Inode](t)(s.Create(root, "a", file(0o644), nil))
	size(t, s, a.Ino, 100)
	before := must[shedfs.Usage](t)(s.Usage("share"))
	v := must[uint64](t)(s.AllocIno())
	live := must[*shedfs.Inode](t)(s.KeepVersion(a.Ino, v, &TrashNote{Why: TrashTruncate, Path: "a"}))
	if live.Size != 0 {
		t.Fatalf("live size %d", live.Size)
	}
	if u := must[shedfs.Usage](t)(s.Usage("share")); u.Bytes != before.Bytes || u.Inodes != before.Inodes+1 {
		t.Errorf("usage %+v, before %+v", u, before)
	}
	e := must[TrashEntry](t)(s.TrashEntryOf(v))
	if e.Size != 100 || e.Why != TrashTruncate {
		t.Errorf("entry %+v", e)
	}
	if err := s.SetLimit("share", shedfs.Limit{Inodes: must[shedfs.Usage](t)(s.Usage("share")).Inodes}); err != nil {
		t.Fatal(err)
	}
	_, err := s.KeepVersion(a.Ino, must[uint64](t)(s.AllocIno()), &TrashNote{Why: TrashTruncate})
	wantErrno(t, err, syscall.EDQUOT)
	rep := must[*Report](t)(s.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
}

// TestExpireTrashByHolder: the sweep purges each holder's files removed
// before the cutoff (time order within a holder) and keeps the rest and
// open ones; over the cap it purges the oldest across the capped holders.
func TestExpireTrashByHolder(t *testing.T) {
	s := newStore(t)
	roots := map[string]uint64{"share": s.ShareRoot()}
	for _, u := range []string{"al", "alice"} { // "al" is a prefix of "alice"
		roots[u] = must[*shedfs.User](t)(s.AddUser(u)).Roots.Private
	}
	del := func(where, name string) uint64 {
		t.Helper()
		n := must[*shedfs.Inode](t)(s.Create(roots[where], name, file(0o644), nil))
		size(t, s, n.Ino, uint64(shedfs.ChargeUnit))
		if _, _, _, err := s.UnlinkTrash(roots[where], name, false, nil, &TrashNote{Why: TrashUnlink, Path: name}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		return n.Ino
	}
	old := map[uint64]bool{}
	for _, where := range []string{"share", "al", "alice"} {
		old[del(where, "old1")] = true
		old[del(where, "old2")] = true
	}
	open := del("alice", "old-open")
	cutoff := time.Now()
	time.Sleep(time.Millisecond)
	var recent []uint64
	for _, where := range []string{"share", "al", "alice"} {
		recent = append(recent, del(where, "new"))
	}
	unused := func(ino uint64) bool { return ino != open }
	gone := must[[]*shedfs.Inode](t)(s.ExpireTrash(cutoff, nil, 0, unused))
	if len(gone) != len(old) {
		t.Fatalf("expired %d files, want the %d old ones", len(gone), len(old))
	}
	for _, n := range gone {
		if !old[n.Ino] {
			t.Errorf("expired %d, which is not an old one", n.Ino)
		}
	}
	left := must[[]TrashEntry](t)(s.ListTrash(nil))
	if len(left) != 4 {
		t.Fatalf("left %+v, want the open one and the three new ones", left)
	}
	// Over a cap of one file's charge on the users' trash (three files):
	// theirs go oldest first, the open one skipped, until what is left
	// (the open one) fits; share's is not capped.
	capped := func(h shedfs.Holder) bool { return h != "share" }
	gone = must[[]*shedfs.Inode](t)(s.ExpireTrash(cutoff, capped, shedfs.ChargeUnit, unused))
	if len(gone) != 2 || gone[0].Ino != recent[1] || gone[1].Ino != recent[2] {
		t.Fatalf("over the cap expired %+v, want the users' new files %d, %d", gone, recent[1], recent[2])
	}
	rep := must[*Report](t)(s.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
}

// TestExpireTrashOpenedMeanwhile: a kept file opened after the sweep (or
// an eviction for disk space) chose it, before its purge committed, is
// not purged: unused is asked again in the purge's transaction. Before,
// it was freed under the new handle, and on a shared store this daemon's
// own open mark, which evictable does not count, went with it.
func TestExpireTrashOpenedMeanwhile(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	for _, sweep := range []struct {
		name string
		run  func(unused func(uint64) bool) ([]*shedfs.Inode, error)
	}{
		{"expire", func(unused func(uint64) bool) ([]*shedfs.Inode, error) {
			return s.ExpireTrash(time.Now().Add(time.Hour), nil, 0, unused)
		}},
		{"evict for space", func(unused func(uint64) bool) ([]*shedfs.Inode, error) {
			return s.EvictOldest(1, unused)
		}},
	} {
		n := must[*shedfs.Inode](t)(s.Create(root, sweep.name, file(0o644), nil))
		size(t, s, n.Ino, 100)
		if _, _, _, err := s.UnlinkTrash(root, sweep.name, false, nil, &TrashNote{Why: TrashUnlink, Path: sweep.name}); err != nil {
			t.Fatal(err)
		}
		asked := 0
		openedAfterChoice := func(ino uint64) bool { asked++; return asked == 1 }
		gone := must[[]*shedfs.Inode](t)(sweep.run(openedAfterChoice))
		if len(gone) != 0 {
			t.Errorf("%s purged %d kept files, one opened after it was chosen", sweep.name, len(gone))
		}
		if _, err := s.TrashEntryOf(n.Ino); err != nil {
			t.Errorf("%s: the kept file opened meanwhile is not in the trash: %v", sweep.name, err)
		}
		if gone := must[[]*shedfs.Inode](t)(sweep.run(nil)); len(gone) != 1 || gone[0].Ino != n.Ino {
			t.Errorf("%s, closed: purged %+v, want inode %d", sweep.name, gone, n.Ino)
		}
	}
	rep := must[*Report](t)(s.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
}

// TestEvictTrashNestedHolders: a session's kept files are charged to its
// user too, so eviction for the user takes them, oldest first with the
// user's own; eviction for the session takes only the session's.
func TestEvictTrashNestedHolders(t *testing.T) {
	s := newStore(t)
	u := must[*shedfs.User](t)(s.AddUser("alice"))
	ss := must[*Session](t)(s.OpenSession("alice", "s1", time.Time{}, shedfs.Limit{}))
	keep := func(dir uint64, name string) uint64 {
		n := must[*shedfs.Inode](t)(s.Create(dir, name, file(0o644), nil))
		size(t, s, n.Ino, uint64(shedfs.ChargeUnit))
		if _, _, kept, err := s.UnlinkTrash(dir, name, false, nil, &TrashNote{Why: TrashUnlink, Path: name}); err != nil || !kept {
			t.Fatalf("keep %s: %v", name, err)
		}
		time.Sleep(time.Millisecond)
		return n.Ino
	}
	inSession := keep(ss.Root, "old")      // the oldest, in the session
	ofUser := keep(u.Roots.Private, "mid") // the user's own
	keep(ss.Root, "new")
	user, session := shedfs.UserHolder("alice"), shedfs.SessionHolder("alice", "s1")
	used := must[shedfs.Usage](t)(s.Usage(user))
	if err := s.SetLimit(user, shedfs.Limit{Bytes: used.Bytes}); err != nil {
		t.Fatal(err)
	}
	got := must[[]*shedfs.Inode](t)(s.EvictTrash(user, 2*shedfs.ChargeUnit, 0, nil))
	if len(got) != 2 || got[0].Ino != inSession || got[1].Ino != ofUser {
		t.Fatalf("evicted for the user %+v, want the session's oldest then the user's", got)
	}
	if err := s.SetLimit(session, shedfs.Limit{Bytes: 1}); err != nil {
		t.Fatal(err)
	}
	got = must[[]*shedfs.Inode](t)(s.EvictTrash(session, 1, 0, nil))
	if len(got) != 1 || got[0].Zone.Kind != shedfs.ZoneSession {
		t.Fatalf("evicted for the session %+v, want its last kept file", got)
	}
	if u := must[shedfs.Usage](t)(s.Usage(user)); u.Bytes != used.Bytes-3*shedfs.ChargeUnit {
		t.Errorf("the user's usage is %d bytes, want %d", u.Bytes, used.Bytes-3*shedfs.ChargeUnit)
	}
	if rep := must[*Report](t)(s.Check(nil, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
}
