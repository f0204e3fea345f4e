package metadata

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func inlineFile() *Inode {
	n := file(0o644)
	n.Inline = true
	return n
}

// TestInlineContent: content and size move together, survive a reopen,
// and go to a blob in one step.
func TestInlineContent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	s := openTest(t, dir)
	root := s.ShareRoot()
	n := must[*Inode](t)(s.Create(root, "small", inlineFile(), nil))
	if !n.Inline {
		t.Fatal("created file is not inline")
	}
	if got := must[[]byte](t)(s.ReadInline(n.Ino)); len(got) != 0 {
		t.Fatalf("new inline file holds %q", got)
	}
	data := []byte("hello, inline world")
	must[*Inode](t)(s.UpdateContent(n.Ino, func(n *Inode) error { n.Size = uint64(len(data)); return nil }, data))
	if _, err := s.UpdateContent(n.Ino, func(n *Inode) error { n.Size = 3; return nil }, data); err == nil {
		t.Fatal("UpdateContent with a size other than the content's succeeded")
	}
	if u := must[Usage](t)(s.Usage("share")); u.Bytes != ChargeUnit {
		t.Fatalf("usage %+v, want one charge unit", u)
	}
	s.Close()
	s = openTest(t, dir)
	got := must[*Inode](t)(s.GetInode(n.Ino))
	if !got.Inline || got.Size != uint64(len(data)) {
		t.Fatalf("after reopen: inline %v size %d", got.Inline, got.Size)
	}
	if c := must[[]byte](t)(s.ReadInline(n.Ino)); !bytes.Equal(c, data) {
		t.Fatalf("content %q, want %q", c, data)
	}
	// Setting Inline again is refused; clearing it drops the content.
	plain := must[*Inode](t)(s.Create(root, "plain", file(0o644), nil))
	_, err := s.Update(plain.Ino, func(n *Inode) error { n.Inline = true; return nil }, nil)
	wantErrno(t, err, syscall.EINVAL)
	must[*Inode](t)(s.Update(n.Ino, func(n *Inode) error { n.Inline = false; return nil }, nil))
	if c := must[[]byte](t)(s.ReadInline(n.Ino)); len(c) != 0 {
		t.Fatalf("content left after moving to a blob: %q", c)
	}
	if _, err := s.UpdateContent(n.Ino, func(*Inode) error { return nil }, nil); err == nil {
		t.Fatal("UpdateContent of a file that is no longer inline succeeded")
	}
}

// TestInlineRemoval: UnlinkFree and ReclaimKeepContent leave the content
// for requests under way until DropInline; Reclaim and user removal take
// it with the inode.
func TestInlineRemoval(t *testing.T) {
	s := newStore(t)
	root := s.ShareRoot()
	put := func(name string) *Inode {
		n := must[*Inode](t)(s.Create(root, name, inlineFile(), nil))
		return must[*Inode](t)(s.UpdateContent(n.Ino, func(n *Inode) error { n.Size = 2; return nil }, []byte("hi")))
	}
	a := put("a")
	_, freed, err := s.UnlinkFree(root, "a", false, func(uint64) bool { return true })
	if err != nil || !freed {
		t.Fatalf("UnlinkFree: freed %v, %v", freed, err)
	}
	if c := must[[]byte](t)(s.ReadInline(a.Ino)); string(c) != "hi" {
		t.Fatalf("content after UnlinkFree: %q", c)
	}
	must[error](t)(nil, s.DropInline([]uint64{a.Ino}))
	if c := must[[]byte](t)(s.ReadInline(a.Ino)); len(c) != 0 {
		t.Fatalf("content after DropInline: %q", c)
	}
	b := put("b")
	must[*Inode](t)(s.Unlink(root, "b", false))
	must[*Inode](t)(s.Reclaim(b.Ino))
	if c := must[[]byte](t)(s.ReadInline(b.Ino)); len(c) != 0 {
		t.Fatalf("content after Reclaim: %q", c)
	}
	u := must[*User](t)(s.AddUser("eve"))
	e := must[*Inode](t)(s.Create(u.Roots.Private, "e", inlineFile(), nil))
	must[*Inode](t)(s.UpdateContent(e.Ino, func(n *Inode) error { n.Size = 1; return nil }, []byte("x")))
	must[[]uint64](t)(s.RemoveUser("eve"))
	if c := must[[]byte](t)(s.ReadInline(e.Ino)); len(c) != 0 {
		t.Fatalf("content after RemoveUser: %q", c)
	}
	rep := must[*Report](t)(s.Check(nil, false, nil))
	if len(rep.Problems) != 0 {
		t.Fatalf("check after removals: %+v", rep.Problems)
	}
}

// TestCheckInline: fsck knows both forms: an inline file needs no blob, a
// blob of an inline file and content of no inline file are orphans, and
// the content's length is the size.
func TestCheckInline(t *testing.T) {
	base := t.TempDir()
	bdir := filepath.Join(base, "blobs")
	os.Mkdir(bdir, 0o700)
	blobs := dirBlobs{bdir}
	s := openTest(t, filepath.Join(base, "meta"))
	root := s.ShareRoot()
	good := must[*Inode](t)(s.Create(root, "good", inlineFile(), nil))
	must[*Inode](t)(s.UpdateContent(good.Ino, func(n *Inode) error { n.Size = 5; return nil }, []byte("12345")))
	must[*Inode](t)(s.Create(root, "empty", inlineFile(), nil))
	if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("healthy store with inline files: %+v", rep.Problems)
	}
	// Damage: a blob for the inline file, a size that disagrees, content
	// of a file that is not inline, content of no inode.
	must[error](t)(nil, blobs.Truncate(good.Ino, 5))
	bad := must[*Inode](t)(s.Create(root, "bad", inlineFile(), nil))
	must[*Inode](t)(s.UpdateContent(bad.Ino, func(n *Inode) error { n.Size = 3; return nil }, []byte("abc")))
	plain := must[*Inode](t)(s.Create(root, "plain", file(0o644), nil))
	must[error](t)(nil, s.kv.Update(func(tx Txn) error {
		if err := tx.Set(inodeKey(bad.Ino), encodeInode(&Inode{Ino: bad.Ino, Mode: bad.Mode, Nlink: 1, Size: 9000, Zone: bad.Zone, Inline: true})); err != nil {
			return err
		}
		if err := tx.Set(inlineKey(plain.Ino), []byte("stray")); err != nil {
			return err
		}
		return tx.Set(inlineKey(1<<40), []byte("nobody"))
	}))
	rep := must[*Report](t)(s.Check(blobs, true, nil))
	if got := kinds(rep); got != "orphan-blob,orphan-inline,orphan-inline,size" {
		t.Fatalf("problems %s: %+v", got, rep.Problems)
	}
	if n := must[*Inode](t)(s.GetInode(bad.Ino)); n.Size != 3 {
		t.Fatalf("repaired size %d, want 3", n.Size)
	}
	if rep := must[*Report](t)(s.Check(blobs, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("after repair: %+v", rep.Problems)
	}
}
