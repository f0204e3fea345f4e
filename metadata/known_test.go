package metadata

import (
	"testing"

	"github.com/shedfs/shedfs"
)

// TestUpdateWrittenKnown: a change persisted with its known digest and
// verdict leaves nothing pending, ends a pending mark of an earlier
// change (the worker's verdict for it is then stale), and a later change
// without one is pending again.
func TestUpdateWrittenKnown(t *testing.T) {
	s := newStore(t)
	f := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), "f", file(0o644), nil))
	must[*shedfs.Inode](t)(s.UpdateWritten(f.Ino, "alice", func(n *shedfs.Inode) error { n.Size = 5; return nil }, nil))
	gen := must[uint64](t)(s.PendingGen(f.Ino))

	known := Content{SHA256: "cc", State: shedfs.ScanUnscanned}
	n := must[*shedfs.Inode](t)(s.UpdateWrittenKnown(f.Ino, known, func(n *shedfs.Inode) error { n.Size = 7; return nil }, nil))
	if n.Size != 7 {
		t.Fatalf("size %d after the change, want 7", n.Size)
	}
	if c := must[Content](t)(s.Content(f.Ino)); c != known {
		t.Fatalf("content after a change with its digest: %+v, want %+v", c, known)
	}
	if q := must[[]Pending](t)(s.PendingContent(0, 10)); len(q) != 0 {
		t.Fatalf("queue after a change with its digest: %+v, want empty", q)
	}
	if must[bool](t)(s.SetVerdict(f.Ino, gen, Content{SHA256: "aa", State: shedfs.ScanUnscanned})) {
		t.Fatal("the worker's verdict for the earlier change was stored over the known one")
	}
	if c := must[Content](t)(s.Content(f.Ino)); c.SHA256 != "cc" {
		t.Fatalf("digest %q after a stale verdict, want cc", c.SHA256)
	}

	must[*shedfs.Inode](t)(s.UpdateWritten(f.Ino, "bob", func(n *shedfs.Inode) error { n.Size = 8; return nil }, nil))
	if c := must[Content](t)(s.Content(f.Ino)); c.State != shedfs.ScanPending || c.SHA256 != "" {
		t.Fatalf("a change without a digest after a known one: %+v, want pending without digest", c)
	}
}
