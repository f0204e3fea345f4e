package metadata

import (
	"testing"

	"github.com/shedfs/shedfs"
)

func TestContentLifecycle(t *testing.T) {
	s := newStore(t)
	f := must[*shedfs.Inode](t)(s.Create(s.ShareRoot(), "f", file(0o644), nil))
	if c := must[Content](t)(s.Content(f.Ino)); c.State != shedfs.ScanUnscanned || c.SHA256 != "" {
		t.Fatalf("new file: %+v", c)
	}
	must[*shedfs.Inode](t)(s.UpdateWritten(f.Ino, "alice", func(n *shedfs.Inode) error { n.Size = 5; return nil }, nil))
	c := must[Content](t)(s.Content(f.Ino))
	if c.State != shedfs.ScanPending || c.Writer != "alice" {
		t.Fatalf("after a write: %+v", c)
	}
	q := must[[]Pending](t)(s.PendingContent(0, 10))
	if len(q) != 1 || q[0].Ino != f.Ino {
		t.Fatalf("queue %+v", q)
	}
	gen := q[0].Gen
	if !must[bool](t)(s.SetDigest(f.Ino, gen, "aa")) {
		t.Fatal("digest refused")
	}
	if c := must[Content](t)(s.Content(f.Ino)); c.State != shedfs.ScanPending || c.SHA256 != "aa" {
		t.Fatalf("digest while pending: %+v", c)
	}
	// Another write meanwhile: the verdict for the old content is refused.
	must[*shedfs.Inode](t)(s.UpdateWritten(f.Ino, "bob", func(n *shedfs.Inode) error { n.Size = 6; return nil }, nil))
	if must[bool](t)(s.SetVerdict(f.Ino, gen, Content{SHA256: "aa", State: shedfs.ScanClean})) {
		t.Fatal("stale verdict stored")
	}
	if c := must[Content](t)(s.Content(f.Ino)); c.State != shedfs.ScanPending || c.SHA256 != "" || c.Writer != "bob" {
		t.Fatalf("after a second write: %+v", c)
	}
	gen = must[uint64](t)(s.PendingGen(f.Ino))
	if !must[bool](t)(s.SetVerdict(f.Ino, gen, Content{SHA256: "bb", State: shedfs.ScanInfected, Detail: "Eicar"})) {
		t.Fatal("verdict refused")
	}
	if c := must[Content](t)(s.Content(f.Ino)); c.ScanLabel() != "infected:Eicar" || c.SHA256 != "bb" {
		t.Fatalf("verdict: %+v", c)
	}
	if q := must[[]Quarantined](t)(s.Quarantine()); len(q) != 1 || q[0].Ino != f.Ino || q[0].Signature != "Eicar" {
		t.Fatalf("quarantine %+v", q)
	}
	if len(must[[]Pending](t)(s.PendingContent(0, 10))) != 0 {
		t.Fatal("queue not empty after the verdict")
	}
	if err := s.Release(f.Ino); err != nil {
		t.Fatal(err)
	}
	if c := must[Content](t)(s.Content(f.Ino)); c.State != shedfs.ScanClean {
		t.Fatalf("released: %+v", c)
	}
	if len(must[[]Quarantined](t)(s.Quarantine())) != 0 {
		t.Fatal("still quarantined after release")
	}
	if err := s.Release(f.Ino); err == nil {
		t.Fatal("release of a clean file")
	}
	// Removing the file removes its content records.
	must[*shedfs.Inode](t)(s.UpdateWritten(f.Ino, "bob", func(n *shedfs.Inode) error { n.Size = 7; return nil }, nil))
	must[*shedfs.Inode](t)(s.Unlink(s.ShareRoot(), "f", false))
	must[*shedfs.Inode](t)(s.Reclaim(f.Ino))
	if len(must[[]Pending](t)(s.PendingContent(0, 10))) != 0 {
		t.Fatal("queue keeps a removed inode")
	}
	n := 0
	s.Digests(func(uint64, string) error { n++; return nil })
	if n != 0 {
		t.Fatal("digest of a removed inode")
	}
}
