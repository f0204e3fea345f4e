package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/internal/etcdtest"
	"github.com/shedfs/shedfs/internal/s3test"
)

// bucketStore is a store whose contents are in a prefix of a real S3
// server's bucket, with its cache in the store directory.
type bucketStore struct {
	s     *s3test.Server
	dir   string
	flags []string
}

// newBucketStore makes a store on s under a prefix named after the test.
func newBucketStore(t *testing.T, s *s3test.Server) *bucketStore {
	t.Helper()
	prefix := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	b := &bucketStore{s: s, dir: filepath.Join(t.TempDir(), "store"), flags: []string{"--blobs", s.URL(prefix)}}
	if out, errOut, code := runCLIEnv(t, s.Env(), append([]string{"init", "--store", b.dir}, b.flags...)...); code != 0 {
		t.Fatalf("shedfs init on a bucket: exit %d\n%s%s", code, out, errOut)
	}
	return b
}

// mount serves user's view of the store, with extra flags.
func (b *bucketStore) mount(t *testing.T, user string, extra ...string) *View {
	t.Helper()
	args := append([]string{"mount", "--store", b.dir, "--user", user}, b.flags...)
	v := launchView(t, newMountpoint(t), b.s.Env(), append(args, extra...))
	v.Store, v.User = b.dir, user
	v.waitMounted()
	return v
}

// dropCache removes this host's cache of the bucket, as a new host has
// none: what is read next comes from the bucket.
func (b *bucketStore) dropCache(t *testing.T) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(b.dir, "blobs")); err != nil {
		t.Fatal(err)
	}
}

// status is shedfs status --json of the store.
func (b *bucketStore) status(t *testing.T) daemon.Status {
	t.Helper()
	out, errOut, code := runCLIEnv(t, b.s.Env(), append([]string{"status", "--json", "--store", b.dir}, b.flags...)...)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	var st daemon.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	return st
}

// waitUploaded waits until the daemon has nothing left to upload.
func (b *bucketStore) waitUploaded(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := b.status(t)
		if st.Bucket == nil {
			t.Fatal("status shows no bucket")
		}
		if st.Bucket.PendingUploads == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("uploads still pending: %+v", *st.Bucket)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func randomData(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// TestBucketContent: on a store whose contents are in a bucket, files
// written, rewritten in place, overwritten (the old content kept in
// trash/) and removed read back the same from a host with an empty
// cache, and trash/ restores from the bucket.
func TestBucketContent(t *testing.T) {
	s := s3test.Start(t)
	b := newBucketStore(t, s)
	v := b.mount(t, "alice", "--cache-size", "64MiB")
	mustWrite(t, v.Path("a.txt"), []byte("first\n"), 0o644)
	mustWrite(t, v.Path("a.txt"), []byte("second\n"), 0o644) // O_TRUNC: "first" kept
	big := randomData(20<<20+4321, 1)
	mustWrite(t, v.Path("big"), big, 0o644)
	patch := randomData(4096, 2)
	f, err := os.OpenFile(v.Path("big"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(patch, 9<<20+17); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	copy(big[9<<20+17:], patch)
	mustWrite(t, v.Path("gone"), []byte("removed"), 0o644)
	if err := os.Remove(v.Path("gone")); err != nil {
		t.Fatal(err)
	}
	b.waitUploaded(t)
	v.Stop()
	b.dropCache(t)

	v = b.mount(t, "alice", "--cache-size", "64MiB")
	if got := mustRead(t, v.Path("a.txt")); string(got) != "second\n" {
		t.Errorf("a.txt from the bucket: %q", got)
	}
	if got := mustRead(t, v.Path("big")); !bytes.Equal(got, big) {
		t.Errorf("big from the bucket: %d bytes, not what was written", len(got))
	}
	want := sha256Hex(big)
	if got := waitXattr(t, v.Path("big"), "user.shedfs.sha256", 30*time.Second, func(s string) bool { return s == want }); got != want {
		t.Errorf("big's user.shedfs.sha256 %q, want %q", got, want)
	}
	kept := trashNames(t, v.Path("trash"), "a.txt")
	if len(kept) != 1 {
		t.Fatalf("trash/ lists %v for a.txt, want the first version", kept)
	}
	if got := mustRead(t, v.Path("trash", kept[0])); string(got) != "first\n" {
		t.Errorf("the kept version reads %q", got)
	}
	gone := trashNames(t, v.Path("trash"), "gone")
	if len(gone) != 1 {
		t.Fatalf("trash/ lists %v for gone", gone)
	}
	if err := os.Rename(v.Path("trash", gone[0]), v.Path("gone")); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := mustRead(t, v.Path("gone")); string(got) != "removed" {
		t.Errorf("restored file reads %q", got)
	}
	v.Stop()
	if out, errOut, code := runCLIEnv(t, s.Env(), append([]string{"fsck", "--store", b.dir, "--verify-content"}, b.flags...)...); code != 0 || !hasCleanLine(out) {
		t.Errorf("fsck --verify-content of the bucket's store: exit %d\n%s%s", code, out, errOut)
	}
}

// TestBucketDown: the S3 server is killed during the upload of a closed
// file; with it down, an fsync fails with EIO
// after --blob-timeout (never succeeds without the object), while close
// succeeds into the cache; once the server is back the same fsync
// succeeds, the background uploads complete, and another cache reads
// every file whole.
func TestBucketDown(t *testing.T) {
	s := s3test.Start(t)
	b := newBucketStore(t, s)
	v := b.mount(t, "alice", "--blob-timeout", "3s")
	synced := randomData(3<<20, 3)
	f, err := os.Create(v.Path("synced"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(synced); err != nil {
		t.Fatal(err)
	}
	large := randomData(64<<20, 5)
	mustWrite(t, v.Path("large"), large, 0o644) // its upload starts at close
	time.Sleep(100 * time.Millisecond)
	s.Kill() // during the upload of large, most likely
	if st := b.status(t).Bucket; st == nil || st.PendingUploads == 0 {
		t.Logf("large was uploaded before the kill: %+v", st)
	}
	start := time.Now()
	err = f.Sync()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync with the bucket down: %v, want EIO", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("fsync failed after %v, want about --blob-timeout", d)
	}
	closed := randomData(5<<20, 4)
	mustWrite(t, v.Path("closed"), closed, 0o644) // into the cache
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync with the bucket back: %v", err)
	}
	f.Close()
	b.waitUploaded(t)
	v.Stop()
	b.dropCache(t)
	v = b.mount(t, "alice")
	if got := mustRead(t, v.Path("synced")); !bytes.Equal(got, synced) {
		t.Errorf("synced: %d bytes from the bucket, not what was written", len(got))
	}
	if got := mustRead(t, v.Path("closed")); !bytes.Equal(got, closed) {
		t.Errorf("closed: %d bytes from the bucket, not what was written", len(got))
	}
	if got := mustRead(t, v.Path("large")); !bytes.Equal(got, large) {
		t.Errorf("large, whose upload the kill cut: %d bytes from the bucket, not what was written", len(got))
	}
}

// TestBucketDaemonKilled: files closed while the bucket was down are in
// the cache only; after kill -9 of the daemon, the next start uploads
// them (the dirty cache is the journal).
func TestBucketDaemonKilled(t *testing.T) {
	s := s3test.Start(t)
	b := newBucketStore(t, s)
	v := b.mount(t, "alice", "--blob-timeout", "2s")
	s.Kill()
	want := map[string][]byte{}
	for i, n := range []int{100, 1 << 20, 9<<20 + 7} {
		name := "f" + string(rune('0'+i))
		want[name] = randomData(n, int64(10+i))
		mustWrite(t, v.Path(name), want[name], 0o644)
	}
	v.Kill()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	v = b.mount(t, "alice")
	b.waitUploaded(t)
	v.Stop()
	b.dropCache(t)
	v = b.mount(t, "alice")
	for name, data := range want {
		if got := mustRead(t, v.Path(name)); !bytes.Equal(got, data) {
			t.Errorf("%s after kill -9 and restart: %d bytes, not what was written", name, len(got))
		}
	}
}

// TestBucketSmallCache: a cache of 64 MiB writes and then, empty, reads
// a file much larger than itself (SHEDFS_BUCKET_BIG MiB, 1 GiB by
// default) by ranged reads, and its disk usage stays under its size.
func TestBucketSmallCache(t *testing.T) {
	size := int64(1 << 30)
	if s := os.Getenv("SHEDFS_BUCKET_BIG"); s != "" {
		n, err := daemon.ParseSize(s + "MiB")
		if err != nil {
			t.Fatal(err)
		}
		size = n
	}
	const cacheSize = 64 << 20
	s := s3test.Start(t)
	b := newBucketStore(t, s)
	v := b.mount(t, "alice", "--cache-size", "64MiB")
	f, err := os.Create(v.Path("large"))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	block := make([]byte, 1<<20)
	rng := rand.New(rand.NewSource(5))
	for written := int64(0); written < size; written += int64(len(block)) {
		rng.Read(block)
		h.Write(block)
		if _, err := f.Write(block); err != nil {
			t.Fatalf("write at %d: %v", written, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := h.Sum(nil)
	b.waitUploaded(t)
	if used := cacheUsage(t, b); used > cacheSize {
		t.Errorf("after the write the cache takes %d bytes on disk, its size is %d", used, cacheSize)
	}
	v.Stop()
	b.dropCache(t)
	v = b.mount(t, "alice", "--cache-size", "64MiB")
	r, err := os.Open(v.Path("large"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h.Reset()
	if n, err := io.Copy(h, r); err != nil || n != size {
		t.Fatalf("read %d bytes, %v; want %d", n, err, size)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		t.Error("the large file read through a small cache differs")
	}
	if used := cacheUsage(t, b); used > cacheSize {
		t.Errorf("after the read the cache takes %d bytes on disk, its size is %d", used, cacheSize)
	}
	st := b.status(t).Bucket
	if st == nil || st.Misses == 0 || st.DownloadBytes < size {
		t.Errorf("status after the read: %+v", st)
	}
}

// cacheUsage is what the store's cache takes on disk, as du counts it.
func cacheUsage(t *testing.T, b *bucketStore) int64 {
	t.Helper()
	var used int64
	err := filepath.Walk(filepath.Join(b.dir, "blobs"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return nil // removed meanwhile
		}
		used += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// TestBucketTwoHosts: two daemons share only an etcd cluster and a
// bucket, each with a cache of its own: what alice writes on A, bob reads
// on B after her close, and the reverse, the second time through a
// cached copy of the old version (close-to-open); a 5 MiB quota filled
// from both hosts at once is never exceeded, and refuses no write that
// fitted.
func TestBucketTwoHosts(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s3 := s3test.Start(t)
	for _, kv := range s3.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // the daemons and commands inherit them
	}
	meta := "etcd://" + strings.Join(c.Endpoints(), ",") + "/" + t.Name()
	host := func(cache string) *etcdStore {
		return &etcdStore{cluster: c, args: []string{"--meta", meta, "--blobs", s3.URL(t.Name()), "--cache", filepath.Join(t.TempDir(), cache)}}
	}
	admin := host("admin")
	admin.cli(t, "init")
	admin.cli(t, "user", "add", "alice")
	admin.cli(t, "user", "add", "bob")
	admin.cli(t, "group", "add", "team-alpha")
	admin.cli(t, "group", "add-member", "team-alpha", "alice", "bob")
	a, _ := startEtcdServe(t, host("a"), "alice", "bob")
	b, _ := startEtcdServe(t, host("b"), "alice", "bob")
	ga := func(elem ...string) string {
		return a.In("alice", append([]string{"groups", "team-alpha"}, elem...)...)
	}
	gb := func(elem ...string) string { return b.In("bob", append([]string{"groups", "team-alpha"}, elem...)...) }

	v1 := randomData(9<<20+5, 20)
	mustWrite(t, ga("plan"), v1, 0o644)
	if _, ok := within(10*time.Second, func() bool { got, _ := os.ReadFile(gb("plan")); return bytes.Equal(got, v1) }); !ok {
		got, err := os.ReadFile(gb("plan"))
		t.Fatalf("plan written on A: B reads %d bytes, %v\nA:\n%s\nB:\n%s", len(got), err, a.Stderr(), b.Stderr())
	}
	v2 := randomData(3<<20, 21)
	mustWrite(t, gb("plan"), v2, 0o644)
	if _, ok := within(10*time.Second, func() bool { got, _ := os.ReadFile(ga("plan")); return bytes.Equal(got, v2) }); !ok {
		t.Fatal("plan rewritten on B: A still reads its cached old version")
	}

	// The quota is exact across the hosts: alice writes 512 KiB files
	// from both at once until each is refused; what she has never
	// exceeds 5 MiB, and no write that fitted was refused.
	const limit, piece = 5 << 20, 512 << 10
	admin.cli(t, "quota", "set", "user:alice", "--bytes", "5MiB")
	fill := func(v *serveDaemon, name string, seed int64) error {
		for i := 0; ; i++ {
			err := os.WriteFile(v.In("alice", fmt.Sprintf("%s-%d", name, i)), randomData(piece, seed+int64(i)), 0o644)
			if err != nil {
				return err
			}
		}
	}
	errs := make(chan error, 2)
	go func() { errs <- fill(a, "a", 100) }()
	go func() { errs <- fill(b, "b", 200) }()
	for range 2 {
		if err := <-errs; !errors.Is(err, syscall.EDQUOT) {
			t.Errorf("a write past the quota failed with %v, want EDQUOT", err)
		}
	}
	var total int64
	ents, err := os.ReadDir(a.In("alice"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
	}
	if total > limit || total <= limit-piece {
		t.Errorf("alice's files on A total %d bytes after both hosts filled a %d-byte quota: want at most the limit and within one %d-byte write of it", total, limit, piece)
	}
	var qs []qInfo
	if out := admin.cli(t, "quota", "show", "user:alice", "--json"); json.Unmarshal([]byte(out), &qs) != nil || len(qs) != 1 {
		t.Fatalf("quota show --json: %s", out)
	}
	if used := qs[0].Used.Bytes; used != total {
		t.Errorf("quota show: alice uses %d bytes, her files on A total %d", used, total)
	}
}

// TestBucketStoreRemembersBucket: a store made on a bucket records it and
// is opened only with it; a store of local blobs is not opened on a
// bucket. Each refusal is one line and a non-zero exit, and nothing is
// changed (the store opens as before afterwards).
func TestBucketStoreRemembersBucket(t *testing.T) {
	s := s3test.Start(t)
	b := newBucketStore(t, s)
	local := newStore(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"bucket store without --blobs", []string{"--store", b.dir}, "are in the bucket"},
		{"bucket store, another prefix", []string{"--store", b.dir, "--blobs", s.URL("another")}, "not " + s.URL("another")},
		{"local store on a bucket", []string{"--store", local, "--blobs", s.URL("local")}, "in a directory, not in a bucket"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runCLIEnv(t, s.Env(), append([]string{"status"}, c.args...)...)
			if code == 0 || !strings.Contains(errOut, c.want) {
				t.Fatalf("status %v: exit %d, stdout %q, stderr %q; want a refusal saying %q", c.args, code, out, errOut, c.want)
			}
			checkOneLine(t, "the refusal", errOut)
		})
	}
	// Both still open as they were made.
	b.status(t)
	if _, errOut, code := runCLI(t, "status", "--store", local); code != 0 {
		t.Fatalf("the local store no longer opens: exit %d: %s", code, errOut)
	}
}
