package objstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shedfs/shedfs/internal/s3test"
	"github.com/shedfs/shedfs/objstore"
)

// open opens the server's bucket under prefix with its credentials.
func open(t testing.TB, s *s3test.Server, prefix string, m *objstore.Metrics) objstore.Bucket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := objstore.Open(ctx, s.URL(prefix), objstore.Options{Metrics: m, AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	return data
}

func put(t testing.TB, b objstore.Bucket, key string, data []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	if err := b.Put(ctxFor(t), key, bytes.NewReader(data), int64(len(data)), sum[:]); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, b objstore.Bucket, key string, off, n int64) []byte {
	t.Helper()
	rc, err := b.Get(ctxFor(t), key, off, n)
	if err != nil {
		t.Fatalf("get %s [%d,+%d): %v", key, off, n, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("get %s [%d,+%d): reading: %v", key, off, n, err)
	}
	return data
}

// TestBucket runs the bucket's contract against one real SeaweedFS (a
// server takes about 11 s to start).
func TestBucket(t *testing.T) {
	s := s3test.Start(t)
	m := objstore.NewMetrics()
	b := open(t, s, "store1", m)

	t.Run("PutGetRanges", func(t *testing.T) {
		data := randomBytes(300_000, 1)
		put(t, b, "obj/ranges", data)
		for _, c := range []struct {
			off, n int64
			want   []byte
		}{
			{0, -1, data},
			{0, 10, data[:10]},
			{12345, 1, data[12345:12346]},
			{5, -1, data[5:]},
			{299_990, 100, data[299_990:]}, // the object ends first
			{300_000, -1, nil},             // at the end: nothing
			{300_001, 10, nil},             // past it: nothing
			{7, 0, nil},                    // no bytes asked
		} {
			if got := get(t, b, "obj/ranges", c.off, c.n); !bytes.Equal(got, c.want) {
				t.Errorf("Get(%d, %d): %d bytes, want %d (equal: %v)", c.off, c.n, len(got), len(c.want), bytes.Equal(got, c.want))
			}
		}
	})

	t.Run("EmptyObject", func(t *testing.T) {
		put(t, b, "obj/empty", nil)
		if got := get(t, b, "obj/empty", 0, -1); len(got) != 0 {
			t.Errorf("empty object read back as %d bytes", len(got))
		}
		info, err := b.Stat(ctxFor(t), "obj/empty")
		if err != nil || info.Size != 0 {
			t.Errorf("Stat = %+v, %v; want size 0", info, err)
		}
	})

	t.Run("Stat", func(t *testing.T) {
		before := time.Now().Add(-time.Minute)
		put(t, b, "obj/stat", []byte("twelve bytes"))
		info, err := b.Stat(ctxFor(t), "obj/stat")
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != "obj/stat" || info.Size != 12 || info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Minute)) {
			t.Errorf("Stat = %+v, want key obj/stat, size 12, modified about now", info)
		}
	})

	t.Run("Missing", func(t *testing.T) {
		if _, err := b.Stat(ctxFor(t), "obj/missing"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Stat of a missing key: %v, want ErrNotFound", err)
		}
		if _, err := b.Get(ctxFor(t), "obj/missing", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Get of a missing key: %v, want ErrNotFound", err)
		}
		if _, err := b.Get(ctxFor(t), "obj/missing", 10, 5); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("ranged Get of a missing key: %v, want ErrNotFound", err)
		}
		if _, err := b.Get(ctxFor(t), "obj/missing", 0, 0); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("empty Get of a missing key: %v, want ErrNotFound", err)
		}
		if err := b.Delete(ctxFor(t), "obj/missing"); err != nil {
			t.Errorf("Delete of a missing key: %v, want nil", err)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		put(t, b, "obj/deleted", []byte("x"))
		if err := b.Delete(ctxFor(t), "obj/deleted"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Stat(ctxFor(t), "obj/deleted"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Stat after Delete: %v, want ErrNotFound", err)
		}
	})

	t.Run("List", func(t *testing.T) {
		other := open(t, s, "store2", nil)
		put(t, other, "list/a", []byte("other store"))
		want := []string{"list/a", "list/b/c", "list/d"}
		for i, k := range want {
			put(t, b, k, bytes.Repeat([]byte("z"), i+1))
		}
		put(t, b, "listx", []byte("not under list/"))
		var got []string
		err := b.List(ctxFor(t), "list/", func(i objstore.Info) error {
			got = append(got, i.Key)
			if want := int64(slices.Index(want, i.Key) + 1); i.Size != want {
				t.Errorf("List: %s has size %d, want %d", i.Key, i.Size, want)
			}
			return nil
		})
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("List(list/) = %q, %v; want %q (keys relative to the prefix, none of store2's)", got, err, want)
		}
		stop := errors.New("stop here")
		n := 0
		err = b.List(ctxFor(t), "list/", func(objstore.Info) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Errorf("List with a failing callback: %v after %d calls, want its error after 1", err, n)
		}
	})

	// A listing longer than one page (1000 keys) is followed to its end.
	t.Run("ListPages", func(t *testing.T) {
		const n = 1005
		for i := range n {
			put(t, b, fmt.Sprintf("many/%04d", i), nil)
		}
		var got int
		last := ""
		err := b.List(ctxFor(t), "many/", func(i objstore.Info) error {
			if i.Key <= last {
				t.Errorf("List: %q after %q, want key order", i.Key, last)
			}
			last = i.Key
			got++
			return nil
		})
		if err != nil || got != n {
			t.Errorf("List(many/) gave %d keys (%v), want %d", got, err, n)
		}
	})

	// SeaweedFS refuses it with XAmzContentSHA256Mismatch (the signed
	// payload hash); it checks x-amz-checksum-sha256 too (BadDigest).
	t.Run("ChecksumMismatchRefused", func(t *testing.T) {
		errsBefore := putErrors(t, m)
		data := []byte("the bytes that were hashed")
		wrong := sha256.Sum256([]byte("other bytes"))
		err := b.Put(ctxFor(t), "obj/mismatch", bytes.NewReader(data), int64(len(data)), wrong[:])
		if err == nil {
			t.Fatal("Put with a wrong SHA-256 succeeded")
		}
		if _, err := b.Stat(ctxFor(t), "obj/mismatch"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("after a refused Put, Stat: %v; want ErrNotFound (nothing stored)", err)
		}
		if got := putErrors(t, m); got != errsBefore+1 {
			t.Errorf("put errors went from %v to %v, want one more", errsBefore, got)
		}
	})

	t.Run("ShortBodyRefused", func(t *testing.T) {
		data := []byte("only these")
		sum := sha256.Sum256(data)
		if err := b.Put(ctxFor(t), "obj/short", bytes.NewReader(data), int64(len(data))+5, sum[:]); err == nil {
			t.Fatal("Put of a body shorter than its size succeeded")
		}
		if _, err := b.Stat(ctxFor(t), "obj/short"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("after a short Put, Stat: %v; want ErrNotFound", err)
		}
	})

	t.Run("BadCredentialsRefused", func(t *testing.T) {
		ctx := ctxFor(t)
		_, err := objstore.Open(ctx, s.URL("store1"), objstore.Options{AccessKeyID: s.AccessKey, SecretAccessKey: "wrong", Check: true})
		if err == nil {
			t.Fatal("Open with a wrong secret and Check succeeded")
		}
		bad, err := objstore.Open(ctx, s.URL("store1"), objstore.Options{AccessKeyID: s.AccessKey, SecretAccessKey: "wrong"})
		if err != nil {
			t.Fatalf("Open without Check: %v", err)
		}
		if _, err := bad.Stat(ctx, "obj/stat"); err == nil || errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Stat with a wrong secret: %v, want a refusal", err)
		}
		data := []byte("x")
		sum := sha256.Sum256(data)
		if err := bad.Put(ctx, "obj/intruder", bytes.NewReader(data), 1, sum[:]); err == nil {
			t.Error("Put with a wrong secret succeeded")
		}
		if _, err := objstore.Open(ctx, s.URL("")+"&x=1", objstore.Options{}); err == nil {
			t.Error("Open of a bad address succeeded")
		}
	})

	// Without static keys Open takes the SDK's default chain: the
	// environment variables first, then a profile of the shared
	// credentials file.
	t.Run("DefaultCredentialChain", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
		t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
		t.Setenv("AWS_PROFILE", "")
		for _, kv := range s.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		if _, err := objstore.Open(ctxFor(t), s.URL("store1"), objstore.Options{Check: true}); err != nil {
			t.Errorf("Open with the credentials in the environment: %v", err)
		}
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
		creds := filepath.Join(dir, "credentials")
		conf := fmt.Sprintf("[other]\naws_access_key_id = %s\naws_secret_access_key = wrong\n[shedfs]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
			s.AccessKey, s.AccessKey, s.SecretKey)
		if err := os.WriteFile(creds, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
		t.Setenv("AWS_PROFILE", "shedfs")
		if _, err := objstore.Open(ctxFor(t), s.URL("store1"), objstore.Options{Check: true}); err != nil {
			t.Errorf("Open with profile shedfs of the shared credentials file: %v", err)
		}
		t.Setenv("AWS_PROFILE", "other")
		if _, err := objstore.Open(ctxFor(t), s.URL("store1"), objstore.Options{Check: true}); err == nil {
			t.Error("Open with profile other (a wrong secret) succeeded")
		}
	})

	t.Run("MissingBucket", func(t *testing.T) {
		l, err := objstore.ParseURL(s.URL(""))
		if err != nil {
			t.Fatal(err)
		}
		l.Bucket = "no-such-bucket"
		_, err = objstore.Open(ctxFor(t), l.String(), objstore.Options{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey, Check: true})
		if err == nil {
			t.Error("Open with Check of a missing bucket succeeded")
		}
	})

	t.Run("Deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		if _, err := b.Stat(ctx, "obj/stat"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stat past its deadline: %v, want DeadlineExceeded", err)
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		up, down := value(t, m, "shedfs_bucket_upload_bytes_total", ""), value(t, m, "shedfs_bucket_download_bytes_total", "")
		data := randomBytes(70_000, 2)
		put(t, b, "obj/metrics", data)
		get(t, b, "obj/metrics", 100, 1000)
		if got := value(t, m, "shedfs_bucket_upload_bytes_total", "") - up; got != 70_000 {
			t.Errorf("upload bytes grew by %v, want 70000", got)
		}
		if got := value(t, m, "shedfs_bucket_download_bytes_total", "") - down; got != 1000 {
			t.Errorf("download bytes grew by %v, want 1000", got)
		}
		r := prometheus.NewPedanticRegistry()
		if err := r.Register(m); err != nil {
			t.Fatal(err)
		}
		if n, err := testutil.GatherAndCount(r); err != nil || n != 2+len(objstore.Ops) {
			t.Errorf("the collector gives %d series (%v), want %d", n, err, 2+len(objstore.Ops))
		}
	})
}

// TestStreamsWithoutBuffering puts and gets an object of 192 MiB made on
// the fly and checks that the heap stays far below its size: bodies are
// streamed, never held whole.
func TestStreamsWithoutBuffering(t *testing.T) {
	s := s3test.Start(t)
	b := open(t, s, "", nil)
	const size = 192 << 20
	const limit = 48 << 20
	gen := func() io.Reader { return s3test.Pattern(7, size) }
	h := sha256.New()
	io.Copy(h, gen())
	sum := h.Sum(nil)

	peak := watchHeap(t)
	if err := b.Put(ctxFor(t), "big", gen(), size, sum); err != nil {
		t.Fatal(err)
	}
	rc, err := b.Get(ctxFor(t), "big", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	h.Reset()
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil || n != size || !bytes.Equal(h.Sum(nil), sum) {
		t.Fatalf("read back %d bytes (%v), same SHA-256: %v", n, err, bytes.Equal(h.Sum(nil), sum))
	}
	if p := peak(); p > limit {
		t.Errorf("heap in use peaked at %d MiB moving a %d MiB object, want under %d MiB", p>>20, size>>20, limit>>20)
	} else {
		t.Logf("heap in use peaked at %d MiB moving a %d MiB object", p>>20, size>>20)
	}
}

// TestKillAndRestart: while the server is down every operation fails
// (never as a missing object, never a Put that seems to succeed); after
// a restart the bucket serves what it stored and takes new objects.
func TestKillAndRestart(t *testing.T) {
	s := s3test.Start(t)
	m := objstore.NewMetrics()
	b := open(t, s, "p", m)
	data := randomBytes(100_000, 3)
	put(t, b, "kept", data)

	s.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Stat(ctx, "kept"); err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Stat with the server down: %v, want a failure that is not ErrNotFound", err)
	}
	if _, err := b.Get(ctx, "kept", 0, -1); err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get with the server down: %v, want a failure that is not ErrNotFound", err)
	}
	sum := sha256.Sum256(data)
	if err := b.Put(ctx, "new", bytes.NewReader(data), int64(len(data)), sum[:]); err == nil {
		t.Error("Put with the server down succeeded")
	}
	if got := putErrors(t, m); got != 1 {
		t.Errorf("put errors = %v, want 1", got)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, b, "kept", 0, -1); !bytes.Equal(got, data) {
		t.Errorf("after a restart the object reads back as %d bytes, not its %d", len(got), len(data))
	}
	put(t, b, "new", data)
	if got := get(t, b, "new", 50_000, -1); !bytes.Equal(got, data[50_000:]) {
		t.Error("an object put after the restart does not read back")
	}
}

// watchHeap samples the heap in use until t ends; the returned function
// gives the peak so far.
func watchHeap(t *testing.T) func() uint64 {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
	return peak.Load
}

// value reads one series of m: the family name, with op="op" when op is
// not "".
func value(t *testing.T, m *objstore.Metrics, name, op string) float64 {
	t.Helper()
	r := prometheus.NewPedanticRegistry()
	if err := r.Register(m); err != nil {
		t.Fatal(err)
	}
	fams, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if op == "" || (len(s.GetLabel()) == 1 && s.GetLabel()[0].GetValue() == op) {
				return s.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{op=%q}", name, op)
	return 0
}

func putErrors(t *testing.T, m *objstore.Metrics) float64 {
	return value(t, m, "shedfs_bucket_errors_total", "put")
}

// BenchmarkPut1GiB measures the reference for sequential writes:
// a single 1 GiB PUT through objstore to SeaweedFS on this machine
// (go test ./objstore -run '^$' -bench Put1GiB -benchtime 3x).
func BenchmarkPut1GiB(b *testing.B) {
	s := s3test.Start(b)
	bucket := open(b, s, "bench", nil)
	ctx := context.Background()
	var total time.Duration
	for i := range b.N {
		key := fmt.Sprintf("put-%d", i)
		res, err := s3test.ReferencePut(ctx, bucket, key, uint64(i), 1<<30)
		if err != nil {
			b.Fatal(err)
		}
		total += res.Elapsed
		b.Logf("reference put %d: %v", i, res)
		if err := bucket.Delete(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	// ns/op is the Put alone, without ReferencePut's hashing pass.
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(b.N)*(1<<30)/1e6/total.Seconds(), "put-MB/s")
}
