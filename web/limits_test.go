package web

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// slowReader opens url and reads only the response's first bytes, so
// that the server stays in the middle of writing it: a client on a slow
// line, or one that stalls on purpose. It is closed at the end of the
// test.
func slowReader(t *testing.T, rawURL string) {
	t.Helper()
	addr, path, _ := strings.Cut(strings.TrimPrefix(rawURL, "http://"), "/")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("GET /" + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, " 200 ") {
		t.Fatalf("slow reader: %q %v", line, err)
	}
}

// bigFile is a file too large for the socket buffers to hold.
var bigFile = strings.Repeat("x", 64<<20)

func busyEvents(f *fixture, rule string) int {
	n := 0
	for _, ev := range f.rec.all() {
		if ev.Reason == rule && ev.Errno != 0 && ev.Client != "" {
			n++
		}
	}
	return n
}

// Slow readers of one link take at most PerLink slots: other links are
// served meanwhile, and the refusals are audited (issue 24, item 2).
func TestSlowReadersOfOneLink(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxConcurrent, o.PerLink, o.PerClient = 4, 2, 16 })
	out := f.alice.Roots.Output
	big := f.write(out, "big.bin", bigFile)
	small := f.write(out, "small.txt", "small")
	a, err := f.svc.Create("alice", big.Ino, out, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.svc.Create("alice", small.Ino, out, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		slowReader(t, a.URL)
	}
	for range 2 {
		if resp, _ := f.get(a.URL, "Range", "bytes=0-0"); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("a third reader of the link: %d", resp.StatusCode)
		}
	}
	for range 3 {
		if resp, body := f.get(b.URL); resp.StatusCode != http.StatusOK || body != "small" {
			t.Errorf("another link while one is read slowly: %d", resp.StatusCode)
		}
	}
	if n := busyEvents(f, ruleBusyLink); n != 2 {
		t.Errorf("%d refusals audited as %s, want 2", n, ruleBusyLink)
	}
}

// One client has at most PerClient requests under way.
func TestOneClientsShare(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxConcurrent, o.PerLink, o.PerClient = 8, 8, 2 })
	out := f.alice.Roots.Output
	big := f.write(out, "big.bin", bigFile)
	a, err := f.svc.Create("alice", big.Ino, out, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	slowReader(t, a.URL)
	slowReader(t, a.URL)
	if resp, _ := f.get(a.URL, "Range", "bytes=0-0"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a third request of the client: %d", resp.StatusCode)
	}
	if n := busyEvents(f, ruleBusyClient); n != 1 {
		t.Errorf("%d refusals audited as %s, want 1", n, ruleBusyClient)
	}
}

// pendingContent is a scan service whose verdict on every file is
// pending until release is closed.
type pendingContent struct {
	waiting sync.WaitGroup
	release chan struct{}
}

func (p *pendingContent) ForLink(ctx context.Context, ino uint64, z shedfs.Zone) (string, shedfs.Content, acl.Decision) {
	p.waiting.Done()
	select {
	case <-p.release:
	case <-ctx.Done():
	}
	return "", shedfs.Content{State: shedfs.ScanClean}, acl.Decision{}
}

func (p *pendingContent) Content(ino uint64, z shedfs.Zone) (shedfs.Content, error) {
	return shedfs.Content{State: shedfs.ScanPending}, nil
}

// Requests waiting for a scan verdict hold no serving slot: with every
// slot's worth of them waiting, another link is served (item 2).
func TestWaitingForAScanHoldsNoSlot(t *testing.T) {
	pc := &pendingContent{release: make(chan struct{})}
	f := newFixture(t, func(o *Options) { o.MaxConcurrent, o.PerLink, o.PerClient, o.Content = 2, 8, 8, pc })
	out := f.alice.Roots.Output
	n := f.write(out, "new.txt", "new")
	a, err := f.svc.Create("alice", n.Ino, out, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pc.waiting.Add(2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if resp, _ := f.get(a.URL); resp.StatusCode != http.StatusOK {
				t.Errorf("after the verdict: %d", resp.StatusCode)
			}
		})
	}
	pc.waiting.Wait()
	if resp, _ := f.get(f.srv.URL + "/l/x"); resp.StatusCode == http.StatusServiceUnavailable {
		t.Errorf("with every slot's worth of requests waiting for a scan: %d", resp.StatusCode)
	}
	close(pc.release)
	wg.Wait()
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:4000":            "192.0.2.7",
		"[::ffff:192.0.2.7]:4000":   "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:80": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:80": "2001:db8:1:2::/64",
		"not an address":            "not an address",
		"[2001:db8:1:3::1%eth0]:80": "2001:db8:1:3::/64",
	} {
		if got := clientKey(in); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// A request queues for a store reader, and gives up with its context.
func TestReaders(t *testing.T) {
	l := newLimits(4, 1, 4, 4)
	done, ok := l.read(t.Context())
	if !ok {
		t.Fatal("first reader refused")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, ok := l.read(ctx); ok {
		t.Fatal("a second reader past the cap")
	}
	done()
	if done, ok := l.read(t.Context()); !ok {
		t.Fatal("reader after release refused")
	} else {
		done()
	}
}
