package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shedfs/shedfs"
)

// Timeouts of the link server: a client gets 10 s to send its headers and
// 30 s for a request; a response may take 30 minutes (a large file on a
// slow line); an idle keep-alive connection is closed after 2 minutes.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 32 << 10
)

// server is the listening part of a Service.
type server struct {
	srv  *http.Server
	stop chan struct{}
	done chan struct{}
}

// Listen serves links on addr until Shutdown, and purges expired link
// records meanwhile. Without a public URL, links start with
// "http://<address listened on>". It returns the address.
func (s *Service) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("link server: %w", err)
	}
	key, err := s.signingKey()
	if err != nil {
		ln.Close()
		return nil, err
	}
	if n := s.staleLinks(key); n > 0 {
		s.log.Warn("live links were made under another link key and open nothing: its file was replaced; restore it, or rotate-key to revoke them",
			"links", n, "path", filepath.Join(s.opts.Dir, KeyFile))
	}
	srv := &server{
		srv: &http.Server{
			Handler:           s.Handler(),
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		},
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	s.mu.Lock()
	if s.public == "" {
		s.public = "http://" + ln.Addr().String()
	}
	s.srv = srv
	s.mu.Unlock()
	go func() {
		if err := srv.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("link server", "err", err)
		}
	}()
	go s.purge(srv.stop, srv.done)
	s.log.Info("links listening", "addr", ln.Addr().String(), "public_url", s.publicURL())
	return ln.Addr(), nil
}

// Shutdown stops serving, letting requests under way finish until ctx
// ends.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	close(srv.stop)
	<-srv.done
	if err := srv.srv.Shutdown(ctx); err != nil {
		srv.srv.Close()
		return fmt.Errorf("link server: %w", err)
	}
	return nil
}

// purge deletes expired link records now and every PurgeInterval.
func (s *Service) purge(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.opts.PurgeInterval)
	defer t.Stop()
	for {
		if n, err := s.store.PurgeLinks(s.opts.Now()); err != nil {
			s.log.Warn("purge expired links", "err", err)
		} else if n > 0 {
			s.log.Info("expired links purged", "count", n)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// Handler is the link server's HTTP handler: GET and HEAD of /l/TOKEN and
// /l/TOKEN/CHILD/NAME, every other request a 404 or 405 page. Nothing is
// listed without a token.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /l/{token}", s.serveLink)
	mux.HandleFunc("GET /l/{token}/{$}", s.serveLink)
	mux.HandleFunc("GET /l/{token}/{child}/{name}", s.serveLink)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.fail(w, r, http.StatusMethodNotAllowed)
			return
		}
		s.fail(w, r, http.StatusNotFound)
	})
	return s.guard(mux)
}

// guard wraps every request: the cap per client (503 past it, limits.go),
// headers that keep tokens out of referrers and browsers from guessing
// types, and the request and byte counters.
func (s *Service) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &counting{ResponseWriter: w}
		h := rw.Header()
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "private, no-cache")
		defer func() {
			s.metrics.requests.WithLabelValues(strconv.Itoa(rw.code())).Inc()
			s.metrics.bytes.Add(float64(rw.bytes))
		}()
		done, ok := s.lim.client(r.RemoteAddr)
		if !ok {
			s.busy(rw, r, ruleBusyClient, "")
			return
		}
		defer done()
		next.ServeHTTP(rw, r)
	})
}

// busy answers 503 for a limit reached (limits.go), and audits and counts
// the refusal with its rule.
func (s *Service) busy(w http.ResponseWriter, r *http.Request, rule, link string) {
	s.metrics.busy.WithLabelValues(rule).Inc()
	s.record(shedfs.Event{Time: s.opts.Now(), User: shedfs.NoUser, Op: OpDownload, Link: link, Client: r.RemoteAddr,
		Errno: errnoOf(http.StatusServiceUnavailable), Reason: rule})
	w.Header().Set("Retry-After", "1")
	s.fail(w, r, http.StatusServiceUnavailable)
}

// counting remembers the status and counts the body bytes of a response.
type counting struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (c *counting) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *counting) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	c.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (c *counting) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *counting) code() int {
	if c.status == 0 {
		return http.StatusOK
	}
	return c.status
}
