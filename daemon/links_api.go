package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/links"
	"github.com/shedfs/shedfs/web"
)

// This file is the share-by-link part of the admin API: POST /v1/links
// (make one), GET /v1/links[?user=U] (the live ones), DELETE
// /v1/links/{id} (revoke), POST /v1/links/rotate-key, GET and PUT
// /v1/links/settings (the default lifetime). Links are served by the
// daemon's link server (package web, --http); without a daemon the
// commands list, revoke and rotate on the store itself, and nothing can be
// made.

// LinkAdmin is the share-by-link operations, implemented by Local and
// Client like Admin.
type LinkAdmin interface {
	CreateLink(ctx context.Context, req LinkCreateRequest) (*LinkInfo, error)
	// ListLinks returns the live links, of one user when user is set.
	ListLinks(ctx context.Context, user string) ([]LinkInfo, error)
	RevokeLink(ctx context.Context, id string) error
	// RotateLinkKey replaces the key every link is signed with: every
	// link made so far stops working.
	RotateLinkKey(ctx context.Context) error
	// LinkSettings shows, and with a non-nil TTL first changes, the
	// default lifetime of new links.
	LinkSettings(ctx context.Context, req LinkSettingsRequest) (*LinkSettings, error)
}

// LinkCreateRequest makes a link for User to Path in their view; TTL is a
// lifetime ("2h", "7d"; empty: the store's default).
type LinkCreateRequest struct {
	User string `json:"user"`
	Path string `json:"path"`
	TTL  string `json:"ttl,omitempty"`
}

// LinkInfo is one link as the admin API shows it.
type LinkInfo = web.Info

// LinkSettingsRequest changes the default link lifetime when TTL is set.
type LinkSettingsRequest struct {
	TTL *string `json:"ttl,omitempty"`
}

// LinkSettings are the share-by-link settings of the store.
type LinkSettings struct {
	DefaultTTL string `json:"default_ttl"`
	MaxTTL     string `json:"max_ttl"`
}

var (
	_ LinkAdmin = (*Local)(nil)
	_ LinkAdmin = (*Client)(nil)
)

// linkService is the daemon's link server, or (no daemon, or none
// serving) one on the open store that can list, revoke and rotate but not
// make links.
func (l *Local) linkService() (*web.Service, error) {
	l.linksMu.Lock()
	defer l.linksMu.Unlock()
	if l.links == nil {
		svc, err := web.New(web.Options{Core: l.core, Dir: l.st.Location().StateDir(), Logger: l.log})
		if err != nil {
			return nil, asError(err, "link service")
		}
		l.links = svc
	}
	return l.links, nil
}

// CreateLink makes a link to a path of a user's view, resolved as mode get
// resolves it.
func (l *Local) CreateLink(ctx context.Context, req LinkCreateRequest) (*LinkInfo, error) {
	var ttl time.Duration
	if req.TTL != "" {
		d, err := links.ParseTTL(req.TTL)
		if err != nil {
			return nil, errorf(CodeInvalid, "%v", err)
		}
		ttl = d
	}
	svc, err := l.linkService()
	if err != nil {
		return nil, err
	}
	n, rel, err := l.resolve(req.User, req.Path)
	if err != nil {
		return nil, err
	}
	var dir uint64
	if !n.IsDir() {
		// resolve found the file, so its directory resolves too.
		if p, _, err := l.resolve(req.User, path.Dir(rel)); err == nil {
			dir = p.Ino
		}
	}
	info, err := svc.Create(req.User, n.Ino, dir, ttl)
	switch {
	case errors.Is(err, web.ErrNotServing):
		return nil, errorf(CodeInvalid, "%v", err)
	case errors.Is(err, syscall.ENOSPC):
		return nil, errorf(CodeNoSpace, "link to %s: %v", rel, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTSUP):
		return nil, errorf(CodeForbidden, "%s cannot share %s: %v", req.User, rel, err)
	case err != nil:
		return nil, asError(err, fmt.Sprintf("link to %s", rel))
	}
	return info, nil
}

// ListLinks returns the live links.
func (l *Local) ListLinks(ctx context.Context, user string) ([]LinkInfo, error) {
	if user != "" {
		if err := ValidPrincipalName("user", user); err != nil {
			return nil, err
		}
	}
	svc, err := l.linkService()
	if err != nil {
		return nil, err
	}
	out, err := svc.List(user)
	if err != nil {
		return nil, asError(err, "list links")
	}
	return out, nil
}

// RevokeLink deletes a link.
func (l *Local) RevokeLink(ctx context.Context, id string) error {
	if _, err := links.ParseID(id); err != nil {
		return errorf(CodeInvalid, "%q is not a link id (link list shows them)", id)
	}
	svc, err := l.linkService()
	if err != nil {
		return err
	}
	if err := svc.Revoke(id); err != nil {
		return asError(err, fmt.Sprintf("no link %s", id))
	}
	return nil
}

// RotateLinkKey replaces the link key.
func (l *Local) RotateLinkKey(ctx context.Context) error {
	svc, err := l.linkService()
	if err != nil {
		return err
	}
	if err := svc.RotateKey(); err != nil {
		return asError(err, "rotate the link key")
	}
	return nil
}

// LinkSettings shows or changes the default lifetime.
func (l *Local) LinkSettings(ctx context.Context, req LinkSettingsRequest) (*LinkSettings, error) {
	if req.TTL != nil {
		d, err := links.ParseTTL(*req.TTL)
		if err != nil {
			return nil, errorf(CodeInvalid, "%v", err)
		}
		l.mu.Lock()
		st, err := l.st.Meta.GetSettings()
		if err == nil {
			st.DefaultLinkTTL = d
			err = l.st.Meta.SetSettings(st)
		}
		l.mu.Unlock()
		if err != nil {
			return nil, asError(err, "write store settings")
		}
	}
	svc, err := l.linkService()
	if err != nil {
		return nil, err
	}
	return &LinkSettings{DefaultTTL: svc.DefaultTTL().String(), MaxTTL: links.MaxTTL.String()}, nil
}

// linkRoutes adds the link endpoints to the admin API.
func linkRoutes(h func(pattern string, fn endpoint), admin Admin) {
	la, ok := admin.(LinkAdmin)
	if !ok {
		return
	}
	h("POST /v1/links", created(route(jsonBody[LinkCreateRequest], la.CreateLink)))
	h("GET /v1/links", route(queryArg("user"), la.ListLinks))
	h("DELETE /v1/links/{id}", route(pathArg("id"), func(ctx context.Context, id string) (map[string]string, error) {
		return map[string]string{"revoked": id}, la.RevokeLink(ctx, id)
	}))
	h("POST /v1/links/rotate-key", route0(func(ctx context.Context) (map[string]bool, error) {
		return map[string]bool{"rotated": true}, la.RotateLinkKey(ctx)
	}))
	h("GET /v1/links/settings", route(constant(LinkSettingsRequest{}), la.LinkSettings))
	h("PUT /v1/links/settings", route(jsonBody[LinkSettingsRequest], la.LinkSettings))
}

// CreateLink asks the daemon to make a link.
func (c *Client) CreateLink(ctx context.Context, req LinkCreateRequest) (*LinkInfo, error) {
	return call[*LinkInfo](c, ctx, http.MethodPost, "/v1/links", req)
}

// ListLinks asks the daemon for the live links.
func (c *Client) ListLinks(ctx context.Context, user string) ([]LinkInfo, error) {
	p := "/v1/links"
	if user != "" {
		p += "?" + url.Values{"user": {user}}.Encode()
	}
	return call[[]LinkInfo](c, ctx, http.MethodGet, p, nil)
}

// RevokeLink asks the daemon to revoke a link.
func (c *Client) RevokeLink(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/links/"+seg(id), nil, nil)
}

// RotateLinkKey asks the daemon to replace the link key.
func (c *Client) RotateLinkKey(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/links/rotate-key", nil, nil)
}

// LinkSettings asks the daemon for, or to change, the link settings.
func (c *Client) LinkSettings(ctx context.Context, req LinkSettingsRequest) (*LinkSettings, error) {
	if req.TTL == nil {
		return call[*LinkSettings](c, ctx, http.MethodGet, "/v1/links/settings", nil)
	}
	return call[*LinkSettings](c, ctx, http.MethodPut, "/v1/links/settings", req)
}

// UseLinks makes svc, built on the daemon's core, the daemon's link
// server: the admin API makes links with it.
func (d *Daemon) UseLinks(svc *web.Service) { d.local.UseLinks(svc) }

// UseLinks makes svc, built on l's core, the link server l makes links
// with.
func (l *Local) UseLinks(svc *web.Service) {
	l.linksMu.Lock()
	l.links = svc
	l.linksMu.Unlock()
}
