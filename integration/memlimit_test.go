package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestMemoryLimitFollowsKernel: the daemon's soft memory limit is raised
// by the nodes a walk makes the view's kernel hold (go-fuse keeps one per
// inode the kernel holds), and lowered again once the kernel forgets them
// (issue 28: with a fixed limit the collector took 60% of the daemon's
// CPU in a large walk).
func TestMemoryLimitFollowsKernel(t *testing.T) {
	const (
		dirs    = 50
		perDir  = 1000
		files   = dirs * perDir
		base    = 128 << 20 // --memory-limit's default
		perNode = 400       // fusefs.perNodeReserve
	)
	store := newStore(t)
	v, addr := startObservedView(t, store)
	var wg sync.WaitGroup
	errs := make(chan error, dirs)
	sem := make(chan struct{}, 4)
	for d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			dir := v.Path(fmt.Sprintf("d%02d", d))
			if err := os.Mkdir(dir, 0o755); err != nil {
				errs <- err
				return
			}
			for f := range perDir {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", f)), nil, 0o644); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("fill: %v", err)
	}

	limits := func() (entries, limit, runtime float64) {
		f := scrape(t, addr)
		return f.value(t, "shedfs_fuse_kernel_entries"), f.value(t, "shedfs_memory_limit_bytes"), f.value(t, "go_gc_gomemlimit_bytes")
	}
	// forgotten drops the kernel's dentries and inodes and waits for the
	// FORGETs and the next lowering of the limit (every second).
	forgotten := func(when string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0o200); err != nil {
				t.Fatalf("drop caches: %v", err)
			}
			time.Sleep(500 * time.Millisecond)
			entries, limit, rt := limits()
			if entries < 1000 && limit < base+(1000+4096)*perNode+8<<20 && rt == limit {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v kernel entries, limit %v (runtime %v) after a cache drop; want under 1000 and the limit back near %d", when, entries, limit, rt, base)
			}
		}
	}
	forgotten("after the fill")

	n := 0
	err := filepath.WalkDir(v.Path(), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, err := os.Lstat(p); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	if n < files+dirs {
		t.Fatalf("walk saw %d entries, want at least %d", n, files+dirs)
	}
	// The gauges are set at each raise and every second.
	deadline := time.Now().Add(3 * time.Second)
	for {
		entries, limit, rt := limits()
		want := float64(base + (files+dirs)*perNode)
		if entries >= files+dirs && limit >= want && rt == limit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a walk of %d inodes: %v kernel entries by the daemon's count, limit %v (runtime %v); want at least %v", files+dirs, entries, limit, rt, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	forgotten("after the walk")
}
