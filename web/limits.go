package web

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"
)

// The link server answers strangers, so no one of them may take it from
// the others, nor it from the views (which people are waiting on):
//
//   - a client (an IPv4 address, an IPv6 /64) has at most PerClient
//     requests under way, and a link at most PerLink, waiting ones
//     included; more get 503 at once;
//   - at most MaxConcurrent requests are being served; a request waiting
//     for a file's scan verdict gives its slot back while it waits;
//   - at most Readers requests read the store at once (resolving a link,
//     building a folder page): the store is what the views run on, and a
//     folder of 10,000 entries read by 40 clients at once made writes in a
//     view 500 times slower. Others queue for a while (readerWait), then
//     get 503.
//
// Each refusal is audited and counted with its rule.
const (
	ruleBusyClient = "link_busy_client"
	ruleBusyLink   = "link_busy_link"
	ruleBusyServer = "link_busy_server"
)

// readerWait is how long a request queues to read the store before it is
// answered 503.
const readerWait = 10 * time.Second

// limits counts what the link server's requests hold.
type limits struct {
	perClient, perLink int
	slots              chan struct{}
	readers            chan struct{}

	mu      sync.Mutex
	clients map[string]int
	links   map[string]int
}

func newLimits(slots, readers, perClient, perLink int) *limits {
	return &limits{
		perClient: perClient, perLink: perLink,
		slots:   make(chan struct{}, slots),
		readers: make(chan struct{}, readers),
		clients: map[string]int{}, links: map[string]int{},
	}
}

// take counts one more request of key in m, false (and nothing counted)
// at max.
func (l *limits) take(m map[string]int, key string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m[key] >= max {
		return false
	}
	m[key]++
	return true
}

func (l *limits) give(m map[string]int, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m[key]--; m[key] <= 0 {
		delete(m, key)
	}
}

// client admits one more request of the client at addr (a RemoteAddr);
// false past PerClient. done ends it.
func (l *limits) client(addr string) (done func(), ok bool) {
	key := clientKey(addr)
	if !l.take(l.clients, key, l.perClient) {
		return nil, false
	}
	return func() { l.give(l.clients, key) }, true
}

// link admits one more request on link id; false past PerLink.
func (l *limits) link(id string) (done func(), ok bool) {
	if !l.take(l.links, id, l.perLink) {
		return nil, false
	}
	return func() { l.give(l.links, id) }, true
}

// clientKey is who a client is for PerClient: its IPv4 address, or the
// /64 of its IPv6 address (which one host gets whole).
func clientKey(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// slot is one request's hold on a serving slot: taken at once or not at
// all, given back while the request waits (Wait) and on Release.
type slot struct {
	l    *limits
	held bool
}

// acquire takes a slot, false when every one is taken.
func (s *slot) acquire() bool {
	if s.held {
		return true
	}
	select {
	case s.l.slots <- struct{}{}:
		s.held = true
		return true
	default:
		return false
	}
}

// release gives the slot back, if held.
func (s *slot) release() {
	if s.held {
		<-s.l.slots
		s.held = false
	}
}

// read waits, up to readerWait or ctx, to read the store; false when it
// did not get to. done ends the reading.
func (l *limits) read(ctx context.Context) (done func(), ok bool) {
	select {
	case l.readers <- struct{}{}:
		return func() { <-l.readers }, true
	default:
	}
	t := time.NewTimer(readerWait)
	defer t.Stop()
	select {
	case l.readers <- struct{}{}:
		return func() { <-l.readers }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}
