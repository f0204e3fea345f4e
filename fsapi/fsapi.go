// Package fsapi is the file API of the doors without a kernel: the
// host.fs surface of OpenWOP (RFC 0014) that a workflow engine calls as
// ctx.fs.{read,write,delete,stat,list}, JSON in and out, each request
// bound to a user (or a session) by a bearer token.
//
// Like the MCP server it holds no rule: every call is agentfs, and so the
// core's view, with the door recorded as "api". Its own work is the wire:
// the routes, the RFC's error envelope and codes, and bounds on what one
// request carries.
package fsapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/agentfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// Door is the name of this door in the audit trail, metrics and tokens.
const Door = "api"

// Principal is who a request acts as.
type Principal struct {
	User, Session string
	Grant         *acl.Grant
	TokenID       string
	TokenReason   string
}

// Options are what the API is built from.
type Options struct {
	Core   *vfs.Core
	Logger *slog.Logger
	// Authenticate checks a request's bearer token.
	Authenticate func(token string) (Principal, error)
	// MaxRead and MaxWrite bound one request's bytes (defaults 4 MiB
	// and 16 MiB); MaxList one listing's entries (1000).
	MaxRead, MaxWrite, MaxList int
	// Metrics, when set, count every request by route and outcome.
	Metrics *agentfs.Metrics
}

// API serves the routes.
type API struct {
	opts Options
	log  *slog.Logger
}

// New returns the API.
func New(opts Options) *API {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxRead <= 0 {
		opts.MaxRead = 4 << 20
	}
	if opts.MaxWrite <= 0 {
		opts.MaxWrite = 16 << 20
	}
	if opts.MaxList <= 0 {
		opts.MaxList = 1000
	}
	return &API{opts: opts, log: opts.Logger}
}

// The RFC's error codes, and the others this door answers.
const (
	CodeOutsideSandbox   = "path_outside_sandbox"
	CodeFileTooLarge     = "file_too_large"
	CodePermissionDenied = "fs_permission_denied"
	CodeNotFound         = "not_found"
	CodeQuotaExceeded    = "quota_exceeded"
	CodeFileLocked       = "file_locked"
	CodeUnauthorized     = "unauthorized"
	CodeInvalid          = "invalid_argument"
)

// wireCode is the RFC's code for an agentfs code.
func wireCode(c agentfs.Code) string {
	switch c {
	case agentfs.CodePathEscape:
		return CodeOutsideSandbox
	case agentfs.CodeFileTooLarge:
		return CodeFileTooLarge
	case agentfs.CodePermissionDenied:
		return CodePermissionDenied
	case agentfs.CodeNotFound:
		return CodeNotFound
	case agentfs.CodeQuotaExceeded:
		return CodeQuotaExceeded
	case agentfs.CodeFileLocked:
		return CodeFileLocked
	case agentfs.CodeInvalidArgument:
		return CodeInvalid
	}
	return strings.ToLower(string(c))
}

func status(code string) int {
	switch code {
	case CodeOutsideSandbox, CodeInvalid:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodePermissionDenied:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeFileTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeQuotaExceeded, "no_space":
		return http.StatusInsufficientStorage
	case CodeFileLocked, "already_exists", "conflict", "directory_not_empty":
		return http.StatusConflict
	case "internal":
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// wireError is the RFC's envelope.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Path    string `json:"path,omitempty"`
	Rule    string `json:"rule,omitempty"`
}

func writeError(w http.ResponseWriter, e wireError) {
	if o, ok := w.(*outcomeWriter); ok {
		o.code = e.Code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status(e.Code))
	json.NewEncoder(w).Encode(map[string]wireError{"error": e})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, err error) {
	e := agentfs.AsError(err)
	writeError(w, wireError{Code: wireCode(e.Code), Message: e.Message, Path: e.Path, Rule: e.Rule})
}

// Handler is the API's routes under /v1/fs/.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/fs/capabilities", a.authed("capabilities", a.capabilities))
	mux.HandleFunc("POST /v1/fs/read", a.authed("read", a.read))
	mux.HandleFunc("POST /v1/fs/write", a.authed("write", a.write))
	mux.HandleFunc("POST /v1/fs/delete", a.authed("delete", a.delete))
	mux.HandleFunc("POST /v1/fs/stat", a.authed("stat", a.stat))
	mux.HandleFunc("POST /v1/fs/list", a.authed("list", a.list))
	mux.HandleFunc("GET /v1/fs/raw", a.authed("raw_read", a.readRaw))
	mux.HandleFunc("PUT /v1/fs/raw", a.authed("raw_write", a.writeRaw))
	mux.HandleFunc("/v1/fs/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, wireError{Code: CodeInvalid, Message: fmt.Sprintf("no route %s %s: see GET /v1/fs/capabilities", r.Method, r.URL.Path)})
	})
	return mux
}

// outcomeWriter keeps the error code a request was answered with, for
// the metrics.
type outcomeWriter struct {
	http.ResponseWriter
	code string
}

// Unwrap is the writer underneath, for http.ResponseController.
func (o *outcomeWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }

type handler func(w http.ResponseWriter, r *http.Request, f *agentfs.FS)

// authed checks the bearer token and gives the handler the view it acts
// in.
func (a *API) authed(route string, h handler) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		w := &outcomeWriter{ResponseWriter: rw}
		start := time.Now()
		defer func() {
			outcome := "ok"
			if w.code != "" {
				outcome = w.code
			}
			a.opts.Metrics.Observe(Door, route, outcome, time.Since(start))
		}()
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, wireError{Code: CodeUnauthorized, Message: "send Authorization: Bearer <token> (shedfs token create --door api)"})
			return
		}
		who, err := a.opts.Authenticate(strings.TrimSpace(tok))
		if err != nil {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, wireError{Code: CodeUnauthorized, Message: err.Error()})
			return
		}
		f, err := a.fsFor(who)
		if err != nil {
			fail(w, err)
			return
		}
		// The view lives for this request: whatever a failed step left
		// open is released with it.
		defer f.View().Close()
		h(w, r, f)
	}
}

func (a *API) fsFor(who Principal) (*agentfs.FS, error) {
	core := a.opts.Core
	var sess *metadata.Session
	if who.Session != "" {
		var err error
		if sess, err = core.Store().GetSession(who.User, who.Session); err != nil {
			return nil, &agentfs.Error{Code: agentfs.CodeNotFound, Message: fmt.Sprintf("session %s of %s is closed", who.Session, who.User)}
		}
	}
	v, err := core.NewView(Door, who.User, sess, vfs.ViewOptions{})
	if err != nil {
		return nil, &agentfs.Error{Code: agentfs.CodeNotFound, Message: fmt.Sprintf("the view of %s: %v", who.User, err)}
	}
	v.SetToken(who.TokenID, who.TokenReason)
	var uid, gid uint32
	if u, err := core.Store().GetUser(who.User); err == nil {
		uid, gid = u.Uid, u.Gid
	}
	return agentfs.New(v, vfs.Caller{Uid: uid, Gid: gid}, who.Grant), nil
}

// decode reads a JSON request body, bounded.
func (a *API) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	limit := int64(a.opts.MaxWrite)*4/3 + 64<<10 // base64 and the envelope
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, wireError{Code: CodeFileTooLarge, Message: fmt.Sprintf("the request is larger than the %d bytes one write takes: write the first part, then append the rest", a.opts.MaxWrite)})
			return false
		}
		writeError(w, wireError{Code: CodeInvalid, Message: "the request body: " + err.Error()})
		return false
	}
	return true
}

// Capabilities is the RFC's capabilities.fs block.
type Capabilities struct {
	Supported   bool   `json:"supported"`
	SandboxRoot string `json:"sandboxRoot"`
	// MaxFileSizeBytes is the store's max file size, or (without one)
	// the most one write request takes.
	MaxFileSizeBytes int64    `json:"maxFileSizeBytes"`
	MaxReadBytes     int      `json:"maxReadBytes"`
	MaxWriteBytes    int      `json:"maxWriteBytes"`
	Operations       []string `json:"operations"`
}

func (a *API) capabilities(w http.ResponseWriter, r *http.Request, f *agentfs.FS) {
	max := int64(a.opts.Core.MaxFileSize())
	if max == 0 {
		max = int64(a.opts.MaxWrite)
	}
	writeJSON(w, map[string]any{"fs": Capabilities{
		Supported: true, SandboxRoot: "/", MaxFileSizeBytes: max,
		MaxReadBytes: a.opts.MaxRead, MaxWriteBytes: a.opts.MaxWrite,
		Operations: []string{"read", "write", "delete", "stat", "list"},
	}})
}

type readReq struct {
	Path     string `json:"path"`
	Offset   int64  `json:"offset,omitempty"`
	Length   int    `json:"length,omitempty"`
	Encoding string `json:"encoding,omitempty"` // "utf8" or "base64"
}

type readResp struct {
	Path       string `json:"path"`
	Size       uint64 `json:"size"`
	Offset     int64  `json:"offset"`
	Bytes      int    `json:"bytes"`
	EOF        bool   `json:"eof"`
	NextOffset int64  `json:"nextOffset,omitempty"`
	Encoding   string `json:"encoding"`
	Data       string `json:"data"`
}

func (a *API) read(w http.ResponseWriter, r *http.Request, f *agentfs.FS) {
	var req readReq
	if !a.decode(w, r, &req) {
		return
	}
	n := req.Length
	if n <= 0 || n > a.opts.MaxRead {
		n = a.opts.MaxRead
	}
	c, err := f.Read(r.Context(), req.Path, req.Offset, n, req.Encoding == "base64")
	if err != nil {
		fail(w, err)
		return
	}
	resp := readResp{Path: c.Path, Size: c.Size, Offset: c.Offset, Bytes: c.Bytes, EOF: c.EOF, NextOffset: c.NextOffset}
	if c.Encoding == "text" {
		resp.Encoding, resp.Data = "utf8", c.Text
	} else {
		resp.Encoding, resp.Data = "base64", c.Base64
	}
	writeJSON(w, resp)
}

type writeReq struct {
	Path     string `json:"path"`
	Data     string `json:"data"`
	Encoding string `json:"encoding,omitempty"` // "utf8" (default) or "base64"
	Mode     string `json:"mode,omitempty"`     // "overwrite" (default), "create", "append"
	Expect   string `json:"expectSha256,omitempty"`
}

func mode(s string) (agentfs.WriteMode, bool) {
	switch s {
	case "", "overwrite":
		return agentfs.Overwrite, true
	case "create":
		return agentfs.CreateOnly, true
	case "append":
		return agentfs.Append, true
	}
	return 0, false
}

func (a *API) write(w http.ResponseWriter, r *http.Request, f *agentfs.FS) {
	var req writeReq
	if !a.decode(w, r, &req) {
		return
	}
	data := []byte(req.Data)
	switch req.Encoding {
	case "", "utf8":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(req.Data); err != nil {
			writeError(w, wireError{Code: CodeInvalid, Path: req.Path, Message: "data: " + err.Error()})
			return
		}
	default:
		writeError(w, wireError{Code: CodeInvalid, Path: req.Path, Message: "encoding: utf8 or base64"})
		return
	}
	a.writeData(w, r, f, req.Path, data, req.Mode, req.Expect)
}

func (a *API) writeData(w http.ResponseWriter, r *http.Request, f *agentfs.FS, p string, data []byte, how, expect string) {
	if len(data) > a.opts.MaxWrite {
		writeError(w, wireError{Code: CodeFileTooLarge, Path: p, Message: fmt.Sprintf("%d bytes, more than the %d one write takes: write the first part, then append the rest", len(data), a.opts.MaxWrite)})
		return
	}
	m, ok := mode(how)
	if !ok {
		writeError(w, wireError{Code: CodeInvalid, Path: p, Message: "mode: overwrite, create or append"})
		return
	}
	in, err := f.Write(r.Context(), p, data, m, expect)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, in)
}

type pathReq struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
	Depth     int    `json:"depth,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

func (a *API) delete(w http.ResponseWriter, r *http.Request, f *agentfs.FS) {
	var req pathReq
	if !a.decode(w, r, &req) {
		return
	}
	if err := f.Delete(req.Path, req.Recursive); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, map[string]any{"deleted": req.Path, "trash": true})
}

func (a *API) stat(w http.ResponseWriter, r *http.Request, f *agentfs.FS) {
	var req pathReq
	if !a.decode(w, r, &req) {
		return
	}
	in, err := f.Stat(req.Path)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, in)
}

func (a *API) list(w http.ResponseWriter, r *http.Request, f *agentfs.FS) {
	var req pathReq
	if !a.decode(w, r, &req) {
		return
	}
	limit := req.Limit
	if limit <= 0 || limit > a.opts.MaxList {
		limit = a.opts.MaxList
	}
	l, err := f.List(req.Path, req.Depth, limit)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, l)
}

// readRaw answers bytes as they are: GET /v1/fs/raw?path=P&offset=O&length=N.
func (a *API) readRaw(w http.ResponseWriter, r *http.Request, f *agentfs.FS) {
	q := r.URL.Query()
	off, _ := strconv.ParseInt(q.Get("offset"), 10, 64)
	n, _ := strconv.Atoi(q.Get("length"))
	if n <= 0 || n > a.opts.MaxRead {
		n = a.opts.MaxRead
	}
	c, err := f.Read(r.Context(), q.Get("path"), off, n, true)
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", http.DetectContentType(c.Data))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Shedfs-Size", strconv.FormatUint(c.Size, 10))
	if !c.EOF {
		w.Header().Set("Shedfs-Next-Offset", strconv.FormatInt(c.NextOffset, 10))
	}
	w.Write(c.Data)
}

// writeRaw takes bytes as they are: PUT /v1/fs/raw?path=P&mode=M.
func (a *API) writeRaw(w http.ResponseWriter, r *http.Request, f *agentfs.FS) {
	q := r.URL.Query()
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(a.opts.MaxWrite)))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, wireError{Code: CodeFileTooLarge, Path: q.Get("path"), Message: fmt.Sprintf("more than the %d bytes one write takes: write the first part, then append the rest", a.opts.MaxWrite)})
			return
		}
		writeError(w, wireError{Code: CodeInvalid, Message: "the request body: " + err.Error()})
		return
	}
	a.writeData(w, r, f, q.Get("path"), data, q.Get("mode"), q.Get("expectSha256"))
}
