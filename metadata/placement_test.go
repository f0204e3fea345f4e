package metadata

import (
	"path/filepath"
	"testing"
)

// A new store records that its blobs are placed by allocation order, and
// its BlobOrder gives back the order inode numbers were handed out in; a
// store made before the record (none) keeps placing them by number, also
// after it is opened again.
func TestBlobOrder(t *testing.T) {
	s := newStore(t)
	order, err := s.BlobOrder()
	if err != nil {
		t.Fatal(err)
	}
	if order == nil {
		t.Fatal("a new store places blobs by inode number, want by allocation order")
	}
	var prev uint64
	for i := range 600 {
		ino, err := s.AllocIno()
		if err != nil {
			t.Fatal(err)
		}
		c, ok := order(ino)
		if !ok || (i > 0 && c != prev+1) {
			t.Fatalf("allocation %d: inode %d has order %d, %v; the one before had %d", i, ino, c, ok, prev)
		}
		prev = c
	}

	dir := filepath.Join(t.TempDir(), "meta")
	old := openTest(t, dir)
	if err := old.kv.Update(func(tx Txn) error { return tx.Delete(stateKey(stateBlobLayout)) }); err != nil {
		t.Fatal(err)
	}
	old.Close()
	old = openTest(t, dir)
	if order, err := old.BlobOrder(); err != nil || order != nil {
		t.Fatalf("store without a layout record: order %v, %v; want by number", order != nil, err)
	}
	if err := old.kv.Update(func(tx Txn) error { return tx.Set(stateKey(stateBlobLayout), []byte{9}) }); err != nil {
		t.Fatal(err)
	}
	if _, err := old.BlobOrder(); err == nil {
		t.Fatal("an unknown blob layout is accepted")
	}
}
