package metadata

import (
	"errors"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

// TestUpdateWrittenBatch: several files persisted in one commit each end
// as UpdateWritten or UpdateWrittenKnown would leave them, charged
// exactly; a batch with a file gone persists none of them.
func TestUpdateWrittenBatch(t *testing.T) {
	s := newStore(t)
	a := must[*Inode](t)(s.Create(s.ShareRoot(), "a", file(0o644), nil))
	b := must[*Inode](t)(s.Create(s.ShareRoot(), "b", file(0o644), nil))
	h := HolderOf(a.Zone)
	before := must[Usage](t)(s.Usage(h))
	commits := s.Commits()

	known := Content{SHA256: "cc", State: shedfs.ScanUnscanned}
	err := s.UpdateWrittenBatch([]WrittenUpdate{
		{Ino: a.Ino, Known: &known, Fn: func(n *Inode) error { n.Size = 5000; return nil }},
		{Ino: b.Ino, Writer: "bob", Fn: func(n *Inode) error { n.Size = 7; return nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Commits() - commits; got != 1 {
		t.Errorf("%d commits for a batch of two, want 1", got)
	}
	if n := must[*Inode](t)(s.GetInode(a.Ino)); n.Size != 5000 {
		t.Errorf("a: size %d, want 5000", n.Size)
	}
	if n := must[*Inode](t)(s.GetInode(b.Ino)); n.Size != 7 {
		t.Errorf("b: size %d, want 7", n.Size)
	}
	if c := must[Content](t)(s.Content(a.Ino)); c != known {
		t.Errorf("a: content %+v, want %+v", c, known)
	}
	if c := must[Content](t)(s.Content(b.Ino)); c.State != shedfs.ScanPending || c.Writer != "bob" {
		t.Errorf("b: content %+v, want pending by bob", c)
	}
	after := must[Usage](t)(s.Usage(h))
	if d, want := after.Bytes-before.Bytes, Charge(5000)+Charge(7); d != want {
		t.Errorf("usage grew by %d bytes, want %d", d, want)
	}

	if _, _, err := s.UnlinkFree(s.ShareRoot(), "b", false, func(uint64) bool { return true }); err != nil {
		t.Fatal(err)
	}
	err = s.UpdateWrittenBatch([]WrittenUpdate{
		{Ino: a.Ino, Writer: "alice", Fn: func(n *Inode) error { n.Size = 9000; return nil }},
		{Ino: b.Ino, Writer: "alice", Fn: func(n *Inode) error { n.Size = 9; return nil }},
	})
	if !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("a batch with a freed file: %v, want ENOENT", err)
	}
	if n := must[*Inode](t)(s.GetInode(a.Ino)); n.Size != 5000 {
		t.Errorf("a: size %d after a failed batch, want 5000", n.Size)
	}
}
