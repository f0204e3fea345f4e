package metadata

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

// TestSnapshotRecords: entries written in batches come back in path
// order, a second header of one name is refused, delete takes the header
// and every entry, and the bytes only snapshots hold count in the
// holder's usage but not in the usage counters fsck checks.
func TestSnapshotRecords(t *testing.T) {
	s := newStore(t)
	var es []SnapEntry
	for i := range 250 {
		es = append(es, SnapEntry{Path: fmt.Sprintf("d/f%03d", i), Ino: uint64(1000 + i), Mode: syscall.S_IFREG | 0o644, Size: int64(i)})
	}
	if err := s.PutSnapshotEntries("id1", es); err != nil {
		t.Fatal(err)
	}
	sn := Snapshot{ID: "id1", Name: "s1", User: "alice", Holder: shedfs.UserHolder("alice"), Created: time.Now().UTC(), Entries: len(es)}
	if err := s.PutSnapshot(sn); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSnapshot(sn); !errors.Is(err, ErrSnapshotExists) {
		t.Fatalf("second snapshot of one name: %v", err)
	}
	got := must[[]SnapEntry](t)(s.SnapshotEntries("id1"))
	if len(got) != 250 || got[0].Path != "d/f000" || got[249].Path != "d/f249" || got[7].Ino != 1007 {
		t.Fatalf("entries read back: %d, first %+v", len(got), got[0])
	}
	if l := must[[]Snapshot](t)(s.ListSnapshots("alice")); len(l) != 1 || l[0].Name != "s1" {
		t.Fatalf("list: %+v", l)
	}
	if l := must[[]Snapshot](t)(s.ListSnapshots("al")); len(l) != 0 {
		t.Fatalf("list of a user whose name is a prefix: %+v", l)
	}

	h := shedfs.UserHolder("alice")
	before := must[shedfs.Usage](t)(s.Usage(h))
	if err := s.AddSnapshotHeld(h, 4096, false); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSnapshotHeld(h, 4096, false); err != nil {
		t.Fatal(err)
	}
	if u := must[shedfs.Usage](t)(s.Usage(h)); u.Bytes != before.Bytes+8192 {
		t.Fatalf("usage %d with 8192 snapshot bytes, was %d", u.Bytes, before.Bytes)
	}
	if err := s.AddSnapshotHeld(h, 0, true); err != nil {
		t.Fatal(err)
	}
	if u := must[shedfs.Usage](t)(s.Usage(h)); u.Bytes != before.Bytes {
		t.Fatalf("usage %d after the recount to 0, want %d", u.Bytes, before.Bytes)
	}

	if err := s.DeleteSnapshot("alice", "s1", "id1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSnapshot("alice", "s1"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("get after delete: %v", err)
	}
	if got := must[[]SnapEntry](t)(s.SnapshotEntries("id1")); len(got) != 0 {
		t.Fatalf("%d entries left after delete", len(got))
	}
	rep, err := s.Check(nil, false, nil)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check: %v %+v", err, rep)
	}
}
