package main

import (
	"bytes"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
)

// syncBuffer is a bytes.Buffer go-fuse's server goroutines may log to
// while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// openPassthrough matches go-fuse's debug line of a backing file the
// kernel accepted: the file's reads and writes then bypass the daemon.
var openPassthrough = regexp.MustCompile(`BACKING_OPEN .*: id \d+ \(errno 0\)`)

// TestLoopbackPassthrough: target loopback (the anchor) must serve every
// read itself, never handing a file to the kernel, while loopback-pt does
// where the kernel offers passthrough. go-fuse's loopback asks for
// passthrough on its own, so the anchor would silently be the faster one.
func TestLoopbackPassthrough(t *testing.T) {
	for _, pt := range []bool{false, true} {
		name := "loopback"
		if pt {
			name = "loopback-pt"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
			for _, d := range []string{src, mnt} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(src, "f"), []byte("hello"), 0o644); err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			server, err := mountLoopback(src, mnt, pt, log.New(&logs, "", 0))
			if err != nil {
				t.Fatalf("mount loopback (needs root and /dev/fuse): %v", err)
			}
			t.Cleanup(func() {
				if err := server.Unmount(); err != nil {
					t.Errorf("unmount: %v", err)
					_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
				}
			})
			got, err := os.ReadFile(filepath.Join(mnt, "f"))
			if err != nil || string(got) != "hello" {
				t.Fatalf("read through the loopback: %q, %v", got, err)
			}
			handed := openPassthrough.MatchString(logs.String())
			switch {
			case !pt && handed:
				t.Fatalf("the anchor loopback handed a file to the kernel (passthrough):\n%s", logs.String())
			case pt && !handed:
				t.Skipf("the kernel took no passthrough file (not root, or no FUSE passthrough): nothing to compare:\n%s", logs.String())
			}
		})
	}
}
