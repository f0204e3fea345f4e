package daemon

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SessionAdmin is the session operations of the admin API
// (docs/design.md, "Sessions"). Local and Client implement it beside
// Admin; the CLI asks for it with a type assertion.
type SessionAdmin interface {
	OpenSession(ctx context.Context, req SessionOpenRequest) (*SessionInfo, error)
	// ListSessions lists the open sessions of user, of every user for "".
	ListSessions(ctx context.Context, user string) ([]SessionInfo, error)
	CloseSession(ctx context.Context, req SessionCloseRequest) (*SessionInfo, error)
}

// SessionOpenRequest opens a session of User: ID (random when empty)
// follows the principal-name rules; TTL, a Go duration ("90s", "2h"),
// makes the daemon close it when it passes; Quota limits the scratch tree
// on top of the user's own quota (zero: no limit of its own).
//
// From (a snapshot of User) or Fork (another open session of User) makes
// the scratch start as a copy-on-write copy of that tree (a fork).
type SessionOpenRequest struct {
	User  string `json:"user"`
	ID    string `json:"id,omitempty"`
	TTL   string `json:"ttl,omitempty"`
	Quota Amount `json:"quota"`
	From  string `json:"from,omitempty"`
	Fork  string `json:"fork,omitempty"`
	// Base, an absolute path of the host, makes the scratch start as a
	// copy of that directory (cloned where the host filesystem can).
	Base string `json:"base,omitempty"`
	// CheckpointEvery (a Go duration, at least 10s) makes the daemon
	// snapshot the scratch that often while files change, keeping the
	// last CheckpointKeep (5 when 0).
	CheckpointEvery string `json:"checkpoint_every,omitempty"`
	CheckpointKeep  int    `json:"checkpoint_keep,omitempty"`
}

// SessionForked is what the fork of a session's open made: its entries,
// the content they show (charged as a copy, no byte copied), the live
// files that were open in a view (it has their last flushed content),
// and how long it took.
type SessionForked struct {
	Entries int           `json:"entries"`
	Bytes   int64         `json:"bytes"`
	Open    []string      `json:"open,omitempty"`
	Took    time.Duration `json:"took_ns"`
}

// SessionCloseRequest closes a session: Keep leaves the scratch tree in
// the user's home/sessions/ID instead of the trash; Force closes while
// files are open (the view is detached lazily).
type SessionCloseRequest struct {
	User  string `json:"user"`
	ID    string `json:"id"`
	Keep  bool   `json:"keep,omitempty"`
	Force bool   `json:"force,omitempty"`
}

// SessionInfo is one session as the admin sees it: Mountpoint is its view
// under the mount root ("" when none is mounted), Quota its own limit,
// Usage what its scratch tree uses; Expires is absent without a TTL.
type SessionInfo struct {
	ID         string     `json:"id"`
	User       string     `json:"user"`
	Mountpoint string     `json:"mountpoint,omitempty"`
	Created    time.Time  `json:"created"`
	Expires    *time.Time `json:"expires,omitempty"`
	Quota      Amount     `json:"quota"`
	Usage      Amount     `json:"usage"`
	// Kept is, in the answer of a close, where the scratch tree went:
	// "home/sessions/ID" with keep, "trash" otherwise.
	Kept string `json:"kept,omitempty"`
	// From and Fork say what the scratch started as (a snapshot, a
	// session); Forked, in the answer of an open, what the fork made.
	From   string         `json:"from,omitempty"`
	Fork   string         `json:"fork,omitempty"`
	Base   string         `json:"base,omitempty"`
	Forked *SessionForked `json:"forked,omitempty"`
}

// sessionRoutes serves the session operations of admin, when it has them.
func sessionRoutes(h func(string, endpoint), admin Admin) {
	sa, ok := admin.(SessionAdmin)
	if !ok {
		return
	}
	h("POST /v1/sessions", created(route(jsonBody[SessionOpenRequest], sa.OpenSession)))
	h("GET /v1/sessions", route(queryArg("user"), sa.ListSessions))
	h("DELETE /v1/sessions/{user}/{id}", route(sessionCloseArgs, sa.CloseSession))
}

// sessionCloseArgs reads the path and query of DELETE
// /v1/sessions/{user}/{id}.
func sessionCloseArgs(r *http.Request) (SessionCloseRequest, error) {
	q := r.URL.Query()
	req := SessionCloseRequest{User: r.PathValue("user"), ID: r.PathValue("id")}
	for k, p := range map[string]*bool{"keep": &req.Keep, "force": &req.Force} {
		if s := q.Get(k); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return req, errorf(CodeInvalid, "%s=%q: not a boolean", k, s)
			}
			*p = b
		}
	}
	return req, nil
}

var _ SessionAdmin = (*Client)(nil)

// OpenSession asks the daemon to open a session and mount its view.
func (c *Client) OpenSession(ctx context.Context, req SessionOpenRequest) (*SessionInfo, error) {
	return call[*SessionInfo](c, ctx, http.MethodPost, "/v1/sessions", req)
}

// ListSessions asks the daemon for the open sessions.
func (c *Client) ListSessions(ctx context.Context, user string) ([]SessionInfo, error) {
	p := "/v1/sessions"
	if user != "" {
		p += "?" + url.Values{"user": {user}}.Encode()
	}
	return call[[]SessionInfo](c, ctx, http.MethodGet, p, nil)
}

// CloseSession asks the daemon to close a session.
func (c *Client) CloseSession(ctx context.Context, req SessionCloseRequest) (*SessionInfo, error) {
	q := url.Values{}
	if req.Keep {
		q.Set("keep", "true")
	}
	if req.Force {
		q.Set("force", "true")
	}
	p := "/v1/sessions/" + url.PathEscape(req.User) + "/" + url.PathEscape(req.ID)
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return call[*SessionInfo](c, ctx, http.MethodDelete, p, nil)
}
