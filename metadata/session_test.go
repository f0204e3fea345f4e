package metadata

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/internal/etcdtest"
)

func (b dirBlobs) Link(from, to uint64) error { return os.Link(b.path(from), b.path(to)) }

// A session's scratch is charged to the session and to its user, admitted
// against the tighter limit, kept apart from a second session's, checked
// clean by fsck, and closed into the placeholder home/sessions/ID.
func TestSessionLifecycle(t *testing.T) {
	s := newStore(t)
	blobs := dirBlobs{t.TempDir()}
	u := must[*shedfs.User](t)(s.AddUser("alice"))
	if _, err := s.OpenSession("alice", "Bad/id", time.Time{}, shedfs.Limit{}); err == nil {
		t.Fatal("a bad id was taken")
	}
	s1 := must[*Session](t)(s.OpenSession("alice", "s1", time.Time{}, shedfs.Limit{Inodes: 3}))
	s2 := must[*Session](t)(s.OpenSession("alice", "s2", time.Now().Add(time.Hour), shedfs.Limit{}))
	_, err := s.OpenSession("alice", "s1", time.Time{}, shedfs.Limit{})
	wantErrno(t, err, syscall.EEXIST)
	if list := must[[]Session](t)(s.ListSessions("alice")); len(list) != 2 || list[0].ID != "s1" || list[1].ID != "s2" {
		t.Fatalf("list %+v", list)
	}
	sdir := must[*shedfs.Inode](t)(s.Lookup(u.Roots.Private, "sessions"))
	if p := must[*shedfs.Inode](t)(s.Lookup(sdir.Ino, "s1")); p.Ino != s1.Placeholder || p.Zone.Kind != shedfs.ZonePrivate {
		t.Fatalf("placeholder %+v", p)
	}
	sh := shedfs.SessionHolder("alice", "s1")
	before := must[shedfs.Usage](t)(s.Usage(shedfs.UserHolder("alice")))
	admit := func(u shedfs.Usage, l shedfs.Limit) error {
		if l.Inodes != 0 && u.Inodes+1 > l.Inodes {
			return syscall.EDQUOT
		}
		return nil
	}
	d := must[*shedfs.Inode](t)(s.Create(s1.Root, "d", dir(), admit))
	f := must[*shedfs.Inode](t)(s.Create(d.Ino, "f", file(0o644), admit))
	if _, err := s.Create(s1.Root, "g", file(0o644), admit); err != syscall.EDQUOT {
		t.Fatalf("third inode of a 3-inode session: %v", err)
	}
	must[*shedfs.Inode](t)(s.Create(s2.Root, "d", dir(), admit)) // same name, other session
	must[*shedfs.Inode](t)(s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size = 5000; return nil }, nil))
	if err := blobs.Truncate(f.Ino, 5000); err != nil {
		t.Fatal(err)
	}
	if got := must[shedfs.Usage](t)(s.Usage(sh)); got != (shedfs.Usage{Bytes: 8192, Inodes: 3}) {
		t.Errorf("session usage %+v", got)
	}
	if got := must[shedfs.Usage](t)(s.Usage(shedfs.UserHolder("alice"))); got != (shedfs.Usage{Bytes: before.Bytes + 8192, Inodes: before.Inodes + 3}) {
		t.Errorf("user usage %+v, before %+v", got, before)
	}
	if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("fsck with open sessions: %+v", rep.Problems)
	}

	must[*Session](t)(s.CloseSession("alice", "s1", blobs))
	if _, err := s.GetSession("alice", "s1"); err != syscall.ENOENT {
		t.Fatalf("closed session: %v", err)
	}
	kd := must[*shedfs.Inode](t)(s.Lookup(s1.Placeholder, "d"))
	kf := must[*shedfs.Inode](t)(s.Lookup(kd.Ino, "f"))
	if kd.Zone.Kind != shedfs.ZonePrivate || kf.Zone.Kind != shedfs.ZonePrivate || kf.Size != 5000 || kf.Ino == f.Ino || kd.Parent != s1.Placeholder {
		t.Fatalf("kept %+v %+v", kd, kf)
	}
	if _, err := s.GetInode(s1.Root); err != syscall.ENOENT {
		t.Fatalf("scratch root left: %v", err)
	}
	if _, err := os.Stat(blobs.path(kf.Ino)); err != nil {
		t.Fatal(err)
	}
	if got := must[shedfs.Usage](t)(s.Usage(shedfs.UserHolder("alice"))); got != (shedfs.Usage{Bytes: before.Bytes + 8192, Inodes: before.Inodes + 2}) {
		t.Errorf("user usage after close %+v", got)
	}
	if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("fsck after close: %+v", rep.Problems)
	}
	_, err = s.OpenSession("alice", "s1", time.Time{}, shedfs.Limit{})
	wantErrno(t, err, syscall.EEXIST) // the kept tree holds the name
}

// TestSessionCloseInSteps: a session whose tree is too big for one
// transaction (on etcd a tree beyond --max-txn-ops; on badger the
// closeSteps knob stands for it) is closed in steps. Stopped after the
// first step, as a crash would stop it, the session is intact and fsck
// reclaims the unreachable renumbered records; closed again, the tree is
// in the placeholder whole, usage exact and fsck clean.
func TestSessionCloseInSteps(t *testing.T) {
	var s *Store
	files := 30
	if os.Getenv("SHEDFS_TEST_META") == "etcd" {
		// etcd's own default limit, which the tree is past: about 8
		// writes an inode in one transaction.
		c := etcdtest.StartLimited(t, 1, 128)
		s = must[*Store](t)(OpenEtcd(EtcdConfig{Endpoints: c.Endpoints(), Prefix: "test/"}, Options{}))
		t.Cleanup(func() { s.Close() })
	} else {
		s = newStore(t)
		s.closeSteps = 5
	}
	blobs := dirBlobs{t.TempDir()}
	must[*shedfs.User](t)(s.AddUser("alice"))
	ss := must[*Session](t)(s.OpenSession("alice", "big", time.Time{}, shedfs.Limit{}))
	mk := func(parent uint64, name string, tmpl *shedfs.Inode) *shedfs.Inode {
		t.Helper()
		n := must[*shedfs.Inode](t)(s.Create(parent, name, tmpl, nil))
		if n.IsRegular() {
			if err := blobs.Truncate(n.Ino, 0); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	a := mk(ss.Root, "a", dir())
	b := mk(ss.Root, "b", dir())
	sub := mk(a.Ino, "sub", dir())
	mk(ss.Root, "top", file(0o644))
	for i, d := range []*shedfs.Inode{a, b, sub} {
		mkFiles(t, s, blobs, d.Ino, i*files/3, (i+1)*files/3)
	}
	f0 := must[*shedfs.Inode](t)(s.Lookup(a.Ino, "f0"))
	must[*shedfs.Inode](t)(s.Update(f0.Ino, func(n *shedfs.Inode) error { n.Size = 5000; return nil }, nil))
	if err := blobs.Truncate(f0.Ino, 5000); err != nil {
		t.Fatal(err)
	}
	if err := s.SetXattr(f0.Ino, "user.tag", []byte("kept"), 0, nil); err != nil {
		t.Fatal(err)
	}
	must[*shedfs.Inode](t)(s.Link(f0.Ino, b.Ino, "hard"))
	user := shedfs.UserHolder("alice")
	before := must[shedfs.Usage](t)(s.Usage(user))

	s.closeStop = func() error { return errCloseStopped }
	if _, err := s.CloseSession("alice", "big", blobs); !errors.Is(err, errCloseStopped) {
		t.Fatalf("close stopped after step 1: %v", err)
	}
	if _, err := s.GetSession("alice", "big"); err != nil {
		t.Fatalf("session after a close stopped after step 1: %v", err)
	}
	if got := must[*shedfs.Inode](t)(s.Lookup(a.Ino, "f0")); got.Ino != f0.Ino {
		t.Fatalf("scratch tree changed by a stopped close: %+v", got)
	}
	rep := must[*Report](t)(s.Check(blobs, true, nil))
	for _, p := range rep.Problems {
		if p.Kind != KindOrphanInode {
			t.Fatalf("fsck after a close stopped after step 1: %+v", p)
		}
	}
	if want := files + 4; len(rep.Problems) != want {
		t.Fatalf("fsck reclaimed %d inodes, want the %d renumbered ones", len(rep.Problems), want)
	}
	if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("fsck after repair: %+v", rep.Problems)
	}
	if got := must[shedfs.Usage](t)(s.Usage(user)); got != before {
		t.Fatalf("user usage %+v after a stopped close, was %+v", got, before)
	}

	s.closeStop = nil
	must[*Session](t)(s.CloseSession("alice", "big", blobs))
	if _, err := s.GetSession("alice", "big"); err != syscall.ENOENT {
		t.Fatalf("closed session: %v", err)
	}
	if _, err := s.GetInode(ss.Root); err != syscall.ENOENT {
		t.Fatalf("scratch root left: %v", err)
	}
	ka := must[*shedfs.Inode](t)(s.Lookup(ss.Placeholder, "a"))
	kb := must[*shedfs.Inode](t)(s.Lookup(ss.Placeholder, "b"))
	ksub := must[*shedfs.Inode](t)(s.Lookup(ka.Ino, "sub"))
	must[*shedfs.Inode](t)(s.Lookup(ss.Placeholder, "top"))
	if ka.Parent != ss.Placeholder || ksub.Parent != ka.Ino || ka.Zone.Kind != shedfs.ZonePrivate {
		t.Fatalf("kept dirs %+v %+v", ka, ksub)
	}
	count := 0
	for _, d := range []*shedfs.Inode{ka, kb, ksub} {
		for _, e := range must[[]shedfs.DirEntry](t)(s.ReadDir(d.Ino)) {
			if strings.HasPrefix(e.Name, "f") {
				count++
			}
		}
	}
	if count != files {
		t.Fatalf("%d files kept, want %d", count, files)
	}
	k0 := must[*shedfs.Inode](t)(s.Lookup(ka.Ino, "f0"))
	kh := must[*shedfs.Inode](t)(s.Lookup(kb.Ino, "hard"))
	if k0.Ino == f0.Ino || kh.Ino != k0.Ino || k0.Nlink != 2 || k0.Size != 5000 || k0.Zone.Kind != shedfs.ZonePrivate {
		t.Fatalf("kept file %+v, its hard link %+v", k0, kh)
	}
	if v, err := s.GetXattr(k0.Ino, "user.tag"); err != nil || string(v) != "kept" {
		t.Fatalf("kept xattr %q %v", v, err)
	}
	if _, err := os.Stat(blobs.path(k0.Ino)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(blobs.path(f0.Ino)); !os.IsNotExist(err) {
		t.Fatalf("old blob: %v", err)
	}
	if got, want := must[shedfs.Usage](t)(s.Usage(user)), (shedfs.Usage{Bytes: before.Bytes, Inodes: before.Inodes - 1}); got != want {
		t.Fatalf("user usage after close %+v, want %+v", got, want)
	}
	if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("fsck after close: %+v", rep.Problems)
	}
}

// mkFiles makes empty files f<from>..f<to-1> in dir, ten a
// transaction (Create takes one each, too slow for a tree of thousands
// on etcd), charged as Create charges them.
func mkFiles(t *testing.T, s *Store, blobs dirBlobs, dir uint64, from, to int) {
	t.Helper()
	for from < to {
		n := min(10, to-from)
		inos := make([]uint64, n)
		for i := range inos {
			inos[i] = must[uint64](t)(s.allocIno())
			if err := blobs.Truncate(inos[i], 0); err != nil {
				t.Fatal(err)
			}
		}
		err := s.update(func(o *op) error {
			p, err := o.dir(dir)
			if err != nil {
				return err
			}
			for i, ino := range inos {
				f := &shedfs.Inode{Ino: ino, Mode: syscall.S_IFREG | 0o644, Nlink: 1,
					Atime: o.now, Mtime: o.now, Ctime: o.now, Zone: p.Zone}
				o.put(f)
				if err := o.setEntry(dir, "f"+strconv.Itoa(from+i), f); err != nil {
					return err
				}
				if err := o.charge(shedfs.HolderOf(p.Zone), 0, 1); err != nil {
					return err
				}
				if err := o.setBirth(ino, o.now); err != nil {
					return err
				}
			}
			o.touchDir(p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		from += n
	}
}

// TestSessionCloseMovesItsTrash: what a session removed from its scratch
// (its own trash) is not lost at close: it goes into its user's trash,
// under sessions/ID/ where the scratch tree is kept, renumbered into the
// private zone with its blob, xattrs and trash time; the user's usage
// and trash usage stay exact and fsck finds nothing, in one transaction
// as in steps.
func TestSessionCloseMovesItsTrash(t *testing.T) {
	for _, steps := range []int{0, 1} {
		t.Run("steps="+strconv.Itoa(steps), func(t *testing.T) {
			s := newStore(t)
			s.closeSteps = steps
			blobs := dirBlobs{t.TempDir()}
			must[*shedfs.User](t)(s.AddUser("erin"))
			ss := must[*Session](t)(s.OpenSession("erin", "e2", time.Time{}, shedfs.Limit{}))
			d := must[*shedfs.Inode](t)(s.Create(ss.Root, "d", dir(), nil))
			mk := func(parent uint64, name string, size uint64) *shedfs.Inode {
				t.Helper()
				n := must[*shedfs.Inode](t)(s.Create(parent, name, file(0o644), nil))
				n = must[*shedfs.Inode](t)(s.Update(n.Ino, func(n *shedfs.Inode) error { n.Size = size; return nil }, nil))
				if err := blobs.Truncate(n.Ino, int64(size)); err != nil {
					t.Fatal(err)
				}
				return n
			}
			imp := mk(ss.Root, "imp", 5000)
			if err := s.SetXattr(imp.Ino, "user.tag", []byte("important"), 0, nil); err != nil {
				t.Fatal(err)
			}
			x := mk(d.Ino, "x", 10)
			mk(ss.Root, "stays", 10)
			rm := func(parent uint64, name, rel string) {
				t.Helper()
				note := &TrashNote{By: "erin", Why: TrashUnlink, Path: rel}
				if _, _, kept, err := s.UnlinkTrash(parent, name, false, func(uint64) bool { return true }, note); err != nil || !kept {
					t.Fatalf("rm %s: kept %v, %v", rel, kept, err)
				}
			}
			rm(ss.Root, "imp", "imp")
			rm(d.Ino, "x", "d/x")
			sh, uh := shedfs.SessionHolder("erin", "e2"), shedfs.UserHolder("erin")
			was := must[[]TrashEntry](t)(s.ListTrash([]shedfs.Holder{sh}))
			if len(was) != 2 {
				t.Fatalf("session trash %+v", was)
			}
			before := must[shedfs.Usage](t)(s.Usage(uh))
			trashBefore := must[shedfs.Usage](t)(s.TrashUsage(uh))

			must[*Session](t)(s.CloseSession("erin", "e2", blobs))
			if left := must[[]TrashEntry](t)(s.ListTrash([]shedfs.Holder{sh})); len(left) != 0 {
				t.Fatalf("session trash after close: %+v", left)
			}
			got := map[string]TrashEntry{}
			for _, e := range must[[]TrashEntry](t)(s.ListTrash([]shedfs.Holder{uh})) {
				got[e.Path] = e
			}
			ki, ok := got["sessions/e2/imp"]
			if !ok || len(got) != 2 {
				t.Fatalf("user trash after close %+v, want sessions/e2/imp and sessions/e2/d/x", got)
			}
			if kx, ok := got["sessions/e2/d/x"]; !ok || kx.Ino == x.Ino {
				t.Errorf("kept d/x %+v", kx)
			}
			if ki.Ino == imp.Ino || ki.Zone.Kind != shedfs.ZonePrivate || ki.Size != 5000 || ki.By != "erin" || !ki.Time.Equal(was[0].Time) {
				t.Errorf("kept imp %+v, was %+v", ki, was[0])
			}
			if v, err := s.GetXattr(ki.Ino, "user.tag"); err != nil || string(v) != "important" {
				t.Errorf("kept imp's xattr %q %v", v, err)
			}
			if _, err := os.Stat(blobs.path(ki.Ino)); err != nil {
				t.Errorf("kept imp's blob: %v", err)
			}
			if _, err := os.Stat(blobs.path(imp.Ino)); !os.IsNotExist(err) {
				t.Errorf("old blob of imp: %v", err)
			}
			// The files were the user's already: only the scratch root went.
			if got := must[shedfs.Usage](t)(s.Usage(uh)); got != (shedfs.Usage{Bytes: before.Bytes, Inodes: before.Inodes - 1}) {
				t.Errorf("user usage after close %+v, before %+v", got, before)
			}
			want := shedfs.Usage{Bytes: trashBefore.Bytes + 8192 + 4096, Inodes: trashBefore.Inodes + 2}
			if got := must[shedfs.Usage](t)(s.TrashUsage(uh)); got != want {
				t.Errorf("user trash usage %+v, want %+v", got, want)
			}
			if got := must[shedfs.Usage](t)(s.scanTrashUsage(uh)); got != want {
				t.Errorf("user trash usage scanned %+v, want %+v", got, want)
			}
			if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
				t.Fatalf("fsck after close: %+v", rep.Problems)
			}
			// Restored, imp is back in the kept tree.
			r, _, _, err := s.RestoreTrash(ki.Ino, ss.Placeholder, "imp", nil)
			if err != nil || r.Size != 5000 {
				t.Fatalf("restore imp: %+v %v", r, err)
			}
			if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
				t.Fatalf("fsck after restore: %+v", rep.Problems)
			}
		})
	}
}
