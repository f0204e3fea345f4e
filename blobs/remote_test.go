package blobs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/internal/s3test"
	"github.com/shedfs/shedfs/objstore"
)

// testChunk is the chunk size of the tests' caches: small, so that a few
// MiB make many chunks.
const testChunk = 64 << 10

// bucketOf opens a bucket under a prefix of its own on s.
func bucketOf(t *testing.T, s *s3test.Server, prefix string) objstore.Bucket {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	b, err := objstore.Open(context.Background(), s.URL(prefix), objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cacheOf makes a fresh cache directory of b with the given size.
func cacheOf(t *testing.T, b objstore.Bucket, dir string, size int64) (*Dir, *Remote) {
	t.Helper()
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenRemote(d, b, RemoteOptions{CacheSize: size, Timeout: 5 * time.Second, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return d, r
}

// writeAt writes data at off of ino's blob as the core does: through the
// Changing hook around the file's own write.
func writeAt(t *testing.T, d *Dir, ino uint64, fresh bool, off int64, data []byte) {
	t.Helper()
	open := d.OpenFile
	if fresh {
		open = func(ino uint64, _ bool) (*os.File, error) { return d.OpenFresh(ino) }
	}
	f, err := open(ino, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done, err := d.Changing(ino, off, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

// readAll reads ino's blob through the cache.
func readAll(t *testing.T, d *Dir, ino uint64) []byte {
	t.Helper()
	r, err := d.OpenReader(ino)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// manifests counts the manifests of ino in b.
func manifests(t *testing.T, b objstore.Bucket, ino uint64) int {
	t.Helper()
	n := 0
	if err := b.List(context.Background(), manifestDir(ino), func(objstore.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRemote runs the cache's promises against a real S3 server: what one
// host writes and syncs, a host with an empty cache reads; a 4 KiB
// rewrite uploads one chunk; a small cache reads a large blob and stays
// under its size; the journal uploads after a stop; a bucket that is down
// fails a sync with EIO, and the upload completes once it is back.
func TestRemote(t *testing.T) {
	s := s3test.Start(t)
	testRemote(t, bucketOf(t, s, "remote-test"), s.Kill, s.Restart)
}

// testRemote is TestRemote on bucket b, which kill makes unreachable
// until restart.
func testRemote(t *testing.T, b objstore.Bucket, kill func(), restart func() error) {
	const ino = 42
	want := randomBytes(20*testChunk+123, 1)

	t.Run("write, sync, read elsewhere", func(t *testing.T) {
		d, r := cacheOf(t, b, t.TempDir(), 1<<30)
		writeAt(t, d, ino, true, 0, want)
		if err := d.Durable(ino); err != nil {
			t.Fatal(err)
		}
		if st := r.Stats(); st.PendingUploads != 0 || st.PendingBytes != 0 {
			t.Fatalf("after a sync: %+v", st)
		}
		if _, err := os.Stat(d.journalPath(ino)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("journal left after a sync: %v", err)
		}
		other, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		if got := readAll(t, other, ino); !bytes.Equal(got, want) {
			t.Fatalf("another cache read %d bytes, not what was written", len(got))
		}
		if n, err := other.Size(ino); err != nil || n != int64(len(want)) {
			t.Fatalf("size %d, %v", n, err)
		}
	})

	t.Run("a 4 KiB rewrite uploads one chunk", func(t *testing.T) {
		d, r := cacheOf(t, b, t.TempDir(), 1<<30)
		patch := randomBytes(4096, 2)
		off := int64(7*testChunk + 100)
		writeAt(t, d, ino, false, off, patch)
		before := r.Stats().UploadBytes
		if err := d.Durable(ino); err != nil {
			t.Fatal(err)
		}
		if up := r.Stats().UploadBytes - before; up != testChunk {
			t.Fatalf("uploaded %d bytes for a 4 KiB rewrite, want one chunk (%d)", up, testChunk)
		}
		copy(want[off:], patch)
		other, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		if got := readAll(t, other, ino); !bytes.Equal(got, want) {
			t.Fatal("the rewrite did not reach another cache whole")
		}
		if n := manifests(t, b, ino); n != 1 {
			t.Fatalf("%d manifests of the inode, want the newest only", n)
		}
	})

	t.Run("a small cache reads a large blob", func(t *testing.T) {
		size := int64(4 * testChunk)
		dir := t.TempDir()
		d, r := cacheOf(t, b, dir, size)
		if got := readAll(t, d, ino); !bytes.Equal(got, want) {
			t.Fatal("read through a small cache differs")
		}
		if used := diskUsage(t, dir); used > size+testChunk {
			t.Fatalf("the cache holds %d bytes on disk, its size is %d", used, size)
		}
		if st := r.Stats(); st.CacheBytes > size || st.Misses == 0 {
			t.Fatalf("stats %+v", st)
		}
	})

	t.Run("the journal uploads after a stop", func(t *testing.T) {
		dir := t.TempDir()
		d, r := cacheOf(t, b, dir, 1<<30)
		const ino2 = 43
		data := randomBytes(3*testChunk+5, 3)
		writeAt(t, d, ino2, true, 0, data)
		r.Close() // as a kill: nothing uploaded
		if n := manifests(t, b, ino2); n != 0 {
			t.Fatalf("%d manifests before any upload", n)
		}
		_, r2 := cacheOf(t, b, dir, 1<<30)
		waitFor(t, func() bool { return r2.Stats().PendingUploads == 0 })
		other, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		if got := readAll(t, other, ino2); !bytes.Equal(got, data) {
			t.Fatal("the journal's blob did not reach the bucket whole")
		}
	})

	t.Run("bucket down: sync fails, then completes", func(t *testing.T) {
		d, r := cacheOf(t, b, t.TempDir(), 1<<30)
		const ino3 = 44
		data := randomBytes(2*testChunk, 4)
		writeAt(t, d, ino3, true, 0, data)
		kill()
		err := d.Durable(ino3)
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync with the bucket down: %v, want EIO", err)
		}
		if err := restart(); err != nil {
			t.Fatal(err)
		}
		if err := d.Durable(ino3); err != nil {
			t.Fatal(err)
		}
		if st := r.Stats(); st.PendingUploads != 0 {
			t.Fatalf("pending after the sync: %+v", st)
		}
		other, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		if got := readAll(t, other, ino3); !bytes.Equal(got, data) {
			t.Fatal("content after the bucket came back differs")
		}
	})

	t.Run("move keeps the content under the new number", func(t *testing.T) {
		d, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		const from, to = 45, 46
		data := randomBytes(testChunk+9, 5)
		writeAt(t, d, from, true, 0, data)
		if err := d.Durable(from); err != nil {
			t.Fatal(err)
		}
		if err := d.Move(from, to); err != nil {
			t.Fatal(err)
		}
		if err := d.Durable(to); err != nil {
			t.Fatal(err)
		}
		if err := d.Durable(from); err != nil {
			t.Fatal(err)
		}
		other, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		if got := readAll(t, other, to); !bytes.Equal(got, data) {
			t.Fatal("moved content differs")
		}
		if got := readAll(t, other, from); len(got) != 0 {
			t.Fatalf("the old number holds %d bytes, want none", len(got))
		}
		if err := d.Remove(to); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return manifests(t, b, to) == 0 })
	})

	t.Run("truncate", func(t *testing.T) {
		d, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		const ino4 = 47
		data := randomBytes(5*testChunk, 6)
		writeAt(t, d, ino4, true, 0, data)
		if err := d.Durable(ino4); err != nil {
			t.Fatal(err)
		}
		other, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		cut := int64(2*testChunk + 17)
		if err := other.Truncate(ino4, cut); err != nil {
			t.Fatal(err)
		}
		if err := other.Truncate(ino4, cut+testChunk); err != nil {
			t.Fatal(err)
		}
		if err := other.Durable(ino4); err != nil {
			t.Fatal(err)
		}
		third, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		want := append(bytes.Clone(data[:cut]), make([]byte, testChunk)...)
		if got := readAll(t, third, ino4); !bytes.Equal(got, want) {
			t.Fatalf("after truncates: %d bytes, not the cut content and zeros", len(got))
		}
	})

	t.Run("the collector deletes replaced chunks only", func(t *testing.T) {
		_, r := cacheOf(t, b, t.TempDir(), 1<<30)
		if n, err := r.Collect(context.Background(), time.Hour); err != nil || n != 0 {
			t.Fatalf("a collection within the grace deleted %d, %v", n, err)
		}
		before := chunkObjects(t, b)
		n, err := r.Collect(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 || chunkObjects(t, b) != before-n {
			t.Fatalf("collected %d of %d chunks, %d left", n, before, chunkObjects(t, b))
		}
		if n, err := r.Collect(context.Background(), 0); err != nil || n != 0 {
			t.Fatalf("a second collection deleted %d, %v; want none", n, err)
		}
		other, _ := cacheOf(t, b, t.TempDir(), 1<<30)
		if got := readAll(t, other, ino); !bytes.Equal(got, want) {
			t.Fatal("a blob lost chunks to the collector")
		}
	})
}

// chunkObjects counts the chunk objects in b.
func chunkObjects(t *testing.T, b objstore.Bucket) int {
	t.Helper()
	n := 0
	if err := b.List(context.Background(), chunkPrefix, func(objstore.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// diskUsage is the bytes the files under dir take on disk.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var used int64
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return err
		}
		used += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
