package metadata

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shedfs/shedfs"
)

// writeLog is a KV that lists what each write transaction sets and
// deletes, by key prefix ("set I", "del O").
type writeLog struct {
	KV
	ops []string
}

func (w *writeLog) Update(fn func(tx Txn) error) error {
	return w.KV.Update(func(tx Txn) error {
		w.ops = w.ops[:0]
		return fn(&writeLogTxn{Txn: tx, w: w})
	})
}

type writeLogTxn struct {
	Txn
	w *writeLog
}

func (t *writeLogTxn) Set(key, value []byte) error {
	t.w.ops = append(t.w.ops, fmt.Sprintf("set %c", key[0]))
	return t.Txn.Set(key, value)
}

func (t *writeLogTxn) Delete(key []byte) error {
	t.w.ops = append(t.w.ops, fmt.Sprintf("del %c", key[0]))
	return t.Txn.Delete(key)
}

// TestUnlinkToTrashWrites: an unlink that keeps the file in the trash
// writes the entry's removal, the two inodes and the trash records, and
// no orphan mark (set and deleted in one transaction it cost a tombstone
// in the engine per unlink). An unlink without a note still frees the
// file, and the store checks clean after both.
func TestUnlinkToTrashWrites(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "meta"))
	root := s.ShareRoot()
	a := must[*shedfs.Inode](t)(s.Create(root, "a", file(0o644), nil))
	must[*shedfs.Inode](t)(s.Create(root, "b", file(0o644), nil))
	w := &writeLog{KV: s.kv}
	s.kv = w
	note := &TrashNote{By: "bob", Why: TrashUnlink, Path: "a"}
	if _, _, kept, err := s.UnlinkTrash(root, "a", false, func(uint64) bool { return true }, note); err != nil || !kept {
		t.Fatalf("UnlinkTrash: %v kept=%v", err, kept)
	}
	got := slices.Sorted(slices.Values(w.ops))
	want := []string{"del " + string(rune(pEntry)), "set " + string(rune(pInode)), "set " + string(rune(pInode)), "set " + string(rune(pTrash)), "set " + string(rune(pTrashIno))}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("unlink to the trash wrote %q, want %q", got, want)
	}
	if got, err := s.GetInode(a.Ino); err != nil || got.Nlink != 0 || !s.InTrash(a.Ino) {
		t.Fatalf("kept inode %+v, %v, in trash %v", got, err, s.InTrash(a.Ino))
	}
	if _, freed, _, err := s.UnlinkTrash(root, "b", false, func(uint64) bool { return true }, nil); err != nil || !freed {
		t.Fatalf("UnlinkTrash without a note: %v freed=%v", err, freed)
	}
	s.kv = w.KV
	if rep := must[*Report](t)(s.Check(nil, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
}

// TestRmdirWrites: an rmdir of an empty directory writes the entry's
// removal, the parent's record, the usage, a journal record (the trash
// keeps no directory, and a restore to a point in time needs to know it
// was there, and since when), and deletes the directory's record, its
// orphan mark and its birth; a directory has no content,
// pending or quarantine record, so none is deleted (a delete of an absent
// key still writes a tombstone into the engine, three per directory of an
// rm -rf).
func TestRmdirWrites(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "meta"))
	root := s.ShareRoot()
	must[*shedfs.Inode](t)(s.Create(root, "d", dir(), nil))
	w := &writeLog{KV: s.kv}
	s.kv = w
	note := &TrashNote{By: "bob", Why: TrashUnlink, Path: "d"}
	if _, freed, _, err := s.UnlinkTrash(root, "d", true, func(uint64) bool { return true }, note); err != nil || !freed {
		t.Fatalf("rmdir: %v freed=%v", err, freed)
	}
	got := slices.Sorted(slices.Values(w.ops))
	var want []string
	for _, op := range []struct {
		what string
		p    byte
	}{{"del", pEntry}, {"set", pInode}, {"set", pUsage}, {"del", pInode}, {"set", pOrphan}, {"del", pOrphan}, {"del", pBirth}, {"set", pRename}} {
		want = append(want, op.what+" "+string(rune(op.p)))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rmdir wrote %q, want %q", got, want)
	}
	s.kv = w.KV
	if rep := must[*Report](t)(s.Check(nil, false, nil)); len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
}
