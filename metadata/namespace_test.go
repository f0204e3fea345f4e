package metadata

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

func TestCreateLookupReadDir(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	if root < FirstIno {
		t.Fatalf("share root %d below FirstIno", root)
	}
	r0 := must[*shedfs.Inode](t)(s.GetInode(root))
	if !r0.IsDir() || r0.Nlink != 2 || r0.Parent != 0 || r0.Zone.Kind != shedfs.ZoneShare || r0.OwnMode != shedfs.OwnModeGroup {
		t.Fatalf("share root %+v", r0)
	}
	time.Sleep(time.Millisecond)

	f := must[*shedfs.Inode](t)(s.Create(root, "b.txt", &shedfs.Inode{Mode: syscall.S_IFREG | 0o644, Uid: 7, Gid: 8, Owner: "alice", OwnMode: shedfs.OwnModeOwner}, nil))
	if f.Ino < FirstIno || f.Nlink != 1 || f.Size != 0 || f.Zone.Kind != shedfs.ZoneShare || f.Owner != "alice" || f.Uid != 7 {
		t.Fatalf("created %+v", f)
	}
	if !f.Atime.Equal(f.Mtime) || !f.Mtime.Equal(f.Ctime) || !f.Mtime.After(r0.Mtime) {
		t.Fatalf("times %v %v %v (root %v)", f.Atime, f.Mtime, f.Ctime, r0.Mtime)
	}
	d := must[*shedfs.Inode](t)(s.Create(root, "a-dir", dir(), nil))
	if d.Nlink != 2 || d.Parent != root {
		t.Fatalf("dir %+v", d)
	}
	l := must[*shedfs.Inode](t)(s.Create(root, "c-link", &shedfs.Inode{Mode: syscall.S_IFLNK | 0o777, Target: "b.txt"}, nil))
	if l.Size != 5 || l.Target != "b.txt" {
		t.Fatalf("symlink %+v", l)
	}
	r1 := must[*shedfs.Inode](t)(s.GetInode(root))
	if r1.Nlink != 3 || !r1.Mtime.Equal(f.Mtime) && !r1.Mtime.After(f.Mtime) {
		t.Fatalf("root after creates %+v", r1)
	}

	got := must[*shedfs.Inode](t)(s.Lookup(root, "b.txt"))
	if got.Ino != f.Ino || !got.Mtime.Equal(f.Mtime) || got.Mtime.Nanosecond() != f.Mtime.Nanosecond() {
		t.Fatalf("lookup %+v want %+v", got, f)
	}
	ents := must[[]shedfs.DirEntry](t)(s.ReadDir(root))
	want := []shedfs.DirEntry{{Name: "a-dir", Ino: d.Ino, Mode: syscall.S_IFDIR}, {Name: "b.txt", Ino: f.Ino, Mode: syscall.S_IFREG}, {Name: "c-link", Ino: l.Ino, Mode: syscall.S_IFLNK}}
	if len(ents) != len(want) {
		t.Fatalf("readdir %+v", ents)
	}
	for i := range want {
		if ents[i] != want[i] {
			t.Fatalf("readdir[%d] = %+v want %+v", i, ents[i], want[i])
		}
	}
	if u := must[shedfs.Usage](t)(s.Usage("share")); u.Inodes != 4 || u.Bytes != 0 {
		t.Fatalf("usage %+v", u)
	}

	for _, tc := range []struct {
		parent uint64
		name   string
		errno  syscall.Errno
	}{
		{root, "b.txt", syscall.EEXIST},
		{root, "", syscall.EINVAL},
		{root, ".", syscall.EINVAL},
		{root, "..", syscall.EINVAL},
		{root, "a/b", syscall.EINVAL},
		{root, "a\x00b", syscall.EINVAL},
		{root, strings.Repeat("x", 256), syscall.ENAMETOOLONG},
		{f.Ino, "x", syscall.ENOTDIR},
		{999999, "x", syscall.ENOENT},
	} {
		_, err := s.Create(tc.parent, tc.name, file(0o644), nil)
		wantErrno(t, err, tc.errno)
	}
	must[*shedfs.Inode](t)(s.Create(root, strings.Repeat("x", 255), file(0o644), nil))
	_, err := s.Lookup(root, "nope")
	wantErrno(t, err, syscall.ENOENT)
	_, err = s.Lookup(f.Ino, "nope")
	wantErrno(t, err, syscall.ENOTDIR)
	_, err = s.Lookup(root, strings.Repeat("y", 256))
	wantErrno(t, err, syscall.ENAMETOOLONG)
	_, err = s.ReadDir(f.Ino)
	wantErrno(t, err, syscall.ENOTDIR)
	_, err = s.GetInode(12345678)
	wantErrno(t, err, syscall.ENOENT)

	// Creating in a removed directory is ENOENT.
	must[*shedfs.Inode](t)(s.Unlink(root, "a-dir", true))
	_, err = s.Create(d.Ino, "x", file(0o644), nil)
	wantErrno(t, err, syscall.ENOENT)

	// Admission runs inside the transaction and aborts it unchanged.
	deny := errors.New("denied")
	_, err = s.Create(root, "quota", file(0o644), func(u shedfs.Usage, l shedfs.Limit) error {
		if u.Inodes < 4 {
			t.Errorf("admit saw usage %+v", u)
		}
		return deny
	})
	if !errors.Is(err, deny) {
		t.Fatalf("admit error lost: %v", err)
	}
	_, err = s.Lookup(root, "quota")
	wantErrno(t, err, syscall.ENOENT)
}

func TestCreateZone(t *testing.T) {
	s := newStore(t)
	u := must[*shedfs.User](t)(s.AddUser("alice"))
	n := must[*shedfs.Inode](t)(s.Create(u.Roots.Private, "f", file(0o600), nil))
	if n.Zone != (shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: "alice"}) {
		t.Fatalf("zone %v", n.Zone)
	}
	_, err := s.Create(u.Roots.Private, "g", &shedfs.Inode{Mode: syscall.S_IFREG, Zone: shedfs.Zone{Kind: shedfs.ZoneShare}}, nil)
	wantErrno(t, err, syscall.EXDEV)
}

func TestLinkUnlinkReclaim(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	u := must[*shedfs.User](t)(s.AddUser("bob"))
	f := must[*shedfs.Inode](t)(s.Create(root, "f", file(0o644), nil))
	d := must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	sub := must[*shedfs.Inode](t)(s.Create(d.Ino, "sub", dir(), nil))

	n := must[*shedfs.Inode](t)(s.Link(f.Ino, d.Ino, "f2"))
	if n.Nlink != 2 {
		t.Fatalf("nlink after link %d", n.Nlink)
	}
	_, err := s.Link(d.Ino, root, "dd")
	wantErrno(t, err, syscall.EPERM)
	_, err = s.Link(f.Ino, root, "d")
	wantErrno(t, err, syscall.EEXIST)
	_, err = s.Link(f.Ino, u.Roots.Private, "x")
	wantErrno(t, err, syscall.EXDEV)
	_, err = s.Link(f.Ino, root, "a/b")
	wantErrno(t, err, syscall.EINVAL)
	_, err = s.Link(f.Ino, f.Ino, "x")
	wantErrno(t, err, syscall.ENOTDIR)
	_, err = s.Link(424242, root, "x")
	wantErrno(t, err, syscall.ENOENT)

	_, err = s.Unlink(root, "d", false)
	wantErrno(t, err, syscall.EISDIR)
	_, err = s.Unlink(root, "d", true)
	wantErrno(t, err, syscall.ENOTEMPTY)
	_, err = s.Unlink(root, "f", true)
	wantErrno(t, err, syscall.ENOTDIR)
	_, err = s.Unlink(root, "none", false)
	wantErrno(t, err, syscall.ENOENT)
	_, err = s.Unlink(f.Ino, "x", false)
	wantErrno(t, err, syscall.ENOTDIR)

	n = must[*shedfs.Inode](t)(s.Unlink(root, "f", false))
	if n.Nlink != 1 {
		t.Fatalf("nlink %d", n.Nlink)
	}
	if o := must[[]uint64](t)(s.Orphans()); len(o) != 0 {
		t.Fatalf("orphans %v", o)
	}
	_, err = s.Reclaim(f.Ino)
	wantErrno(t, err, syscall.EBUSY)
	n = must[*shedfs.Inode](t)(s.Unlink(d.Ino, "f2", false))
	if n.Nlink != 0 {
		t.Fatalf("nlink %d", n.Nlink)
	}
	// An unlinked inode still works for open handles.
	must[*shedfs.Inode](t)(s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size = 10000; return nil }, nil))
	must[error](t)(nil, s.SetXattr(f.Ino, "user.a", []byte("v"), 0, nil))
	// Linking an inode without names revives it (linkat of O_TMPFILE; the
	// kernel refuses it for other unlinked files before it reaches us).
	n = must[*shedfs.Inode](t)(s.Link(f.Ino, root, "back"))
	if n.Nlink != 1 {
		t.Fatalf("nlink after revive %d", n.Nlink)
	}
	if o := must[[]uint64](t)(s.Orphans()); len(o) != 0 {
		t.Fatalf("orphans after revive %v", o)
	}
	must[*shedfs.Inode](t)(s.Unlink(root, "back", false))
	if o := must[[]uint64](t)(s.Orphans()); len(o) != 1 || o[0] != f.Ino {
		t.Fatalf("orphans %v", o)
	}
	before := must[shedfs.Usage](t)(s.Usage("share"))
	r := must[*shedfs.Inode](t)(s.Reclaim(f.Ino))
	if r.Ino != f.Ino || r.Size != 10000 {
		t.Fatalf("reclaimed %+v", r)
	}
	after := must[shedfs.Usage](t)(s.Usage("share"))
	if after.Inodes != before.Inodes-1 || after.Bytes != before.Bytes-shedfs.Charge(10000)-shedfs.XattrCost("user.a", 1) {
		t.Fatalf("usage %+v -> %+v", before, after)
	}
	_, err = s.Reclaim(f.Ino)
	wantErrno(t, err, syscall.ENOENT)
	_, err = s.GetXattr(f.Ino, "user.a")
	wantErrno(t, err, syscall.ENOENT)
	if o := must[[]uint64](t)(s.Orphans()); len(o) != 0 {
		t.Fatalf("orphans %v", o)
	}

	// rmdir: nlink 0, parent nlink drops, orphan record.
	if p := must[*shedfs.Inode](t)(s.GetInode(d.Ino)); p.Nlink != 3 {
		t.Fatalf("d nlink %d", p.Nlink)
	}
	n = must[*shedfs.Inode](t)(s.Unlink(d.Ino, "sub", true))
	if n.Nlink != 0 || n.Ino != sub.Ino {
		t.Fatalf("rmdir result %+v", n)
	}
	if p := must[*shedfs.Inode](t)(s.GetInode(d.Ino)); p.Nlink != 2 {
		t.Fatalf("d nlink %d", p.Nlink)
	}
	must[*shedfs.Inode](t)(s.Unlink(root, "d", true))
	if p := must[*shedfs.Inode](t)(s.GetInode(root)); p.Nlink != 2 {
		t.Fatalf("root nlink %d", p.Nlink)
	}
	if o := must[[]uint64](t)(s.Orphans()); len(o) != 2 {
		t.Fatalf("orphans %v", o)
	}
	for _, ino := range []uint64{sub.Ino, d.Ino} {
		must[*shedfs.Inode](t)(s.Reclaim(ino))
	}
	if u := must[shedfs.Usage](t)(s.Usage("share")); u != (shedfs.Usage{Bytes: 0, Inodes: 1}) {
		t.Fatalf("usage at end %+v", u)
	}
}

func TestRename(t *testing.T) {
	type tree struct {
		s                *Store
		root, a, b, c, f uint64 // root/{a/{c/, f}, b/, g, h}
		g, h, pa         uint64
	}
	setup := func(t *testing.T) *tree {
		s := newStore(t)
		tr := &tree{s: s, root: s.ShareRoot()}
		tr.a = must[*shedfs.Inode](t)(s.Create(tr.root, "a", dir(), nil)).Ino
		tr.b = must[*shedfs.Inode](t)(s.Create(tr.root, "b", dir(), nil)).Ino
		tr.c = must[*shedfs.Inode](t)(s.Create(tr.a, "c", dir(), nil)).Ino
		tr.f = must[*shedfs.Inode](t)(s.Create(tr.a, "f", file(0o644), nil)).Ino
		tr.g = must[*shedfs.Inode](t)(s.Create(tr.root, "g", file(0o644), nil)).Ino
		tr.h = must[*shedfs.Inode](t)(s.Create(tr.root, "h", file(0o644), nil)).Ino
		u := must[*shedfs.User](t)(s.AddUser("pat"))
		tr.pa = u.Roots.Private
		return tr
	}
	nlink := func(t *testing.T, s *Store, ino uint64) uint32 {
		t.Helper()
		return must[*shedfs.Inode](t)(s.GetInode(ino)).Nlink
	}
	lookup := func(t *testing.T, s *Store, p uint64, name string) uint64 {
		t.Helper()
		return must[*shedfs.Inode](t)(s.Lookup(p, name)).Ino
	}
	errCases := []struct {
		name  string
		op    func(tr *tree) error
		errno syscall.Errno
	}{
		{"missing source", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "zz", tr.root, "y", 0); return e }, syscall.ENOENT},
		{"noreplace exists", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "g", tr.root, "h", RenameNoReplace); return e }, syscall.EEXIST},
		{"exchange missing", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "g", tr.root, "zz", RenameExchange); return e }, syscall.ENOENT},
		{"both flags", func(tr *tree) error {
			_, e := tr.s.Rename(tr.root, "g", tr.root, "h", RenameExchange|RenameNoReplace)
			return e
		}, syscall.EINVAL},
		{"unknown flag", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "g", tr.root, "h", 4); return e }, syscall.EINVAL},
		{"dir onto file", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "b", tr.root, "g", 0); return e }, syscall.ENOTDIR},
		{"file onto dir", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "g", tr.root, "b", 0); return e }, syscall.EISDIR},
		{"onto non-empty dir", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "b", tr.root, "a", 0); return e }, syscall.ENOTEMPTY},
		{"into own subtree", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "a", tr.c, "x", 0); return e }, syscall.EINVAL},
		{"into itself", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "a", tr.a, "x", 0); return e }, syscall.EINVAL},
		{"exchange with ancestor", func(tr *tree) error { _, e := tr.s.Rename(tr.a, "c", tr.root, "a", RenameExchange); return e }, syscall.EINVAL},
		{"across zones", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "g", tr.pa, "g", 0); return e }, syscall.EXDEV},
		{"bad new name", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "g", tr.root, "x/y", 0); return e }, syscall.EINVAL},
		{"long new name", func(tr *tree) error {
			_, e := tr.s.Rename(tr.root, "g", tr.root, strings.Repeat("n", 256), 0)
			return e
		}, syscall.ENAMETOOLONG},
		{"old parent not dir", func(tr *tree) error { _, e := tr.s.Rename(tr.g, "x", tr.root, "y", 0); return e }, syscall.ENOTDIR},
		{"new parent gone", func(tr *tree) error { _, e := tr.s.Rename(tr.root, "g", 99999, "y", 0); return e }, syscall.ENOENT},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := setup(t)
			wantErrno(t, tc.op(tr), tc.errno)
			// Nothing moved.
			if lookup(t, tr.s, tr.root, "g") != tr.g || lookup(t, tr.s, tr.a, "c") != tr.c {
				t.Fatal("failed rename changed the tree")
			}
		})
	}

	t.Run("plain move of a directory", func(t *testing.T) {
		t.Parallel()
		tr := setup(t)
		s := tr.s
		before := must[*shedfs.Inode](t)(s.GetInode(tr.c))
		time.Sleep(time.Millisecond)
		rep, err := s.Rename(tr.a, "c", tr.b, "c2", 0)
		if err != nil || rep != nil {
			t.Fatalf("rename: %v %v", rep, err)
		}
		c := must[*shedfs.Inode](t)(s.GetInode(tr.c))
		if c.Parent != tr.b || !c.Ctime.After(before.Ctime) {
			t.Fatalf("moved dir %+v", c)
		}
		if nlink(t, s, tr.a) != 2 || nlink(t, s, tr.b) != 3 || nlink(t, s, tr.root) != 4 {
			t.Fatalf("nlinks a=%d b=%d", nlink(t, s, tr.a), nlink(t, s, tr.b))
		}
		_, err = s.Lookup(tr.a, "c")
		wantErrno(t, err, syscall.ENOENT)
		if lookup(t, s, tr.b, "c2") != tr.c {
			t.Fatal("not at new name")
		}
		b := must[*shedfs.Inode](t)(s.GetInode(tr.b))
		if !b.Mtime.After(before.Ctime) {
			t.Fatal("new parent mtime not updated")
		}
	})
	t.Run("replace file", func(t *testing.T) {
		t.Parallel()
		tr := setup(t)
		s := tr.s
		rep, err := s.Rename(tr.root, "g", tr.root, "h", 0)
		if err != nil || rep == nil || rep.Ino != tr.h || rep.Nlink != 0 {
			t.Fatalf("rename: %+v %v", rep, err)
		}
		if lookup(t, s, tr.root, "h") != tr.g {
			t.Fatal("target not replaced")
		}
		if o := must[[]uint64](t)(s.Orphans()); len(o) != 1 || o[0] != tr.h {
			t.Fatalf("orphans %v", o)
		}
		must[*shedfs.Inode](t)(s.Reclaim(tr.h))
	})
	t.Run("replace hard-linked file keeps it", func(t *testing.T) {
		t.Parallel()
		tr := setup(t)
		s := tr.s
		must[*shedfs.Inode](t)(s.Link(tr.h, tr.b, "h2"))
		rep := must[*shedfs.Inode](t)(s.Rename(tr.root, "g", tr.root, "h", 0))
		if rep.Nlink != 1 {
			t.Fatalf("replaced %+v", rep)
		}
		if o := must[[]uint64](t)(s.Orphans()); len(o) != 0 {
			t.Fatalf("orphans %v", o)
		}
	})
	t.Run("replace empty dir across parents", func(t *testing.T) {
		t.Parallel()
		tr := setup(t)
		s := tr.s
		rep := must[*shedfs.Inode](t)(s.Rename(tr.a, "c", tr.root, "b", 0))
		if rep.Ino != tr.b || rep.Nlink != 0 {
			t.Fatalf("replaced %+v", rep)
		}
		if nlink(t, s, tr.root) != 4 || nlink(t, s, tr.a) != 2 {
			t.Fatalf("nlinks root=%d a=%d", nlink(t, s, tr.root), nlink(t, s, tr.a))
		}
		if c := must[*shedfs.Inode](t)(s.GetInode(tr.c)); c.Parent != tr.root {
			t.Fatalf("parent %d", c.Parent)
		}
	})
	t.Run("same inode is a no-op", func(t *testing.T) {
		t.Parallel()
		tr := setup(t)
		s := tr.s
		must[*shedfs.Inode](t)(s.Link(tr.g, tr.b, "g2"))
		for _, fl := range []uint32{0, RenameExchange} {
			rep, err := s.Rename(tr.root, "g", tr.b, "g2", fl)
			if err != nil || rep != nil {
				t.Fatalf("flags %d: %v %v", fl, rep, err)
			}
		}
		rep, err := s.Rename(tr.root, "g", tr.root, "g", 0)
		if err != nil || rep != nil {
			t.Fatalf("onto itself: %v %v", rep, err)
		}
		if lookup(t, s, tr.root, "g") != tr.g || lookup(t, s, tr.b, "g2") != tr.g || nlink(t, s, tr.g) != 2 {
			t.Fatal("no-op changed something")
		}
	})
	t.Run("exchange dir and file across parents", func(t *testing.T) {
		t.Parallel()
		tr := setup(t)
		s := tr.s
		rep, err := s.Rename(tr.a, "c", tr.root, "g", RenameExchange)
		if err != nil || rep != nil {
			t.Fatalf("exchange: %v %v", rep, err)
		}
		if lookup(t, s, tr.a, "c") != tr.g || lookup(t, s, tr.root, "g") != tr.c {
			t.Fatal("not swapped")
		}
		if c := must[*shedfs.Inode](t)(s.GetInode(tr.c)); c.Parent != tr.root {
			t.Fatalf("parent %d", c.Parent)
		}
		if nlink(t, s, tr.a) != 2 || nlink(t, s, tr.root) != 5 {
			t.Fatalf("nlinks a=%d root=%d", nlink(t, s, tr.a), nlink(t, s, tr.root))
		}
		ents := must[[]shedfs.DirEntry](t)(s.ReadDir(tr.a))
		for _, e := range ents {
			if e.Name == "c" && e.Mode != syscall.S_IFREG {
				t.Fatalf("entry type not swapped: %+v", e)
			}
		}
	})
	t.Run("exchange two dirs across parents", func(t *testing.T) {
		t.Parallel()
		tr := setup(t)
		s := tr.s
		must[*shedfs.Inode](t)(s.Rename(tr.a, "c", tr.root, "b", RenameExchange))
		if must[*shedfs.Inode](t)(s.GetInode(tr.c)).Parent != tr.root || must[*shedfs.Inode](t)(s.GetInode(tr.b)).Parent != tr.a {
			t.Fatal("parents not swapped")
		}
		if nlink(t, s, tr.a) != 3 || nlink(t, s, tr.root) != 4 {
			t.Fatalf("nlinks a=%d root=%d", nlink(t, s, tr.a), nlink(t, s, tr.root))
		}
	})
	t.Run("noreplace to free name", func(t *testing.T) {
		t.Parallel()
		tr := setup(t)
		must[*shedfs.Inode](t)(tr.s.Rename(tr.root, "g", tr.a, "g", RenameNoReplace))
		if lookup(t, tr.s, tr.a, "g") != tr.g {
			t.Fatal("not moved")
		}
	})
	t.Run("check is clean after renames", func(t *testing.T) {
		t.Parallel()
		tr := setup(t)
		s := tr.s
		must[*shedfs.Inode](t)(s.Rename(tr.a, "c", tr.b, "c", 0))
		must[*shedfs.Inode](t)(s.Rename(tr.root, "b", tr.root, "a", RenameExchange))
		must[*shedfs.Inode](t)(s.Rename(tr.root, "g", tr.root, "h", 0))
		must[*shedfs.Inode](t)(s.Reclaim(tr.h))
		rep := must[*Report](t)(s.Check(nil, false, nil))
		if len(rep.Problems) != 0 {
			t.Fatalf("problems %+v", rep.Problems)
		}
	})
}

func TestXattr(t *testing.T) {
	s := newStore(t)
	f := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), "f", file(0o644), nil))
	_, err := s.GetXattr(f.Ino, "user.x")
	wantErrno(t, err, syscall.ENODATA)
	wantErrno(t, s.SetXattr(f.Ino, "user.x", []byte("1"), XattrReplace, nil), syscall.ENODATA)
	time.Sleep(time.Millisecond)
	if err := s.SetXattr(f.Ino, "user.x", []byte("1"), XattrCreate, nil); err != nil {
		t.Fatal(err)
	}
	if n := must[*shedfs.Inode](t)(s.GetInode(f.Ino)); !n.Ctime.After(f.Ctime) {
		t.Fatal("ctime not updated")
	}
	wantErrno(t, s.SetXattr(f.Ino, "user.x", []byte("2"), XattrCreate, nil), syscall.EEXIST)
	if err := s.SetXattr(f.Ino, "user.x", []byte("2"), XattrReplace, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetXattr(f.Ino, "user.a", nil, 0, nil); err != nil {
		t.Fatal(err)
	}
	if v := must[[]byte](t)(s.GetXattr(f.Ino, "user.x")); string(v) != "2" {
		t.Fatalf("value %q", v)
	}
	if v := must[[]byte](t)(s.GetXattr(f.Ino, "user.a")); len(v) != 0 {
		t.Fatalf("value %q", v)
	}
	if l := must[[]string](t)(s.ListXattr(f.Ino)); strings.Join(l, ",") != "user.a,user.x" {
		t.Fatalf("list %v", l)
	}
	wantErrno(t, s.SetXattr(f.Ino, strings.Repeat("n", 256), nil, 0, nil), syscall.ERANGE)
	wantErrno(t, s.SetXattr(f.Ino, "", nil, 0, nil), syscall.ERANGE)
	wantErrno(t, s.SetXattr(f.Ino, "user.big", make([]byte, MaxXattrValueLen+1), 0, nil), syscall.E2BIG)
	if err := s.SetXattr(f.Ino, "user.max", make([]byte, MaxXattrValueLen), 0, nil); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, s.SetXattr(f.Ino, "user.x", nil, 7, nil), syscall.EINVAL)
	wantErrno(t, s.SetXattr(999999, "user.x", nil, 0, nil), syscall.ENOENT)
	wantErrno(t, s.RemoveXattr(f.Ino, "user.none"), syscall.ENODATA)
	if err := s.RemoveXattr(f.Ino, "user.x"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetXattr(f.Ino, "user.x")
	wantErrno(t, err, syscall.ENODATA)
	_, err = s.ListXattr(999999)
	wantErrno(t, err, syscall.ENOENT)
}

func TestUsageAndUpdate(t *testing.T) {
	s := newStore(t)
	u := must[*shedfs.User](t)(s.AddUser("carol"))
	h := shedfs.HolderOf(shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: "carol"})
	if got := must[shedfs.Usage](t)(s.Usage(h)); got != (shedfs.Usage{Bytes: 0, Inodes: 3}) {
		t.Fatalf("fresh user usage %+v", got)
	}
	f := must[*shedfs.Inode](t)(s.Create(u.Roots.Output, "f", file(0o644), nil))
	must[*shedfs.Inode](t)(s.Create(u.Roots.Uploads, "d", dir(), nil))
	must[*shedfs.Inode](t)(s.Link(f.Ino, u.Roots.Output, "f-link"))
	if got := must[shedfs.Usage](t)(s.Usage(h)); got != (shedfs.Usage{Bytes: 0, Inodes: 5}) {
		t.Fatalf("usage %+v", got)
	}
	must[*shedfs.Inode](t)(s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size = 5000; return nil }, nil))
	if got := must[shedfs.Usage](t)(s.Usage(h)); got != (shedfs.Usage{Bytes: 8192, Inodes: 5}) {
		t.Fatalf("usage %+v", got)
	}
	if err := s.SetLimit(h, shedfs.Limit{Bytes: 10000, Inodes: 10}); err != nil {
		t.Fatal(err)
	}
	quota := errors.New("quota")
	admit := func(u shedfs.Usage, l shedfs.Limit, delta int64) error {
		if l.Bytes > 0 && u.Bytes+delta > l.Bytes {
			return quota
		}
		return nil
	}
	_, err := s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size = 20000; return nil }, admit)
	if !errors.Is(err, quota) {
		t.Fatalf("admit not consulted: %v", err)
	}
	if n := must[*shedfs.Inode](t)(s.GetInode(f.Ino)); n.Size != 5000 {
		t.Fatalf("size changed on denial: %d", n.Size)
	}
	must[*shedfs.Inode](t)(s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size = 100; return nil }, admit))
	if got := must[shedfs.Usage](t)(s.Usage(h)); got != (shedfs.Usage{Bytes: 4096, Inodes: 5}) {
		t.Fatalf("usage %+v", got)
	}
	_, err = s.Update(f.Ino, func(n *shedfs.Inode) error { n.Nlink = 9; return nil }, nil)
	wantErrno(t, err, syscall.EINVAL)
	_, err = s.Update(f.Ino, func(n *shedfs.Inode) error { n.Mode = syscall.S_IFDIR; return nil }, nil)
	wantErrno(t, err, syscall.EINVAL)
	mt := time.Unix(1700000000, 123456789)
	n := must[*shedfs.Inode](t)(s.Update(f.Ino, func(n *shedfs.Inode) error { n.Mtime = mt; n.Mode = syscall.S_IFREG | 0o600; return nil }, nil))
	if g := must[*shedfs.Inode](t)(s.GetInode(f.Ino)); !g.Mtime.Equal(mt) || g.Mode != n.Mode {
		t.Fatalf("update not stored: %+v", g)
	}
	if l := must[shedfs.Limit](t)(s.GetLimit(h)); l != (shedfs.Limit{Bytes: 10000, Inodes: 10}) {
		t.Fatalf("limit %+v", l)
	}
	if hs := must[[]shedfs.Holder](t)(s.Holders()); len(hs) != 2 || hs[0] != "share" || hs[1] != h {
		t.Fatalf("holders %v", hs)
	}
	// Unlink both names, reclaim: everything uncharged.
	must[*shedfs.Inode](t)(s.Unlink(u.Roots.Output, "f", false))
	must[*shedfs.Inode](t)(s.Unlink(u.Roots.Output, "f-link", false))
	must[*shedfs.Inode](t)(s.Reclaim(f.Ino))
	if got := must[shedfs.Usage](t)(s.Usage(h)); got != (shedfs.Usage{Bytes: 0, Inodes: 4}) {
		t.Fatalf("usage %+v", got)
	}
}

// TestUnlinkFree checks that the last unlink of an unused inode deletes it
// in the same transaction (charge freed, no orphan), while a used one, or
// one with links left, is kept as Unlink keeps it.
func TestUnlinkFree(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	before := must[shedfs.Usage](t)(s.Usage("share"))
	f := must[*shedfs.Inode](t)(s.Create(root, "f", file(0o644), nil))
	must[*shedfs.Inode](t)(s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size = 5000; return nil }, nil))
	must[*shedfs.Inode](t)(s.Link(f.Ino, root, "f2"))
	unused := func(uint64) bool { return true }
	n, freed, err := s.UnlinkFree(root, "f", false, unused)
	if err != nil || freed || n.Nlink != 1 {
		t.Fatalf("unlink of one of two links: nlink %d, freed %v, %v", n.Nlink, freed, err)
	}
	n, freed, err = s.UnlinkFree(root, "f2", false, unused)
	if err != nil || !freed || n.Nlink != 0 {
		t.Fatalf("last unlink: nlink %d, freed %v, %v", n.Nlink, freed, err)
	}
	_, err = s.GetInode(f.Ino)
	wantErrno(t, err, syscall.ENOENT)
	if o := must[[]uint64](t)(s.Orphans()); len(o) != 0 {
		t.Fatalf("orphans %v", o)
	}
	if u := must[shedfs.Usage](t)(s.Usage("share")); u != before {
		t.Fatalf("usage %+v, want %+v", u, before)
	}
	// An inode something holds stays, as an orphan.
	g := must[*shedfs.Inode](t)(s.Create(root, "g", file(0o644), nil))
	n, freed, err = s.UnlinkFree(root, "g", false, func(uint64) bool { return false })
	if err != nil || freed || n.Nlink != 0 {
		t.Fatalf("unlink of a held file: nlink %d, freed %v, %v", n.Nlink, freed, err)
	}
	if o := must[[]uint64](t)(s.Orphans()); len(o) != 1 || o[0] != g.Ino {
		t.Fatalf("orphans %v", o)
	}
	// An empty directory goes the same way.
	d := must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	if _, freed, err := s.UnlinkFree(root, "d", true, unused); err != nil || !freed {
		t.Fatalf("rmdir: freed %v, %v", freed, err)
	}
	_, err = s.GetInode(d.Ino)
	wantErrno(t, err, syscall.ENOENT)
}

// TestPublish: an unnamed file gets its size and name in one transaction;
// before, no name shows it and it is an orphan; a replace swaps in the new
// file and hands back the old one; admission sees the net charge.
func TestPublish(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	h := shedfs.HolderOf(shedfs.Zone{Kind: shedfs.ZoneShare})
	tmp := must[*shedfs.Inode](t)(s.CreateTmp(root, file(0o644), nil))
	if ents := must[[]shedfs.DirEntry](t)(s.ReadDir(root)); len(ents) != 0 {
		t.Fatalf("an unnamed file is listed: %v", ents)
	}
	if orphans := must[[]uint64](t)(s.Orphans()); len(orphans) != 1 || orphans[0] != tmp.Ino {
		t.Fatalf("orphans %v, want the unnamed file", orphans)
	}
	mtime := time.Unix(1700000000, 0)
	if _, err := s.Publish(tmp.Ino, root, "f", 5000, mtime, false, nil); err != nil {
		t.Fatal(err)
	}
	got := must[*shedfs.Inode](t)(s.Lookup(root, "f"))
	if got.Ino != tmp.Ino || got.Size != 5000 || got.Nlink != 1 || !got.Mtime.Equal(mtime) {
		t.Errorf("published %+v", got)
	}
	if orphans := must[[]uint64](t)(s.Orphans()); len(orphans) != 0 {
		t.Errorf("orphans after publish: %v", orphans)
	}
	if u := must[shedfs.Usage](t)(s.Usage(h)); u.Bytes != 8192 || u.Inodes != 2 {
		t.Errorf("usage %+v, want 8192 bytes, 2 inodes", u)
	}
	if _, err := s.Publish(tmp.Ino, root, "g", 1, mtime, false, nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("publishing a named file: %v, want EINVAL", err)
	}

	second := must[*shedfs.Inode](t)(s.CreateTmp(root, file(0o644), nil))
	_, err := s.Publish(second.Ino, root, "f", 100, mtime, false, nil)
	wantErrno(t, err, syscall.EEXIST)
	var sawDelta int64
	refuse := func(u shedfs.Usage, l shedfs.Limit, delta int64) error { sawDelta = delta; return syscall.EDQUOT }
	_, err = s.Publish(second.Ino, root, "f", 100, mtime, true, refuse)
	wantErrno(t, err, syscall.EDQUOT)
	if sawDelta != 4096-8192 {
		t.Errorf("admission saw delta %d, want %d (the new charge less the replaced one)", sawDelta, 4096-8192)
	}
	if got := must[*shedfs.Inode](t)(s.Lookup(root, "f")); got.Ino != tmp.Ino {
		t.Error("a refused publish replaced the file")
	}
	old, err := s.Publish(second.Ino, root, "f", 100, mtime, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if old == nil || old.Ino != tmp.Ino || old.Nlink != 0 {
		t.Fatalf("replaced %+v, want the first file without links", old)
	}
	if got := must[*shedfs.Inode](t)(s.Lookup(root, "f")); got.Ino != second.Ino || got.Size != 100 {
		t.Errorf("after replace: %+v", got)
	}
	must[*shedfs.Inode](t)(s.Reclaim(old.Ino))
	if u := must[shedfs.Usage](t)(s.Usage(h)); u.Bytes != 4096 || u.Inodes != 2 {
		t.Errorf("usage after replace and reclaim %+v, want 4096 bytes, 2 inodes", u)
	}
	must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	third := must[*shedfs.Inode](t)(s.CreateTmp(root, file(0o644), nil))
	_, err = s.Publish(third.Ino, root, "d", 1, mtime, true, nil)
	wantErrno(t, err, syscall.EISDIR)
}
