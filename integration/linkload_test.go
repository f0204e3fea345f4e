package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// linkLoadFiles is the size of the directory TestLinkServerLoad shares;
// SHEDFS_LINK_LOAD_FILES changes it (10000 for the numbers of issue 24).
func linkLoadFiles(t *testing.T) int {
	if v := os.Getenv("SHEDFS_LINK_LOAD_FILES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 10000
}

// TestLinkServerLoad: a folder link to a large directory, fetched by 40
// clients at once, leaves the views usable: another user's small writes
// meanwhile take about what they take idle. A folder page is a page, not
// the whole directory, and a file link in the directory costs about what
// one in a small directory does (issue 24, item 3).
func TestLinkServerLoad(t *testing.T) {
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	adminOK(t, "user", "add", "bob", "--store", store)
	s, _ := startLinkServe(t, store, "alice", "bob")
	n := linkLoadFiles(t)
	big := s.In("alice", "output", "big")
	mustMkdir(t, big, 0o755)
	for i := range n {
		mustWrite(t, filepath.Join(big, fmt.Sprintf("f%05d.txt", i)), []byte("some text\n"), 0o644)
	}
	mustWrite(t, s.In("alice", "output", "small.txt"), []byte("some text\n"), 0o644)
	folder := getLink(t, big)
	inBig := getLink(t, filepath.Join(big, fmt.Sprintf("f%05d.txt", n/2)))
	alone := getLink(t, s.In("alice", "output", "small.txt"))

	client := &http.Client{Timeout: 2 * time.Minute}
	get := func(u string) (int, time.Duration, error) {
		t0 := time.Now()
		resp, err := client.Get(u)
		if err != nil {
			return 0, 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return len(b), time.Since(t0), err
	}
	size, d, err := get(folder)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one folder page of %d entries: %d bytes in %v", n, size, d)
	if size > 200<<10 {
		t.Errorf("a folder page of %d entries is %d bytes: not paged", n, size)
	}
	median := func(u string) time.Duration {
		var ds []time.Duration
		for range 21 {
			_, d, err := get(u)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	mIn, mAlone := median(inBig), median(alone)
	t.Logf("file link: %v in the large directory, %v in a small one (medians of 21)", mIn, mAlone)
	if mIn > 3*mAlone+5*time.Millisecond {
		t.Errorf("a file link in a directory of %d entries takes %v, one in a small one %v", n, mIn, mAlone)
	}

	round := 0
	writes := func() time.Duration {
		round++
		t0 := time.Now()
		for i := range 50 {
			mustWrite(t, s.In("bob", fmt.Sprintf("w%d-%02d.txt", round, i)), []byte("small\n"), 0o644)
		}
		return time.Since(t0)
	}
	med3 := func() time.Duration {
		ds := []time.Duration{writes(), writes(), writes()}
		slices.Sort(ds)
		return ds[1]
	}
	idle := med3()
	// 40 clients, each from its own address, fetch the folder's pages
	// over and over while bob writes.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	stop := make(chan struct{})
	start := time.Now()
	for c := range 40 {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(c+1))}
		cl := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: local}).DialContext,
		}}
		wg.Go(func() {
			for p := 1; ; p++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := cl.Get(folder + "?page=" + strconv.Itoa(1+p%(n/200+1)))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
				if resp.StatusCode == http.StatusServiceUnavailable {
					// A polite client: again after Retry-After.
					select {
					case <-stop:
					case <-time.After(time.Second):
					}
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	loaded := med3()
	close(stop)
	wg.Wait()
	t.Logf("40 clients fetching folder pages for %v: status counts %v; 50 small writes in another view (median of 3): %v idle, %v meanwhile",
		time.Since(start).Round(time.Millisecond), codes, idle, loaded)
	if loaded > max(20*idle, 2*time.Second) {
		t.Errorf("the link server took the views: 50 writes took %v while it served, %v idle", loaded, idle)
	}
}
