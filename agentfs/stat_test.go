package agentfs

import (
	"context"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// TestStatContent: a regular file's stat answers its digest when the
// store knows it (never computing one) and its scan state; a directory's
// answers neither.
func TestStatContent(t *testing.T) {
	fx := newFixture(t)
	f := fx.fs(t, "alice", nil)
	ctx := context.Background()
	if _, err := f.Write(ctx, "a.txt", []byte("hello"), Overwrite, ""); err != nil {
		t.Fatal(err)
	}
	in, err := f.Stat("a.txt")
	if err != nil || in.SHA256 != "" || in.Scan != "unscanned" {
		t.Fatalf("stat before any digest: %+v %v, want no sha256 and scan unscanned", in, err)
	}
	u, err := fx.store.GetUser("alice")
	if err != nil {
		t.Fatal(err)
	}
	n, err := fx.store.Lookup(u.Roots.Private, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	const sum = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	if err := fx.store.MarkPending(n.Ino, "alice"); err != nil {
		t.Fatal(err)
	}
	gen, err := fx.store.PendingGen(n.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := fx.store.SetVerdict(n.Ino, gen, metadata.Content{SHA256: sum, State: shedfs.ScanClean}); err != nil || !ok {
		t.Fatalf("set verdict: %v %v", ok, err)
	}
	if in, err := f.Stat("a.txt"); err != nil || in.SHA256 != sum || in.Scan != "clean" {
		t.Errorf("stat with a known digest: %+v %v", in, err)
	}
	if in, err := f.Stat("output"); err != nil || in.SHA256 != "" || in.Scan != "" {
		t.Errorf("stat of a directory: %+v %v", in, err)
	}
}
