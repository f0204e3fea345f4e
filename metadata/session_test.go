package metadata

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

func (b dirBlobs) Link(from, to uint64) error { return os.Link(b.path(from), b.path(to)) }

// A session's scratch is charged to the session and to its user, admitted
// against the tighter limit, kept apart from a second session's, checked
// clean by fsck, and closed into the placeholder home/sessions/ID.
func TestSessionLifecycle(t *testing.T) {
	s := newStore(t)
	blobs := dirBlobs{t.TempDir()}
	u := must[*User](t)(s.AddUser("alice"))
	if _, err := s.OpenSession("alice", "Bad/id", time.Time{}, Limit{}); err == nil {
		t.Fatal("a bad id was taken")
	}
	s1 := must[*Session](t)(s.OpenSession("alice", "s1", time.Time{}, Limit{Inodes: 3}))
	s2 := must[*Session](t)(s.OpenSession("alice", "s2", time.Now().Add(time.Hour), Limit{}))
	_, err := s.OpenSession("alice", "s1", time.Time{}, Limit{})
	wantErrno(t, err, syscall.EEXIST)
	if list := must[[]Session](t)(s.ListSessions("alice")); len(list) != 2 || list[0].ID != "s1" || list[1].ID != "s2" {
		t.Fatalf("list %+v", list)
	}
	sdir := must[*Inode](t)(s.Lookup(u.Roots.Private, "sessions"))
	if p := must[*Inode](t)(s.Lookup(sdir.Ino, "s1")); p.Ino != s1.Placeholder || p.Zone.Kind != ZonePrivate {
		t.Fatalf("placeholder %+v", p)
	}
	sh := shedfs.SessionHolder("alice", "s1")
	before := must[Usage](t)(s.Usage(shedfs.UserHolder("alice")))
	admit := func(u Usage, l Limit) error {
		if l.Inodes != 0 && u.Inodes+1 > l.Inodes {
			return syscall.EDQUOT
		}
		return nil
	}
	d := must[*Inode](t)(s.Create(s1.Root, "d", dir(), admit))
	f := must[*Inode](t)(s.Create(d.Ino, "f", file(0o644), admit))
	if _, err := s.Create(s1.Root, "g", file(0o644), admit); err != syscall.EDQUOT {
		t.Fatalf("third inode of a 3-inode session: %v", err)
	}
	must[*Inode](t)(s.Create(s2.Root, "d", dir(), admit)) // same name, other session
	must[*Inode](t)(s.Update(f.Ino, func(n *Inode) error { n.Size = 5000; return nil }, nil))
	if err := blobs.Truncate(f.Ino, 5000); err != nil {
		t.Fatal(err)
	}
	if got := must[Usage](t)(s.Usage(sh)); got != (Usage{Bytes: 8192, Inodes: 3}) {
		t.Errorf("session usage %+v", got)
	}
	if got := must[Usage](t)(s.Usage(shedfs.UserHolder("alice"))); got != (Usage{Bytes: before.Bytes + 8192, Inodes: before.Inodes + 3}) {
		t.Errorf("user usage %+v, before %+v", got, before)
	}
	if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("fsck with open sessions: %+v", rep.Problems)
	}

	must[*Session](t)(s.CloseSession("alice", "s1", nil, blobs))
	if _, err := s.GetSession("alice", "s1"); err != syscall.ENOENT {
		t.Fatalf("closed session: %v", err)
	}
	kd := must[*Inode](t)(s.Lookup(s1.Placeholder, "d"))
	kf := must[*Inode](t)(s.Lookup(kd.Ino, "f"))
	if kd.Zone.Kind != ZonePrivate || kf.Zone.Kind != ZonePrivate || kf.Size != 5000 || kf.Ino == f.Ino || kd.Parent != s1.Placeholder {
		t.Fatalf("kept %+v %+v", kd, kf)
	}
	if _, err := s.GetInode(s1.Root); err != syscall.ENOENT {
		t.Fatalf("scratch root left: %v", err)
	}
	if _, err := os.Stat(blobs.path(kf.Ino)); err != nil {
		t.Fatal(err)
	}
	if got := must[Usage](t)(s.Usage(shedfs.UserHolder("alice"))); got != (Usage{Bytes: before.Bytes + 8192, Inodes: before.Inodes + 2}) {
		t.Errorf("user usage after close %+v", got)
	}
	if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("fsck after close: %+v", rep.Problems)
	}
	_, err = s.OpenSession("alice", "s1", time.Time{}, Limit{})
	wantErrno(t, err, syscall.EEXIST) // the kept tree holds the name
}
