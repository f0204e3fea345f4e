package metadata

import (
	"os"
	"path/filepath"
	"testing"
)

// Numbers taken ahead for blobs made ahead (blobs.Pool): a create under
// one gets exactly that number; after a crash that loses the rest, no
// create ever gets one of them, and a check takes their empty blobs for
// unused, not for damage, and removes them.
func TestCreateOpenAtAndUnusedBlobs(t *testing.T) {
	base := t.TempDir()
	bdir := filepath.Join(base, "blobs")
	must[error](t)(nil, os.Mkdir(bdir, 0o700))
	blobs := dirBlobs{bdir}
	metaDir := filepath.Join(base, "meta")
	s, err := Open(metaDir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ahead := map[uint64]bool{}
	var first uint64
	for i := range 8 {
		ino := must[uint64](t)(s.AllocIno())
		must[error](t)(nil, blobs.Truncate(ino, 0))
		ahead[ino] = true
		if i == 0 {
			first = ino
		}
	}
	n := must[*Inode](t)(s.CreateOpenAt(first, s.ShareRoot(), "taken", file(0o644), nil))
	if n.Ino != first {
		t.Fatalf("CreateOpenAt(%d) made inode %d", first, n.Ino)
	}
	if _, err := s.CreateOpenAt(0, s.ShareRoot(), "d", dir(), nil); err == nil {
		t.Fatal("CreateOpenAt of a directory succeeded")
	}
	tmp := must[*Inode](t)(s.CreateOpenAt(0, s.ShareRoot(), "", file(0o600), nil))
	if ahead[tmp.Ino] || tmp.Nlink != 0 {
		t.Fatalf("CreateOpenAt(0) tmpfile: ino %d (taken ahead: %v), nlink %d", tmp.Ino, ahead[tmp.Ino], tmp.Nlink)
	}
	must[*Inode](t)(s.Reclaim(tmp.Ino))
	delete(ahead, first)
	// A stray blob with data is damage, still.
	stray := must[uint64](t)(s.AllocIno())
	must[error](t)(nil, blobs.Truncate(stray, 10))

	// Crash: the engine goes without Close, the lease in memory with it.
	must[error](t)(nil, s.kv.Close())
	s = openTest(t, metaDir)
	for i := range 2000 {
		c := must[*Inode](t)(s.Create(s.ShareRoot(), "after"+itoa(i), file(0o644), nil))
		if ahead[c.Ino] || c.Ino == first || c.Ino == stray {
			t.Fatalf("create after the crash reused number %d taken ahead before it", c.Ino)
		}
	}
	rep := must[*Report](t)(s.Check(blobs, false, nil))
	if kinds(rep) != "orphan-blob" || rep.Problems[0].Ino != stray || rep.Unused != len(ahead) {
		t.Fatalf("check: problems %+v, unused %d; want only the stray %d, %d unused", rep.Problems, rep.Unused, stray, len(ahead))
	}
	for ino := range ahead {
		if _, err := os.Stat(blobs.path(ino)); err != nil {
			t.Fatalf("a check without repair removed blob %d: %v", ino, err)
		}
	}
	rep = must[*Report](t)(s.Check(blobs, true, nil))
	if rep.Unused != len(ahead) {
		t.Fatalf("repair: unused %d, want %d", rep.Unused, len(ahead))
	}
	for ino := range ahead {
		if _, err := os.Stat(blobs.path(ino)); !os.IsNotExist(err) {
			t.Fatalf("blob %d made ahead after repair: %v, want removed", ino, err)
		}
	}
	if _, err := os.Stat(blobs.path(first)); err != nil {
		t.Fatalf("the blob of the inode created under a number taken ahead: %v", err)
	}
	rep = must[*Report](t)(s.Check(blobs, false, nil))
	if len(rep.Problems) != 0 || rep.Unused != 0 {
		t.Fatalf("after repair: %+v, unused %d", rep.Problems, rep.Unused)
	}
}
