package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// This file is the edit lock part of the admin API: GET /v1/edit-locks
// [?user=U] (the live ones) and POST /v1/edit-locks/release (the
// administrator's force_unlock of a file of a user's view). Edit locks are
// taken by the agent doors (lock_open); every door honours them.

// EditLockAdmin is the edit lock operations, implemented by Local and
// Client like Admin.
type EditLockAdmin interface {
	ListEditLocks(ctx context.Context, user string) ([]EditLockInfo, error)
	ReleaseEditLock(ctx context.Context, req EditLockReleaseRequest) (*EditLockInfo, error)
}

var (
	_ EditLockAdmin = (*Local)(nil)
	_ EditLockAdmin = (*Client)(nil)
)

// EditLockInfo is one live edit lock.
type EditLockInfo struct {
	Ino     uint64    `json:"ino"`
	User    string    `json:"user"`
	Session string    `json:"session,omitempty"`
	Door    string    `json:"door,omitempty"`
	Path    string    `json:"path"`
	Taken   time.Time `json:"taken"`
	Expires time.Time `json:"expires"`
}

// EditLockReleaseRequest names the file of User's view whose edit lock
// goes, whoever holds it.
type EditLockReleaseRequest struct {
	User string `json:"user"`
	Path string `json:"path"`
}

// ListEditLocks returns the edit locks that have not expired, of one
// holder's user when user is set.
func (l *Local) ListEditLocks(ctx context.Context, user string) ([]EditLockInfo, error) {
	if user != "" {
		if err := ValidPrincipalName("user", user); err != nil {
			return nil, err
		}
	}
	ls, err := l.st.Meta.ListEditLocks()
	if err != nil {
		return nil, asError(err, "list edit locks")
	}
	now := l.now()
	out := []EditLockInfo{}
	for _, e := range ls {
		if now.Before(e.Expires) && (user == "" || e.User == user) {
			out = append(out, EditLockInfo{Ino: e.Ino, User: e.User, Session: e.Session, Door: e.Door, Path: e.Path, Taken: e.Taken, Expires: e.Expires})
		}
	}
	return out, nil
}

// ReleaseEditLock releases the edit lock of a file of a user's view,
// whoever holds it: the administrator's force_unlock.
func (l *Local) ReleaseEditLock(ctx context.Context, req EditLockReleaseRequest) (*EditLockInfo, error) {
	n, rel, err := l.resolve(req.User, req.Path)
	if err != nil {
		return nil, err
	}
	e, err := l.core.ReleaseEditLock(n.Ino, nil)
	if errors.Is(err, syscall.ENOENT) {
		return nil, errorf(CodeNotFound, "%s has no edit lock", rel)
	} else if err != nil {
		return nil, asError(err, fmt.Sprintf("release the edit lock of %s", rel))
	}
	l.log.Info("edit lock released by the administrator", "path", rel, "holder", e.User, "session", e.Session)
	return &EditLockInfo{Ino: e.Ino, User: e.User, Session: e.Session, Door: e.Door, Path: e.Path, Taken: e.Taken, Expires: e.Expires}, nil
}

// editLockRoutes adds the edit lock endpoints to the admin API.
func editLockRoutes(h func(pattern string, fn endpoint), admin Admin) {
	ea, ok := admin.(EditLockAdmin)
	if !ok {
		return
	}
	h("GET /v1/edit-locks", route(queryArg("user"), ea.ListEditLocks))
	h("POST /v1/edit-locks/release", route(jsonBody[EditLockReleaseRequest], ea.ReleaseEditLock))
}

// ListEditLocks asks the daemon for the live edit locks.
func (c *Client) ListEditLocks(ctx context.Context, user string) ([]EditLockInfo, error) {
	p := "/v1/edit-locks"
	if user != "" {
		p += "?" + url.Values{"user": {user}}.Encode()
	}
	return call[[]EditLockInfo](c, ctx, http.MethodGet, p, nil)
}

// ReleaseEditLock asks the daemon to release an edit lock.
func (c *Client) ReleaseEditLock(ctx context.Context, req EditLockReleaseRequest) (*EditLockInfo, error) {
	return call[*EditLockInfo](c, ctx, http.MethodPost, "/v1/edit-locks/release", req)
}
