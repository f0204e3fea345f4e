package metadata

import (
	"fmt"
	"testing"
)

// BenchmarkUnlinkTrash times what an UNLINK of `rm -rf` asks of the store:
// one unlink into the trash, with the read of the entry before it (files
// made before the timer starts).
func BenchmarkUnlinkTrash(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	root := s.ShareRoot()
	for i := range b.N {
		if _, err := s.Create(root, fmt.Sprintf("f%d", i), file(0o644), nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("f%d", i)
		if _, err := s.Lookup(root, name); err != nil {
			b.Fatal(err)
		}
		note := &TrashNote{By: "bench", Why: "unlink", Path: "/share/" + name}
		if _, _, _, err := s.UnlinkTrash(root, name, false, func(uint64) bool { return true }, note); err != nil {
			b.Fatal(err)
		}
	}
}
