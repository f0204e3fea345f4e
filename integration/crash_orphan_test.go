package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOrphanChargeBeforeCrash is issue 24, item 12: after a crash the
// start-up repair found an unlinked inode "kept for open handles" and
// corrected a user's inode count with nothing of hers open. An inode that
// leaves the namespace and the trash while a handle holds it must go,
// with its charge, at that handle's last release, not only at the next
// stop or start. Each case holds a file open, makes it lose its last
// name or kept copy one way, closes, and then: the user's usage is back
// where it was, and after a kill -9 the store needs no repair.
func TestOrphanChargeBeforeCrash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// gone makes the open file f (its name in alice's view) leave
		// the namespace and the trash.
		gone func(t *testing.T, s *serveDaemon, f string)
		// left is how many inodes more than before alice holds after
		// gone (a file renamed over the open one).
		left int64
	}{
		{"admin trash purge of a kept open file", func(t *testing.T, s *serveDaemon, f string) {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
			adminOK(t, "trash", "purge", "--holder", "user:alice", "--all", "--store", s.Store)
		}, 0},
		{"rm in trash/ of a kept open file", func(t *testing.T, s *serveDaemon, f string) {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
			kept, _ := filepath.Glob(s.In("alice", "trash", "d", "open.txt@*"))
			if len(kept) != 1 {
				t.Fatalf("trash/d/open.txt@*: %v, want one kept file", kept)
			}
			if err := os.Remove(kept[0]); err != nil {
				t.Fatalf("rm %s: %v", kept[0], err)
			}
		}, 0},
		{"unlink with the trash off", func(t *testing.T, s *serveDaemon, f string) {
			adminOK(t, "trash", "retention", "0", "--store", s.Store)
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"rename over with the trash off", func(t *testing.T, s *serveDaemon, f string) {
			adminOK(t, "trash", "retention", "0", "--store", s.Store)
			mustWrite(t, f+".new", []byte("new\n"), 0o644)
			if err := os.Rename(f+".new", f); err != nil {
				t.Fatal(err)
			}
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			adminOK(t, "user", "add", "alice", "--store", store)
			s := startServe(t, store, "alice")
			mustMkdir(t, s.In("alice", "d"), 0o755)
			base := inodesUsed(t, s.Store, "user:alice")

			f := s.In("alice", "d", "open.txt")
			mustWrite(t, f, []byte("held open\n"), 0o644)
			h, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close() // before the daemon stops, whatever fails
			tc.gone(t, s, f)
			if got := string(mustReadFile(t, h)); got != "held open\n" {
				t.Errorf("the open handle reads %q after the file went", got)
			}
			h.Close()

			// The release is asynchronous in the kernel (FUSE RELEASE
			// after close returns): allow it a moment.
			want := base + tc.left
			deadline := time.Now().Add(5 * time.Second)
			for inodesUsed(t, s.Store, "user:alice") != want && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if got := inodesUsed(t, s.Store, "user:alice"); got != want {
				t.Errorf("alice's inode count is %d 5 s after the last handle of the gone file closed, want %d", got, want)
			}
			// Past the write-behind of the metadata, and past the grace
			// of the reclaimed inode's blob (kept for requests under
			// way): a kill -9 before then leaves a blob of no inode
			// for the repair, as documented.
			time.Sleep(3500 * time.Millisecond)
			killServe(s)
			out, errOut, code := runCLI(t, "fsck", "--store", store, "--dry-run")
			if code != 0 || strings.Contains(out+errOut, "kept for open handles") || !hasCleanLine(out+errOut) {
				t.Errorf("fsck --dry-run after kill -9 with nothing open: exit %d, want clean\n%s%s", code, out, errOut)
			}
		})
	}
}

// inodesUsed is the inodes charged to holder h, as quota show says.
func inodesUsed(t *testing.T, store, h string) int64 {
	t.Helper()
	return snapQuotaOf(t, store, h).Used.Inodes
}

// mustReadFile reads what is left of f from offset 0.
func mustReadFile(t *testing.T, f *os.File) []byte {
	t.Helper()
	b := make([]byte, 4096)
	n, err := f.ReadAt(b, 0)
	if n == 0 && err != nil {
		t.Fatalf("read %s: %v", f.Name(), err)
	}
	return b[:n]
}
