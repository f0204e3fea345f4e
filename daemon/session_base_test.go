package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shedfs/shedfs/metadata"
)

// TestBaseSourceBeneath: the walk of a base copies a symlink to /etc or
// out of the base as a symlink and never follows it; opening content
// through such a symlink, or out of the base, is refused; a relative or
// symlinked base is refused.
func TestBaseSourceBeneath(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	os.MkdirAll(filepath.Join(base, "sub"), 0o755)
	os.WriteFile(filepath.Join(base, "sub", "f"), []byte("in the base"), 0o644)
	os.WriteFile(filepath.Join(dir, "outside"), []byte("secret"), 0o644)
	os.Symlink("/etc", filepath.Join(base, "etc"))
	os.Symlink("../../outside", filepath.Join(base, "sub", "up"))
	src, err := baseSource(base)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]metadata.SnapEntry{}
	for _, e := range src.Entries {
		got[e.Path] = e
	}
	if len(got) != 5 || got["etc"].Target != "/etc" || got["sub/up"].Target != "../../outside" || got["sub/f"].Size != 11 {
		t.Fatalf("entries: %+v", src.Entries)
	}
	f, err := src.Open(got["sub/f"])
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, p := range []string{"etc/passwd", "sub/up", "../outside", "etc"} {
		if f, err := src.Open(metadata.SnapEntry{Path: p}); err == nil {
			f.Close()
			t.Errorf("opened %s through the base", p)
		}
	}
	for _, bad := range []string{"base", filepath.Join(base, "etc"), filepath.Join(base, "sub", "f")} {
		if _, err := baseSource(bad); err == nil {
			t.Errorf("base %s accepted", bad)
		}
	}
}
