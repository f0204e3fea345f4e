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
func Listen(path string, admin Admin, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(path) >= len(unix.RawSockaddrUnix{}.Path) {
		return nil, fmt.Errorf("admin socket path %s is too long for a Unix socket (%d bytes, limit %d)", path, len(path), len(unix.RawSockaddrUnix{}.Path)-1)
	}
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("admin socket %s: another daemon is answering on it", path)
		}
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
	s.http = &http.Server{
		Handler:           s.checkPeer(newHandler(admin, log)),
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

// newHandler routes the admin API to admin. It is the part of the server
// that decodes what a client sends, kept separate from the socket so that
// it can be fuzzed in process.
func newHandler(admin Admin, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, fn func(r *http.Request) (int, any, error)) {
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
	h("POST /v1/users", func(r *http.Request) (int, any, error) {
		var req UserAddRequest
		if err := decode(r, &req); err != nil {
			return 0, nil, err
		}
		v, err := admin.AddUser(r.Context(), req)
		return http.StatusCreated, v, err
	})
	h("GET /v1/users", func(r *http.Request) (int, any, error) {
		v, err := admin.ListUsers(r.Context())
		return http.StatusOK, v, err
	})
	h("GET /v1/users/{name}", func(r *http.Request) (int, any, error) {
		v, err := admin.ShowUser(r.Context(), r.PathValue("name"))
		return http.StatusOK, v, err
	})
	h("DELETE /v1/users/{name}", func(r *http.Request) (int, any, error) {
		force, err := forceParam(r)
		if err != nil {
			return 0, nil, err
		}
		v, err := admin.RemoveUser(r.Context(), r.PathValue("name"), force)
		return http.StatusOK, v, err
	})
	h("POST /v1/groups", func(r *http.Request) (int, any, error) {
		var req GroupAddRequest
		if err := decode(r, &req); err != nil {
			return 0, nil, err
		}
		v, err := admin.AddGroup(r.Context(), req)
		return http.StatusCreated, v, err
	})
	h("GET /v1/groups", func(r *http.Request) (int, any, error) {
		v, err := admin.ListGroups(r.Context())
		return http.StatusOK, v, err
	})
	h("GET /v1/groups/{name}", func(r *http.Request) (int, any, error) {
		v, err := admin.ShowGroup(r.Context(), r.PathValue("name"))
		return http.StatusOK, v, err
	})
	h("DELETE /v1/groups/{name}", func(r *http.Request) (int, any, error) {
		force, err := forceParam(r)
		if err != nil {
			return 0, nil, err
		}
		v, err := admin.RemoveGroup(r.Context(), r.PathValue("name"), force)
		return http.StatusOK, v, err
	})
	h("POST /v1/groups/{name}/members", func(r *http.Request) (int, any, error) {
		var req MemberRequest
		if err := decode(r, &req); err != nil {
			return 0, nil, err
		}
		v, err := admin.AddMember(r.Context(), r.PathValue("name"), req)
		return http.StatusOK, v, err
	})
	h("DELETE /v1/groups/{name}/members/{user}", func(r *http.Request) (int, any, error) {
		v, err := admin.RemoveMember(r.Context(), r.PathValue("name"), r.PathValue("user"))
		return http.StatusOK, v, err
	})
	h("GET /v1/quotas", func(r *http.Request) (int, any, error) {
		v, err := admin.ShowQuota(r.Context(), "")
		return http.StatusOK, v, err
	})
	h("GET /v1/quotas/{holder}", func(r *http.Request) (int, any, error) {
		holder := r.PathValue("holder")
		if holder == "" {
			return 0, nil, errorf(CodeInvalid, "empty quota holder")
		}
		v, err := admin.ShowQuota(r.Context(), holder)
		return http.StatusOK, v, err
	})
	h("PUT /v1/quotas/{holder}", func(r *http.Request) (int, any, error) {
		var req QuotaSetRequest
		if err := decode(r, &req); err != nil {
			return 0, nil, err
		}
		v, err := admin.SetQuota(r.Context(), r.PathValue("holder"), req)
		return http.StatusOK, v, err
	})
	h("GET /v1/status", func(r *http.Request) (int, any, error) {
		v, err := admin.Status(r.Context())
		return http.StatusOK, v, err
	})
	// Imports and ownership overrides: files_api.go.
	fileRoutes(mux, h, admin, log)
	auditRoutes(h, admin)      // audit_api.go
	settingsRoutes(h, admin)   // settings.go
	linkRoutes(h, admin)       // links_api.go
	quarantineRoutes(h, admin) // content_api.go
	trashRoutes(h, admin)      // trash_api.go
	sessionRoutes(h, admin)    // session_api.go
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
