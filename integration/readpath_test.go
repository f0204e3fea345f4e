package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestViewReadAhead: a view's kernel reads ahead of a sequential reader
// by 4 MiB (four 1 MiB requests), not the 128 KiB every FUSE mount starts
// with, which made a cold read of a large file come to the daemon 128 KiB
// at a time.
func TestViewReadAhead(t *testing.T) {
	t.Parallel()
	v, _ := startObservedView(t, newStore(t))
	var st unix.Stat_t
	if err := unix.Stat(v.Path(), &st); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "4096" {
		t.Errorf("%s is %s, want 4096", path, got)
	}
}
