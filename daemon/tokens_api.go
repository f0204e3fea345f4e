package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/tokens"
)

// This file is the token part of the admin API: POST /v1/tokens (make a
// bearer token for an agent door), GET /v1/tokens[?user=U], DELETE
// /v1/tokens/{id} (revoke). A token is a grant (acl.Grant): it acts as a
// user, or one session of a user, within a root of that view, with the
// kinds of access and the glob patterns it names, at the doors it names,
// until it expires. Tokens work without a daemon too: they live in the
// store.

// TokenAdmin is the token operations, implemented by Local and Client
// like Admin.
type TokenAdmin interface {
	// CreateToken makes a token; the answer is the only place its secret
	// is ever shown.
	CreateToken(ctx context.Context, req TokenCreateRequest) (*TokenMade, error)
	// ListTokens returns the tokens, of one user when user is set.
	ListTokens(ctx context.Context, user string) ([]TokenInfo, error)
	RevokeToken(ctx context.Context, id string) error
}

var (
	_ TokenAdmin = (*Local)(nil)
	_ TokenAdmin = (*Client)(nil)
)

// Token lifetimes: the default, and the longest a token may be given.
const (
	DefaultTokenTTL = 24 * time.Hour
	MaxTokenTTL     = 365 * 24 * time.Hour
	maxTokenReason  = 200
)

// TokenCreateRequest describes a token. Only User is required: the rest
// narrows the grant, which by default is the whole view with every kind
// of access at every door for DefaultTokenTTL.
type TokenCreateRequest struct {
	User    string `json:"user"`
	Session string `json:"session,omitempty"`
	// Root is a directory of the view, relative to its root.
	Root string `json:"root,omitempty"`
	// Access is comma-separated kinds (acl.ParseAccess); empty is all.
	Access string   `json:"access,omitempty"`
	Allow  []string `json:"allow,omitempty"`
	Deny   []string `json:"deny,omitempty"`
	// Doors are the doors the token may be used at (tokens.Doors); empty
	// is every one.
	Doors []string `json:"doors,omitempty"`
	// TTL is a Go duration ("2h", "720h"); empty is DefaultTokenTTL.
	TTL    string `json:"ttl,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// TokenInfo is a token as the admin API shows it: never its secret.
type TokenInfo struct {
	ID       string    `json:"id"`
	User     string    `json:"user"`
	Session  string    `json:"session,omitempty"`
	Root     string    `json:"root"`
	Access   string    `json:"access"`
	Allow    []string  `json:"allow,omitempty"`
	Deny     []string  `json:"deny,omitempty"`
	Doors    []string  `json:"doors,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	LastUsed time.Time `json:"last_used,omitzero"`
	Expired  bool      `json:"expired,omitempty"`
}

// TokenMade is a new token: Token is the bearer secret, shown once.
type TokenMade struct {
	TokenInfo
	Token string `json:"token"`
}

func tokenInfo(t metadata.Token, now time.Time) TokenInfo {
	return TokenInfo{
		ID: t.ID, User: t.User, Session: t.Session, Root: "/" + t.Root, Access: t.Access,
		Allow: t.Allow, Deny: t.Deny, Doors: t.Doors, Reason: t.Reason,
		Created: t.Created, Expires: t.Expires, LastUsed: t.LastUsed, Expired: !now.Before(t.Expires),
	}
}

// CreateToken checks the request, stores the token's hash and grant, and
// answers the token.
func (l *Local) CreateToken(ctx context.Context, req TokenCreateRequest) (*TokenMade, error) {
	rec, err := l.tokenRecord(req)
	if err != nil {
		return nil, err
	}
	made, err := tokens.New()
	if err != nil {
		return nil, asError(err, "make a token")
	}
	rec.ID, rec.Hash = made.ID, made.Hash
	if err := l.st.Meta.PutToken(*rec); err != nil {
		return nil, asError(err, "store the token")
	}
	l.log.Info("token made", "id", rec.ID, "user", rec.User, "session", rec.Session, "root", rec.Root,
		"access", rec.Access, "expires", rec.Expires, "reason", rec.Reason)
	return &TokenMade{TokenInfo: tokenInfo(*rec, l.now()), Token: made.Token}, nil
}

// tokenRecord checks a request and makes the record it asks for, without
// its id and hash.
func (l *Local) tokenRecord(req TokenCreateRequest) (*metadata.Token, error) {
	if err := ValidPrincipalName("user", req.User); err != nil {
		return nil, err
	}
	u, err := l.st.Meta.GetUser(req.User)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", req.User))
	}
	if req.Session != "" {
		if _, err := l.st.Meta.GetSession(req.User, req.Session); err != nil {
			return nil, asError(err, fmt.Sprintf("no open session %s of %s", req.Session, req.User))
		}
	}
	root, err := shedfs.CleanViewPath(req.Root)
	if err != nil {
		return nil, errorf(CodeInvalid, "--root %q: %v", req.Root, err)
	}
	access := acl.AccessAll
	if req.Access != "" {
		if access, err = acl.ParseAccess(req.Access); err != nil {
			return nil, errorf(CodeInvalid, "%v", err)
		}
	}
	for _, p := range slices.Concat(req.Allow, req.Deny) {
		if err := acl.ValidGrantPattern(p); err != nil {
			return nil, errorf(CodeInvalid, "%v", err)
		}
	}
	for _, d := range req.Doors {
		if !slices.Contains(tokens.Doors, d) {
			return nil, errorf(CodeInvalid, "door %q: not one of %s", d, strings.Join(tokens.Doors, ", "))
		}
	}
	ttl := DefaultTokenTTL
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 || ttl > MaxTokenTTL {
			return nil, errorf(CodeInvalid, "token lifetime %q: give a positive duration up to %v", req.TTL, MaxTokenTTL)
		}
	}
	if len(req.Reason) > maxTokenReason || shedfs.Display(req.Reason) != req.Reason && req.Reason != "" {
		return nil, errorf(CodeInvalid, "reason: at most %d printable characters", maxTokenReason)
	}
	now := l.now()
	return &metadata.Token{
		User: req.User, Session: req.Session, UserRoot: u.Roots.Private, Root: root,
		Access: access.String(), Allow: req.Allow, Deny: req.Deny, Doors: req.Doors,
		Reason: req.Reason, Created: now, Expires: now.Add(ttl),
	}, nil
}

// ListTokens returns the tokens, expired ones marked.
func (l *Local) ListTokens(ctx context.Context, user string) ([]TokenInfo, error) {
	if user != "" {
		if err := ValidPrincipalName("user", user); err != nil {
			return nil, err
		}
	}
	ts, err := l.st.Meta.ListTokens()
	if err != nil {
		return nil, asError(err, "list tokens")
	}
	now := l.now()
	out := []TokenInfo{}
	for _, t := range ts {
		if user == "" || t.User == user {
			out = append(out, tokenInfo(t, now))
		}
	}
	return out, nil
}

// RevokeToken deletes a token: it is refused from its next request on.
func (l *Local) RevokeToken(ctx context.Context, id string) error {
	if err := tokens.ValidID(id); err != nil {
		return errorf(CodeInvalid, "%v", err)
	}
	if err := l.st.Meta.DeleteToken(id); err != nil {
		return asError(err, fmt.Sprintf("no token %s", id))
	}
	l.log.Info("token revoked", "id", id)
	return nil
}

// Bearer is who a request of an agent door acts as, and within what.
type Bearer struct {
	TokenID string
	User    string
	Session string
	Reason  string
	Expires time.Time
	Grant   acl.Grant
}

// Authenticate checks the bearer token of a request at door: its form,
// its record, its secret, its lifetime, its door, and that its user (and
// session) still exist as they did when it was made. Every failure is
// CodeUnauthorized with a line saying which, never which part of a secret
// was wrong.
//
// A refusal is audited (op authenticate, rule token_invalid, the door and
// the token's id and user where known), so that a leaked or stale token
// in use shows in the trail, not only in the client's 401.
func (l *Local) Authenticate(token, door string) (*Bearer, error) {
	b, user, id, err := l.authenticate(token, door)
	var e *Error
	if errors.As(err, &e) && e.Code == CodeUnauthorized {
		if user == "" {
			user = shedfs.NoUser
		}
		l.core.Record(shedfs.Event{Time: l.now(), User: user, Op: OpAuthenticate, Errno: syscall.EACCES,
			Reason: acl.ReasonTokenInvalid, Door: door, Token: id})
	}
	return b, err
}

// OpAuthenticate is the audit op of a refused bearer token.
const OpAuthenticate = "authenticate"

// authenticate is Authenticate without the audit: it also returns the
// user and the id of the token, as far as it got, for the refusal's record.
func (l *Local) authenticate(token, door string) (b *Bearer, user, id string, err error) {
	id, secret, err := tokens.Split(token)
	if err != nil {
		return nil, "", "", errorf(CodeUnauthorized, "%v", err)
	}
	t, err := l.st.Meta.GetToken(id)
	if errors.Is(err, syscall.ENOENT) {
		return nil, "", id, errorf(CodeUnauthorized, "token %s is unknown or revoked", id)
	} else if err != nil {
		return nil, "", id, asError(err, "read the token")
	}
	if !tokens.Matches(t.Hash, secret) {
		return nil, t.User, id, errorf(CodeUnauthorized, "token %s: wrong secret", id)
	}
	now := l.now()
	if !now.Before(t.Expires) {
		return nil, t.User, id, errorf(CodeUnauthorized, "token %s expired at %s", id, t.Expires.UTC().Format(time.RFC3339))
	}
	if len(t.Doors) > 0 && !slices.Contains(t.Doors, door) {
		return nil, t.User, id, errorf(CodeUnauthorized, "token %s is not for the %s door (it is for %s)", id, door, strings.Join(t.Doors, ", "))
	}
	u, err := l.st.Meta.GetUser(t.User)
	if err != nil || u.Roots.Private != t.UserRoot {
		return nil, t.User, id, errorf(CodeUnauthorized, "token %s: its user %s was removed", id, t.User)
	}
	if t.Session != "" {
		if _, err := l.st.Meta.GetSession(t.User, t.Session); err != nil {
			return nil, t.User, id, errorf(CodeUnauthorized, "token %s: its session %s is closed", id, t.Session)
		}
	}
	access, err := acl.ParseAccess(t.Access)
	if err != nil {
		return nil, t.User, id, asError(fmt.Errorf("token %s: %w: %v", id, metadata.ErrCorrupt, err), "read the token")
	}
	if err := l.st.Meta.TouchToken(id, now); err != nil && !errors.Is(err, syscall.ENOENT) {
		l.log.Warn("token use not recorded", "id", id, "err", err)
	}
	return &Bearer{
		TokenID: id, User: t.User, Session: t.Session, Reason: t.Reason, Expires: t.Expires,
		Grant: acl.Grant{Root: t.Root, Access: access, Allow: t.Allow, Deny: t.Deny, Doors: t.Doors},
	}, t.User, id, nil
}

// tokenRoutes adds the token endpoints to the admin API.
func tokenRoutes(h func(pattern string, fn endpoint), admin Admin) {
	ta, ok := admin.(TokenAdmin)
	if !ok {
		return
	}
	h("POST /v1/tokens", created(route(jsonBody[TokenCreateRequest], ta.CreateToken)))
	h("GET /v1/tokens", route(queryArg("user"), ta.ListTokens))
	h("DELETE /v1/tokens/{id}", route(pathArg("id"), func(ctx context.Context, id string) (map[string]string, error) {
		return map[string]string{"revoked": id}, ta.RevokeToken(ctx, id)
	}))
}

// CreateToken asks the daemon to make a token.
func (c *Client) CreateToken(ctx context.Context, req TokenCreateRequest) (*TokenMade, error) {
	return call[*TokenMade](c, ctx, http.MethodPost, "/v1/tokens", req)
}

// ListTokens asks the daemon for the tokens.
func (c *Client) ListTokens(ctx context.Context, user string) ([]TokenInfo, error) {
	p := "/v1/tokens"
	if user != "" {
		p += "?" + url.Values{"user": {user}}.Encode()
	}
	return call[[]TokenInfo](c, ctx, http.MethodGet, p, nil)
}

// RevokeToken asks the daemon to revoke a token.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tokens/"+seg(id), nil, nil)
}

// Authenticate checks a bearer token of an agent door (Local.Authenticate).
func (d *Daemon) Authenticate(token, door string) (*Bearer, error) {
	return d.local.Authenticate(token, door)
}
