package integration

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// skipPosix lists the posixtest tests left out, each with the reason. Only
// genuine limitations of shedfs belong here, never bugs; a name that is no
// longer in posixtest.All fails TestPosix so the list cannot rot.
var skipPosix = map[string]string{}

// posixZones are the directories of a view the suite runs in: the private
// tree and the share space, which go through different policy.
var posixZones = []string{"private", "share"}

// TestPosix runs every test of go-fuse's posixtest suite through the kernel
// against a fresh directory of a view, once in the private tree and once in
// share/.
func TestPosix(t *testing.T) {
	t.Parallel()
	for name := range skipPosix {
		if _, ok := posixtest.All[name]; !ok {
			t.Errorf("skipPosix names %q, which is not in posixtest.All any more: remove it", name)
		}
	}
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)

	v := startView(t, newStore(t), "alice")
	for _, zone := range posixZones {
		base := v.Path("posix")
		if zone == "share" {
			base = v.Path("share", "posix")
		}
		if err := os.MkdirAll(base, 0o755); err != nil {
			t.Fatalf("mkdir %s: %v", base, err)
		}
		t.Run(zone, func(t *testing.T) {
			// Sequential: FdLeak counts the process's descriptors and
			// parallel tests would disturb it.
			for _, name := range names {
				fn := posixtest.All[name]
				t.Run(name, func(t *testing.T) {
					if reason, ok := skipPosix[name]; ok {
						t.Skip(reason)
					}
					dir := filepath.Join(base, name)
					if err := os.Mkdir(dir, 0o755); err != nil {
						t.Fatalf("mkdir %s: %v", dir, err)
					}
					fn(t, dir)
				})
			}
		})
	}
	if !t.Failed() {
		if err := os.RemoveAll(v.Path("posix")); err != nil {
			t.Errorf("RemoveAll after the suite: %v", err)
		}
	}
	v.Stop()
	if !t.Failed() {
		fsckClean(t, v.Store)
	}
}
