package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// This file is the part of the admin API that acts on entries of the
// store rather than on principals: POST /v1/users/{name}/uploads (import)
// and GET/PUT /v1/mode (ownership override), with their client side.
//
// An import's content is the request body itself, streamed, not JSON: it
// is bounded by the user's quota, not by maxBody, and the server lifts the
// read timeout for it, since a large file takes as long as it takes.

// fileRoutes adds the import and mode endpoints to the admin API. The
// import is served on mux directly, since it needs the response writer to
// lift the server's read timeout.
func fileRoutes(mux *http.ServeMux, h func(pattern string, fn endpoint), admin Admin, log *slog.Logger) {
	mux.HandleFunc("POST /v1/users/{name}/uploads", func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetReadDeadline(time.Time{}); err != nil {
			log.Warn("admin API: import keeps the read timeout", "err", err)
		}
		v, err := importRequest(r, admin)
		if err != nil {
			e := asError(err, "import")
			if e.Code == CodeInternal {
				log.Error("admin API", "method", r.Method, "path", r.URL.Path, "err", e.Message)
			}
			writeError(w, e)
			return
		}
		writeJSON(w, http.StatusCreated, v)
	})
	h("GET /v1/mode", route2(queryArg("user"), queryArg("path"), admin.GetMode))
	h("PUT /v1/mode", route3(queryArg("user"), queryArg("path"), jsonBody[ModeSetRequest], admin.SetMode))
}

// importRequest decodes an import from its URL and hands the body over.
func importRequest(r *http.Request, admin Admin) (*ImportResult, error) {
	q := r.URL.Query()
	req := ImportRequest{User: r.PathValue("name"), Name: q.Get("name"), Session: q.Get("session")}
	if v := q.Get("replace"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, errorf(CodeInvalid, "replace=%q: not a boolean", v)
		}
		req.Replace = b
	}
	return admin.Import(r.Context(), req, r.Body, r.ContentLength)
}

// Import streams body to the daemon, which stores it in the user's
// uploads/. size is the body's length, -1 when unknown. No overall
// timeout applies; ctx ends the transfer.
func (c *Client) Import(ctx context.Context, req ImportRequest, body io.Reader, size int64) (*ImportResult, error) {
	if err := CheckImport(req); err != nil {
		return nil, err
	}
	q := url.Values{"name": {req.Name}}
	if req.Session != "" {
		q.Set("session", req.Session)
	}
	if req.Replace {
		q.Set("replace", "true")
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://shedfs/v1/users/"+seg(req.User)+"/uploads?"+q.Encode(), io.NopCloser(body))
	if err != nil {
		return nil, errorf(CodeInternal, "admin request: %v", err)
	}
	hr.Header.Set("Content-Type", "application/octet-stream")
	hr.ContentLength = size
	if size == 0 {
		hr.Body = http.NoBody
	}
	long := &http.Client{Transport: c.http.Transport}
	resp, err := long.Do(hr)
	if err != nil {
		return nil, errorf(CodeInternal, "admin socket %s: %v", c.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, errorf(CodeInternal, "admin socket %s: read answer: %v", c.path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, answerError(resp.Status, data)
	}
	var out ImportResult
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, errorf(CodeInternal, "admin API: bad answer: %v", err)
	}
	return &out, nil
}

// answerError rebuilds the *Error of a failed answer.
func answerError(status string, data []byte) *Error {
	var e Error
	if json.Unmarshal(data, &e) != nil || e.Message == "" {
		return errorf(CodeInternal, "admin API answered %s", status)
	}
	if e.Code == "" {
		e.Code = CodeInternal
	}
	return &e
}

// modePath is the query naming a path in a user's view.
func modePath(user, path string) string {
	return "/v1/mode?" + url.Values{"user": {user}, "path": {path}}.Encode()
}

// GetMode asks the daemon for the ownership of a path in a user's view.
func (c *Client) GetMode(ctx context.Context, user, path string) (*ModeInfo, error) {
	if err := ValidPrincipalName("user", user); err != nil {
		return nil, err
	}
	return call[*ModeInfo](c, ctx, http.MethodGet, modePath(user, path), nil)
}

// SetMode asks the daemon to override the ownership of a path in a user's
// view; the daemon tells the views.
func (c *Client) SetMode(ctx context.Context, user, path string, req ModeSetRequest) (*ModeInfo, error) {
	if err := ValidPrincipalName("user", user); err != nil {
		return nil, err
	}
	if req.Mode == nil && req.Owner == nil {
		return nil, errorf(CodeInvalid, "mode set: give a mode, an owner or both")
	}
	return call[*ModeInfo](c, ctx, http.MethodPut, modePath(user, path), req)
}
