package integration

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestReaddirStaleAfterOwnUnlink is issue 24, item 16 (a walk right after
// `unlink b` listed b, and lstat b said ENOENT): processes of one view
// list a big directory over and over while another unlinks a name and
// lists the directory twice; the second listing, begun after the unlink
// and after a listing of its own, must not show the name. The kernel's
// listing cache was filled from a listing begun before the unlink and
// validated by one begun after it (fusefs/listings.go). It is a race: the
// test tries for a while, in a private folder and in a shared one.
func TestReaddirStaleAfterOwnUnlink(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	budget := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SHEDFS_STALE_TIME")); err == nil {
		budget = d
	}
	for _, dir := range []string{s.In("alice", "stale"), s.In("alice", "share", "stale")} {
		mustMkdir(t, dir, 0o755)
		for i := range 400 {
			mustWrite(t, fmt.Sprintf("%s/a-rather-long-name-that-fills-the-buffer-%03d", dir, i), nil, 0o644)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := os.ReadDir(dir); err != nil {
						t.Errorf("a lister: %v", err)
						return
					}
				}
			}()
		}
		deadline := time.Now().Add(budget)
		tries, stale := 0, 0
		for ; time.Now().Before(deadline) && stale == 0; tries++ {
			name := fmt.Sprintf("b-%d", tries)
			mustWrite(t, dir+"/"+name, nil, 0o644)
			if _, err := os.ReadDir(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(dir + "/" + name); err != nil {
				t.Fatal(err)
			}
			for k := range 2 {
				ents, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				if k == 1 && slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == name }) {
					_, err := os.Lstat(dir + "/" + name)
					t.Errorf("%s: try %d: a listing after unlink %s and a listing lists it (lstat: %v)", dir, tries, name, err)
					stale++
				}
			}
		}
		close(stop)
		wg.Wait()
		t.Logf("%s: %d tries, %d stale listings", dir, tries, stale)
	}
}
