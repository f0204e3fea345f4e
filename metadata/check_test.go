package metadata

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

func kinds(r *Report) string {
	var k []string
	for _, p := range r.Problems {
		k = append(k, p.Kind.String())
	}
	sort.Strings(k)
	return strings.Join(k, ",")
}

func TestCheckRepairs(t *testing.T) {
	base := t.TempDir()
	bdir := filepath.Join(base, "blobs")
	os.Mkdir(bdir, 0o700)
	blobs := dirBlobs{bdir}
	s := openTest(t, filepath.Join(base, "meta"))
	root := s.ShareRoot()
	u := must[*shedfs.User](t)(s.AddUser("dan"))
	g := must[*shedfs.Group](t)(s.AddGroup("crew"))

	mk := func(parent uint64, name string, size int64) *shedfs.Inode {
		t.Helper()
		n := must[*shedfs.Inode](t)(s.Create(parent, name, file(0o644), nil))
		if size >= 0 {
			must[error](t)(nil, blobs.Truncate(n.Ino, size))
			n = must[*shedfs.Inode](t)(s.Update(n.Ino, func(n *shedfs.Inode) error { n.Size = uint64(size); return nil }, nil))
		}
		return n
	}
	d := must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	sizeBad := mk(d.Ino, "size-bad", 100)
	missing := mk(root, "missing", 5000)
	emptyNoBlob := mk(u.Roots.Private, "empty", -1)
	nlinkBad := mk(g.Root, "nlink-bad", 10)
	victim := mk(root, "victim", 10)
	mk(u.Roots.Output, "fine", 4097)
	lost := must[*shedfs.Inode](t)(s.Create(root, "lost", dir(), nil))
	lostChild := mk(lost.Ino, "child", 3)
	openUnlinked := mk(root, "open", 7)
	must[*shedfs.Inode](t)(s.Unlink(root, "open", false))

	rep := must[*Report](t)(s.Check(blobs, false, nil))
	// An unlinked inode is reclaimed by Check, and usage is compared with
	// what remains after that.
	if kinds(rep) != "orphan-inode,usage" || rep.Problems[0].Ino != openUnlinked.Ino {
		t.Fatalf("healthy store: %+v", rep.Problems)
	}
	must[*shedfs.Inode](t)(s.Reclaim(openUnlinked.Ino))
	must[error](t)(nil, blobs.Remove(openUnlinked.Ino))
	if rep = must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("healthy store: %+v", rep.Problems)
	}
	openUnlinked = mk(root, "open", 7)
	must[*shedfs.Inode](t)(s.Unlink(root, "open", false))

	// Damage it.
	must[error](t)(nil, blobs.Truncate(sizeBad.Ino, 9000)) // blob grew, metadata lost it
	must[error](t)(nil, blobs.Remove(missing.Ino))
	must[error](t)(nil, blobs.Truncate(99999, 10)) // stray blob
	err := s.kv.Update(func(tx Txn) error {
		n, _ := getInode(tx, &s.keys, nlinkBad.Ino)
		n.Nlink = 5
		if err := tx.Set(s.keys.inode(n.Ino), encodeInode(n)); err != nil {
			return err
		}
		dn, _ := getInode(tx, &s.keys, d.Ino)
		dn.Parent = 4242
		if err := tx.Set(s.keys.inode(d.Ino), encodeInode(dn)); err != nil {
			return err
		}
		if err := tx.Delete(s.keys.inode(victim.Ino)); err != nil { // entry now dangles
			return err
		}
		if err := tx.Delete(s.keys.entry(root, "lost")); err != nil { // lost + child unreachable
			return err
		}
		return tx.Set(usageKey("user:dan"), encodePair(123, 456))
	})
	if err != nil {
		t.Fatal(err)
	}

	want := "dangling-entry,missing-blob,nlink,nlink,orphan-blob,orphan-blob,orphan-inode,orphan-inode,orphan-inode,parent,size,usage,usage"
	// nlink twice: nlink-bad, and root (lost its "lost" subdirectory);
	// orphan-blob twice: the stray and the deleted victim's blob; usage for
	// dan (drift) and share (victim, lost, child and sizes changed).
	rep = must[*Report](t)(s.Check(blobs, false, nil))
	if got := kinds(rep); got != want {
		t.Fatalf("report:\n got  %s\n want %s\n%+v", got, want, rep.Problems)
	}
	if rep.Unrepaired() != len(rep.Problems) {
		t.Fatal("report-only check repaired something")
	}
	var calls int
	rep = must[*Report](t)(s.Check(blobs, true, func(done, total int) {
		calls++
		if done > total {
			t.Errorf("progress %d/%d", done, total)
		}
	}))
	if got := kinds(rep); got != want || rep.Unrepaired() != 0 || calls == 0 {
		t.Fatalf("repair: %s unrepaired %d progress calls %d", got, rep.Unrepaired(), calls)
	}
	rep = must[*Report](t)(s.Check(blobs, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("after repair: %+v", rep.Problems)
	}
	if rec := must[CheckRecord](t)(s.LastCheck()); rec.At.IsZero() || rec.Problems != 0 {
		t.Fatalf("last check %+v", rec)
	}

	// The repairs themselves.
	if n := must[*shedfs.Inode](t)(s.GetInode(sizeBad.Ino)); n.Size != 9000 {
		t.Fatalf("size not taken from blob: %d", n.Size)
	}
	if n := must[*shedfs.Inode](t)(s.GetInode(missing.Ino)); n.Size != 0 {
		t.Fatalf("missing blob: size %d", n.Size)
	}
	if _, err := os.Stat(blobs.path(missing.Ino)); err != nil {
		t.Fatalf("missing blob not recreated: %v", err)
	}
	if _, err := s.GetInode(emptyNoBlob.Ino); err != nil {
		t.Fatal("empty file without blob touched")
	}
	if n := must[*shedfs.Inode](t)(s.GetInode(nlinkBad.Ino)); n.Nlink != 1 {
		t.Fatalf("nlink %d", n.Nlink)
	}
	if n := must[*shedfs.Inode](t)(s.GetInode(d.Ino)); n.Parent != root {
		t.Fatalf("parent %d", n.Parent)
	}
	for _, ino := range []uint64{lost.Ino, lostChild.Ino, openUnlinked.Ino} {
		_, err := s.GetInode(ino)
		wantErrno(t, err, syscall.ENOENT)
	}
	for _, ino := range []uint64{99999, lostChild.Ino, openUnlinked.Ino, victim.Ino} {
		if _, err := os.Stat(blobs.path(ino)); !os.IsNotExist(err) {
			t.Fatalf("blob %d kept: %v", ino, err)
		}
	}
	_, err = s.Lookup(root, "victim")
	wantErrno(t, err, syscall.ENOENT)
	if got := must[shedfs.Usage](t)(s.Usage("user:dan")); got != (shedfs.Usage{Bytes: 8192, Inodes: 5}) {
		t.Fatalf("dan usage %+v", got)
	}
	if o := must[[]uint64](t)(s.Orphans()); len(o) != 0 {
		t.Fatalf("orphans %v", o)
	}
}

// TestCheckOverQuota: a holder using more than its limit is reported as
// over-quota, not repaired (with or without repair), and the record of
// the check counts it as unrepaired; within the limit again, the check is
// clean.
func TestCheckOverQuota(t *testing.T) {
	base := t.TempDir()
	bdir := filepath.Join(base, "blobs")
	os.Mkdir(bdir, 0o700)
	blobs := dirBlobs{bdir}
	s := openTest(t, filepath.Join(base, "meta"))
	u := must[*shedfs.User](t)(s.AddUser("dan"))
	h := shedfs.Holder("user:dan")
	var inos []uint64
	for _, name := range []string{"a", "b"} {
		n := must[*shedfs.Inode](t)(s.Create(u.Roots.Private, name, file(0o644), nil))
		must[error](t)(nil, blobs.Truncate(n.Ino, 1<<20))
		must[*shedfs.Inode](t)(s.Update(n.Ino, func(n *shedfs.Inode) error { n.Size = 1 << 20; return nil }, nil))
		inos = append(inos, n.Ino)
	}
	// 2 MiB stored; the limit goes down to 1 MiB and 4 inodes.
	must[error](t)(nil, s.SetLimit(h, shedfs.Limit{Bytes: 1 << 20, Inodes: 4}))
	for _, repair := range []bool{false, true} {
		rep := must[*Report](t)(s.Check(blobs, repair, nil))
		if kinds(rep) != "over-quota,over-quota" || rep.Unrepaired() != 2 {
			t.Fatalf("repair %v: problems %+v, want two over-quota, unrepaired", repair, rep.Problems)
		}
		for _, want := range []string{"user:dan: 2097152 bytes used, limit 1048576 (1048576 over)", "user:dan: 5 inodes used, limit 4 (1 over)"} {
			found := false
			for _, p := range rep.Problems {
				found = found || p.Detail == want
			}
			if !found {
				t.Errorf("repair %v: no problem says %q: %+v", repair, want, rep.Problems)
			}
		}
	}
	if rec := must[CheckRecord](t)(s.LastCheck()); rec.Problems != 2 || rec.Unrepaired != 2 {
		t.Errorf("last check record %+v, want 2 problems, 2 unrepaired", rec)
	}
	if u := must[shedfs.Usage](t)(s.Usage(h)); u.Bytes != 2<<20 {
		t.Errorf("a check changed the usage of an over-quota holder: %+v", u)
	}
	must[*shedfs.Inode](t)(s.Unlink(u.Roots.Private, "b", false))
	must[*shedfs.Inode](t)(s.Reclaim(inos[1]))
	must[error](t)(nil, blobs.Remove(inos[1]))
	if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Errorf("at the limit: %+v", rep.Problems)
	}
}
