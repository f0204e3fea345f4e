package metadata

import (
	"errors"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

// TestXattrCharge: an xattr costs its holder XattrCost, in the same
// transaction as the change; a refused admission changes nothing; removal,
// replacement and reclaiming the inode give the bytes back, and Check
// counts usage the same way.
func TestXattrCharge(t *testing.T) {
	s := newStore(t)
	h := shedfs.Holder("share")
	f := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), "f", file(0o644), nil))
	base := must[shedfs.Usage](t)(s.Usage(h))
	wantBytes := func(what string, want int64) {
		t.Helper()
		if u := must[shedfs.Usage](t)(s.Usage(h)); u.Bytes != base.Bytes+want {
			t.Fatalf("%s: usage %d bytes, want %d", what, u.Bytes, base.Bytes+want)
		}
		rep := must[*Report](t)(s.Check(nil, false, nil))
		if len(rep.Problems) != 0 {
			t.Fatalf("%s: check finds %+v", what, rep.Problems)
		}
	}
	a := shedfs.XattrCost("user.a", 100)
	if a != 16+6+100 {
		t.Fatalf("XattrCost = %d", a)
	}
	var seen XattrChange
	admit := func(c XattrChange) error { seen = c; return nil }
	must[error](t)(nil, s.SetXattr(f.Ino, "user.a", make([]byte, 100), 0, admit))
	if seen.Holder != h || seen.Before != 0 || seen.After != a || seen.Usage.Bytes != base.Bytes {
		t.Fatalf("admit saw %+v", seen)
	}
	wantBytes("set", a)
	b := shedfs.XattrCost("user.b", 0)
	must[error](t)(nil, s.SetXattr(f.Ino, "user.b", nil, 0, admit))
	if seen.Before != a || seen.After != a+b {
		t.Fatalf("admit saw %+v", seen)
	}
	wantBytes("second", a+b)

	// Replacing charges the difference; a refusal leaves everything.
	must[error](t)(nil, s.SetXattr(f.Ino, "user.a", make([]byte, 10), 0, admit))
	if seen.Before != a+b || seen.After != b+shedfs.XattrCost("user.a", 10) {
		t.Fatalf("admit on replace saw %+v", seen)
	}
	a = shedfs.XattrCost("user.a", 10)
	wantBytes("replace", a+b)
	no := errors.New("no")
	if err := s.SetXattr(f.Ino, "user.c", make([]byte, 1000), 0, func(XattrChange) error { return no }); !errors.Is(err, no) {
		t.Fatalf("refused set: %v", err)
	}
	_, err := s.GetXattr(f.Ino, "user.c")
	wantErrno(t, err, syscall.ENODATA)
	wantBytes("refused", a+b)

	must[error](t)(nil, s.RemoveXattr(f.Ino, "user.b"))
	wantBytes("remove", a)

	// On a directory too, and the inode's reclaim gives everything back.
	d := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), "d", dir(), nil))
	must[error](t)(nil, s.SetXattr(d.Ino, "user.d", make([]byte, 50), 0, nil))
	wantBytes("dir", a+shedfs.XattrCost("user.d", 50))
	if _, freed, err := s.UnlinkFree(s.ShareRoot(), "f", false, func(uint64) bool { return true }); err != nil || !freed {
		t.Fatalf("unlink: freed %v, %v", freed, err)
	}
	must[*shedfs.Inode](t)(s.Unlink(s.ShareRoot(), "d", true))
	must[*shedfs.Inode](t)(s.Reclaim(d.Ino))
	if u := must[shedfs.Usage](t)(s.Usage(h)); u.Bytes != base.Bytes || u.Inodes != base.Inodes-1 {
		t.Fatalf("after removal: %+v, want %d bytes %d inodes", u, base.Bytes, base.Inodes-1)
	}
}
