package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketName is the admin socket's name inside the store directory: the
// store is where a CLI given --store looks, and its 0700 mode is a second
// fence around the 0600 socket.
const SocketName = "admin.sock"

// maxBody bounds every request body; admin requests are a few hundred
// bytes.
const maxBody = 1 << 20

// SocketPath is where the admin socket of the store in dir lives.
func SocketPath(dir string) string { return filepath.Join(dir, SocketName) }

// Server answers the admin API over a Unix socket, for root and for the
// uid the daemon runs as, and nobody else.
type Server struct {
	admin Admin
	log   *slog.Logger
	path  string
	ln    net.Listener
	http  *http.Server
	done  chan struct{}
	// allowed decides whether a peer uid may use the API; tests replace
	// it to see a refusal.
	allowed func(uid uint32) bool
}

// peerKey carries a connection's peer credentials in its context.
type peerKey struct{}

// peerCred is what SO_PEERCRED told about a connection, or why it could
// not.
type peerCred struct {
	ucred *unix.Ucred
	err   error
}

// Listen creates the admin socket at path (mode 0600) and serves admin on
// it until Shutdown. A socket file left by a daemon that died is replaced;
// one a live daemon answers on is an error.
func Listen(path string, admin Admin, log *slog.Logger, doors ...Route) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(path) >= len(unix.RawSockaddrUnix{}.Path) {
		return nil, fmt.Errorf("admin socket path %s is too long for a Unix socket (%d bytes, limit %d)", path, len(path), len(unix.RawSockaddrUnix{}.Path)-1)
	}
	switch c, err := DialSocket(path); {
	case err == nil:
		c.Close()
		return nil, fmt.Errorf("admin socket %s: another daemon is answering on it", path)
	case !errors.Is(err, ErrNoDaemon):
		// A daemon may be there, too busy to answer: its socket
		// is not taken from it.
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale admin socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	self := uint32(os.Getuid())
	s := &Server{
		admin: admin,
		log:   log,
		path:  path,
		ln:    ln,
		done:  make(chan struct{}),
		allowed: func(uid uint32) bool {
			return uid == 0 || uid == self
		},
	}
	var h http.Handler = newHandler(admin, log)
	if len(doors) > 0 {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		for _, d := range doors {
			mux.Handle(d.Pattern, d.Handler)
		}
		h = mux
	}
	s.http = &http.Server{
		Handler:           s.checkPeer(h),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerKey{}, peerOf(c))
		},
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin API stopped", "err", err)
		}
	}()
	log.Info("admin API listening", "socket", path)
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Shutdown stops accepting, lets requests in flight finish until ctx ends,
// and removes the socket file.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	<-s.done
	if err != nil {
		return fmt.Errorf("admin API shutdown: %w", err)
	}
	return nil
}

// peerOf reads SO_PEERCRED of an accepted Unix connection.
func peerOf(c net.Conn) peerCred {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peerCred{err: fmt.Errorf("not a Unix connection: %T", c)}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peerCred{err: err}
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peerCred{err: err}
	}
	return peerCred{ucred: cred, err: credErr}
}

// checkPeer refuses every request whose peer is not allowed, and logs it:
// the socket mode is the first fence, this is the one that does not depend
// on how the store directory was created.
func (s *Server) checkPeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pc, _ := r.Context().Value(peerKey{}).(peerCred)
		switch {
		case pc.ucred == nil:
			s.log.Warn("admin API: peer credentials unavailable; refused", "err", pc.err, "method", r.Method, "path", r.URL.Path)
			writeError(w, errorf(CodeForbidden, "admin API: cannot tell who is asking"))
			return
		case !s.allowed(pc.ucred.Uid):
			s.log.Warn("admin API: refused", "uid", pc.ucred.Uid, "pid", pc.ucred.Pid, "method", r.Method, "path", r.URL.Path)
			writeError(w, errorf(CodeForbidden, "admin API: uid %d may not administer this store (root only)", pc.ucred.Uid))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Route is a handler the admin socket serves beside the admin API.
type Route struct {
	Pattern string
	Handler http.Handler
}

// newHandler routes the admin API to admin. It is the part of the server
// that decodes what a client sends, kept separate from the socket so that
// it can be fuzzed in process.
func newHandler(admin Admin, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, fn endpoint) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			status, v, err := fn(r)
			if err != nil {
				e := asError(err, "admin request")
				if e.Code == CodeInternal {
					log.Error("admin API", "method", r.Method, "path", r.URL.Path, "err", e.Message)
				}
				writeError(w, e)
				return
			}
			writeJSON(w, status, v)
		})
	}
	h("POST /v1/users", created(route(jsonBody[UserAddRequest], admin.AddUser)))
	h("GET /v1/users", route0(admin.ListUsers))
	h("GET /v1/users/{name}", route(pathArg("name"), admin.ShowUser))
	h("DELETE /v1/users/{name}", route2(pathArg("name"), forceParam, admin.RemoveUser))
	if ua, ok := admin.(UserAdmin); ok {
		h("PATCH /v1/users/{name}", route2(pathArg("name"), jsonBody[UserSetRequest], ua.SetUser))
	}
	h("POST /v1/groups", created(route(jsonBody[GroupAddRequest], admin.AddGroup)))
	h("GET /v1/groups", route0(admin.ListGroups))
	h("GET /v1/groups/{name}", route(pathArg("name"), admin.ShowGroup))
	h("DELETE /v1/groups/{name}", route2(pathArg("name"), forceParam, admin.RemoveGroup))
	h("POST /v1/groups/{name}/members", route2(pathArg("name"), jsonBody[MemberRequest], admin.AddMember))
	h("DELETE /v1/groups/{name}/members/{user}", route2(pathArg("name"), pathArg("user"), admin.RemoveMember))
	h("GET /v1/quotas", route(constant(""), admin.ShowQuota))
	h("GET /v1/quotas/{holder}", route(holderArg, admin.ShowQuota))
	h("PUT /v1/quotas/{holder}", route2(pathArg("holder"), jsonBody[QuotaSetRequest], admin.SetQuota))
	h("GET /v1/status", route0(admin.Status))
	// Imports and ownership overrides: files_api.go.
	fileRoutes(mux, h, admin, log)
	auditRoutes(h, admin)       // audit_api.go
	settingsRoutes(h, admin)    // settings.go
	linkRoutes(h, admin)        // links_api.go
	tokenRoutes(h, admin)       // tokens_api.go
	editLockRoutes(h, admin)    // editlocks_api.go
	quarantineRoutes(h, admin)  // content_api.go
	trashRoutes(h, admin)       // trash_api.go
	sessionRoutes(h, admin)     // session_api.go
	snapshotRoutes(h, admin)    // snapshot_api.go
	sessionDiffRoutes(h, admin) // session_diff.go
	// Everything else is a JSON error too, never Go's plain-text 404 or
	// 405: a known path with another method is 405, the rest 404.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
				writeError(w, errorf(CodeMethod, "admin API: %q not allowed on %q", r.Method, r.URL.Path))
				return
			}
		}
		writeError(w, errorf(CodeNotFound, "admin API: no endpoint %s %q", r.Method, r.URL.Path))
	})
	// The mux answers a path with "." or ".." segments or doubled slashes
	// with a redirect; the API has no use for one and answers in JSON.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || path.Clean(p) != p {
			writeError(w, errorf(CodeInvalid, "admin API: path %q is not canonical", p))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// forceParam reads the optional ?force=true of a removal.
func forceParam(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("force")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(CodeInvalid, "force=%q: not a boolean", v)
	}
	return b, nil
}

// holderArg reads the {holder} of GET /v1/quotas/{holder}.
func holderArg(r *http.Request) (string, error) {
	holder := r.PathValue("holder")
	if holder == "" {
		return "", errorf(CodeInvalid, "empty quota holder")
	}
	return holder, nil
}

// An endpoint answers one admin request: the status of a success and the
// value to encode, or the error to answer with (newHandler writes either).
type endpoint = func(r *http.Request) (int, any, error)

// An arg reads one argument of an admin operation from a request: a JSON
// body, a path wildcard, a query parameter. Its error is the answer.
type arg[A any] func(r *http.Request) (A, error)

// route is an endpoint that reads the argument of the admin operation op
// with a, performs op and answers 200 with its result. Nearly every admin
// route is one of these (route0, route2 and route3 for the other
// arities, created for 201), so they all decode, call and encode alike;
// Client's call is the other end.
func route[A, Resp any](a arg[A], op func(ctx context.Context, a A) (Resp, error)) endpoint {
	return func(r *http.Request) (int, any, error) {
		x, err := a(r)
		if err != nil {
			return 0, nil, err
		}
		v, err := op(r.Context(), x)
		return http.StatusOK, v, err
	}
}

// route0 is route for an operation without arguments.
func route0[Resp any](op func(ctx context.Context) (Resp, error)) endpoint {
	return route(constant(struct{}{}), func(ctx context.Context, _ struct{}) (Resp, error) { return op(ctx) })
}

// route2 is route for an operation of two arguments, read in order: a
// refused first argument is the answer, and the second is not read.
func route2[A, B, Resp any](a arg[A], b arg[B], op func(ctx context.Context, a A, b B) (Resp, error)) endpoint {
	return route(both(a, b), func(ctx context.Context, p pair[A, B]) (Resp, error) { return op(ctx, p.a, p.b) })
}

// route3 is route for an operation of three arguments, read in order.
func route3[A, B, C, Resp any](a arg[A], b arg[B], c arg[C], op func(ctx context.Context, a A, b B, c C) (Resp, error)) endpoint {
	return route2(a, both(b, c), func(ctx context.Context, x A, p pair[B, C]) (Resp, error) { return op(ctx, x, p.a, p.b) })
}

// created answers what e answers, with 201 for a success.
func created(e endpoint) endpoint {
	return func(r *http.Request) (int, any, error) {
		_, v, err := e(r)
		return http.StatusCreated, v, err
	}
}

// pair is two arguments read from one request.
type pair[A, B any] struct {
	a A
	b B
}

// both reads a, then b unless a was refused.
func both[A, B any](a arg[A], b arg[B]) arg[pair[A, B]] {
	return func(r *http.Request) (p pair[A, B], err error) {
		if p.a, err = a(r); err != nil {
			return p, err
		}
		p.b, err = b(r)
		return p, err
	}
}

// jsonBody reads the request body as a Req, strictly (decode).
func jsonBody[Req any](r *http.Request) (Req, error) {
	var req Req
	err := decode(r, &req)
	return req, err
}

// pathArg reads the path wildcard {name}.
func pathArg(name string) arg[string] {
	return func(r *http.Request) (string, error) { return r.PathValue(name), nil }
}

// queryArg reads the query parameter name, "" when it is absent.
func queryArg(name string) arg[string] {
	return func(r *http.Request) (string, error) { return r.URL.Query().Get(name), nil }
}

// constant is an argument the route itself gives.
func constant[A any](v A) arg[A] {
	return func(*http.Request) (A, error) { return v, nil }
}

// decode reads a request body strictly: bounded in size, no unknown
// fields, exactly one JSON value.
func decode(r *http.Request, v any) error {
	body := http.MaxBytesReader(nil, r.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(CodeTooLarge, "request body larger than %d bytes", maxBody)
		}
		if errors.Is(err, io.EOF) {
			return errorf(CodeInvalid, "empty request body")
		}
		return errorf(CodeInvalid, "bad request body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(CodeTooLarge, "request body larger than %d bytes", maxBody)
		}
		return errorf(CodeInvalid, "bad request body: more than one JSON value")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, errorf(CodeInternal, "encode response: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, e *Error) {
	body, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.HTTPStatus())
	w.Write(append(body, '\n'))
}

// isConnRefused tells a dead daemon's socket from other dial failures.
func isConnRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}
