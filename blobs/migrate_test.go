package blobs

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/shedfs/shedfs/internal/s3test"
)

// TestMigrate: a local blob directory copied into a bucket reads back the
// same through a Remote with an empty cache; a run cancelled after the
// first blob, then run again, uploads only what the first run did not,
// and a third run uploads nothing; a blob changed between runs is read
// back as changed.
func TestMigrate(t *testing.T) {
	s := s3test.Start(t)
	b := bucketOf(t, s, "migrate")
	src, err := OpenDir(filepath.Join(t.TempDir(), "src"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[uint64][]byte{}
	for ino, size := range map[uint64]int{2: 0, 3: 100, 4: 3*testChunk + 17, 5: 5 * testChunk} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if ino == 5 {
			clear(data[testChunk : 2*testChunk]) // a hole
		}
		f, err := src.OpenFile(ino, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		f.Close()
		want[ino] = data
	}

	ctx, cancel := context.WithCancel(context.Background())
	st, err := Migrate(ctx, src, b, testChunk, func(MigrateStats) { cancel() })
	if !errors.Is(err, context.Canceled) || st.Uploaded != 1 {
		t.Fatalf("cancelled after the first blob: %+v, %v", st, err)
	}
	st, err = Migrate(context.Background(), src, b, testChunk, nil)
	if err != nil || st.Blobs != 4 || st.Uploaded != 3 {
		t.Fatalf("second run: %+v, %v; want 4 blobs, 3 uploaded", st, err)
	}
	// Changed since: uploaded again under a newer version.
	want[3] = []byte("changed")
	if err := os.WriteFile(src.Path(3), want[3], 0o600); err != nil {
		t.Fatal(err)
	}
	st, err = Migrate(context.Background(), src, b, testChunk, nil)
	if err != nil || st.Uploaded != 1 || st.Bytes != int64(len(want[3])) {
		t.Fatalf("third run: %+v, %v; want blob 3 alone uploaded", st, err)
	}

	d, _ := cacheOf(t, b, filepath.Join(t.TempDir(), "cache"), 1<<20)
	for ino, data := range want {
		if got := readAll(t, d, ino); !bytes.Equal(got, data) {
			t.Errorf("blob %d from the bucket: %d bytes, not the %d migrated", ino, len(got), len(data))
		}
	}
}
