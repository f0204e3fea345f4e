package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoDaemon means no daemon answers on a store's admin socket: the
// socket file is missing, or it is left over from a daemon that died
// (connection refused). The CLI then opens the store itself.
var ErrNoDaemon = errors.New("no daemon is running on this store")

// Client performs admin operations by asking the daemon that serves a
// store, over its admin socket.
type Client struct {
	path string
	http *http.Client
}

var _ Admin = (*Client)(nil)

// Dial connects to the daemon serving the store in dir. It returns
// ErrNoDaemon when none runs, so the caller can fall back to NewLocal.
func Dial(dir string) (*Client, error) {
	return DialSocket(SocketPath(dir))
}

// dialPatience is how long DialSocket keeps trying a socket that exists
// but does not take the connection (a daemon whose accept queue is full,
// or that the machine's load keeps from running): it is not a dead
// daemon's, so its store is not to be opened instead.
const dialPatience = 10 * time.Second

// refusedTries is how many times a refused connection is tried, a
// little apart, before the socket counts as a dead daemon's.
const refusedTries = 3

// DialSocket is Dial for an admin socket at path (a store on etcd has no
// directory to find it in); "" means no daemon. A socket that refuses
// the connection (left by a daemon that died) is no daemon; one that
// fails otherwise is tried again for a while, then is an error.
func DialSocket(path string) (*Client, error) {
	if path == "" {
		return nil, ErrNoDaemon
	}
	if _, err := os.Lstat(path); err != nil {
		return nil, ErrNoDaemon
	}
	deadline := time.Now().Add(dialPatience)
	refused := 0
	for {
		c, err := net.DialTimeout("unix", path, 2*time.Second)
		if err == nil {
			c.Close()
			return NewClient(path), nil
		}
		if isConnRefused(err) {
			if refused++; refused >= refusedTries {
				return nil, ErrNoDaemon
			}
		} else if time.Now().After(deadline) {
			return nil, fmt.Errorf("admin socket %s: no answer for %v: %w", path, dialPatience, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PeerPID is the pid of the process that serves the admin socket at path
// (SO_PEERCRED of a connection to it), so that a command that cannot
// open a store a daemon holds can name the daemon.
func PeerPID(path string) (int, error) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return 0, fmt.Errorf("admin socket %s: %w", path, err)
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("admin socket %s: %w", path, err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("admin socket %s: %w", path, err)
	}
	if credErr != nil {
		return 0, fmt.Errorf("admin socket %s: peer credentials: %w", path, credErr)
	}
	return int(cred.Pid), nil
}

// NewClient returns a client of the admin socket at path, without
// checking that anyone answers.
func NewClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:    2,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{path: path, http: &http.Client{Transport: tr, Timeout: 5 * time.Minute}}
}

// Close releases idle connections.
func (c *Client) Close() error {
	c.http.CloseIdleConnections()
	return nil
}

// do sends one request and decodes the answer into out, or the API's
// error into an *Error.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return errorf(CodeInternal, "encode request: %v", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://shedfs"+path, body)
	if err != nil {
		return errorf(CodeInternal, "admin request: %v", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return errorf(CodeInternal, "admin socket %s: %v", c.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return errorf(CodeInternal, "admin socket %s: read answer: %v", c.path, err)
	}
	if resp.StatusCode/100 != 2 {
		return answerError(resp.Status, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return errorf(CodeInternal, "admin API: bad answer: %v", err)
	}
	return nil
}

// call is the client side of route: it sends in (nil: no body) and
// decodes the answer as a Resp, or returns the API's error as an *Error.
func call[Resp any](c *Client, ctx context.Context, method, path string, in any) (Resp, error) {
	var out Resp
	if err := c.do(ctx, method, path, in, &out); err != nil {
		var none Resp
		return none, err
	}
	return out, nil
}

func seg(s string) string { return url.PathEscape(s) }

// AddUser asks the daemon to create a user and mount its view.
func (c *Client) AddUser(ctx context.Context, req UserAddRequest) (*UserInfo, error) {
	if err := ValidPrincipalName("user", req.Name); err != nil {
		return nil, err
	}
	return call[*UserInfo](c, ctx, http.MethodPost, "/v1/users", req)
}

// ListUsers asks the daemon for every user.
func (c *Client) ListUsers(ctx context.Context) ([]UserInfo, error) {
	return call[[]UserInfo](c, ctx, http.MethodGet, "/v1/users", nil)
}

// ShowUser asks the daemon for one user.
func (c *Client) ShowUser(ctx context.Context, name string) (*UserInfo, error) {
	if err := ValidPrincipalName("user", name); err != nil {
		return nil, err
	}
	return call[*UserInfo](c, ctx, http.MethodGet, "/v1/users/"+seg(name), nil)
}

// RemoveUser asks the daemon to unmount a user's view and delete it.
func (c *Client) RemoveUser(ctx context.Context, name string, force bool) (*RemoveResult, error) {
	if err := ValidPrincipalName("user", name); err != nil {
		return nil, err
	}
	return call[*RemoveResult](c, ctx, http.MethodDelete, fmt.Sprintf("/v1/users/%s?force=%t", seg(name), force), nil)
}

// AddGroup asks the daemon to create a group.
func (c *Client) AddGroup(ctx context.Context, req GroupAddRequest) (*GroupInfo, error) {
	if err := ValidPrincipalName("group", req.Name); err != nil {
		return nil, err
	}
	return call[*GroupInfo](c, ctx, http.MethodPost, "/v1/groups", req)
}

// ListGroups asks the daemon for every group.
func (c *Client) ListGroups(ctx context.Context) ([]GroupInfo, error) {
	return call[[]GroupInfo](c, ctx, http.MethodGet, "/v1/groups", nil)
}

// ShowGroup asks the daemon for one group.
func (c *Client) ShowGroup(ctx context.Context, name string) (*GroupInfo, error) {
	if err := ValidPrincipalName("group", name); err != nil {
		return nil, err
	}
	return call[*GroupInfo](c, ctx, http.MethodGet, "/v1/groups/"+seg(name), nil)
}

// RemoveGroup asks the daemon to delete a group.
func (c *Client) RemoveGroup(ctx context.Context, name string, force bool) (*RemoveResult, error) {
	if err := ValidPrincipalName("group", name); err != nil {
		return nil, err
	}
	return call[*RemoveResult](c, ctx, http.MethodDelete, fmt.Sprintf("/v1/groups/%s?force=%t", seg(name), force), nil)
}

// AddMember asks the daemon to add a user to a group.
func (c *Client) AddMember(ctx context.Context, group string, req MemberRequest) (*GroupInfo, error) {
	if err := ValidPrincipalName("group", group); err != nil {
		return nil, err
	}
	if err := ValidPrincipalName("user", req.User); err != nil {
		return nil, err
	}
	return call[*GroupInfo](c, ctx, http.MethodPost, "/v1/groups/"+seg(group)+"/members", req)
}

// RemoveMember asks the daemon to take a user out of a group.
func (c *Client) RemoveMember(ctx context.Context, group, user string) (*GroupInfo, error) {
	if err := ValidPrincipalName("group", group); err != nil {
		return nil, err
	}
	if err := ValidPrincipalName("user", user); err != nil {
		return nil, err
	}
	return call[*GroupInfo](c, ctx, http.MethodDelete, "/v1/groups/"+seg(group)+"/members/"+seg(user), nil)
}

// SetQuota asks the daemon to change a holder's limits.
func (c *Client) SetQuota(ctx context.Context, holder string, req QuotaSetRequest) (*QuotaInfo, error) {
	if _, _, err := holderSyntax(holder); err != nil {
		return nil, err
	}
	return call[*QuotaInfo](c, ctx, http.MethodPut, "/v1/quotas/"+seg(holder), req)
}

// ShowQuota asks the daemon for one holder's quota, or every holder's.
func (c *Client) ShowQuota(ctx context.Context, holder string) ([]QuotaInfo, error) {
	path := "/v1/quotas"
	if holder != "" {
		if _, _, err := holderSyntax(holder); err != nil {
			return nil, err
		}
		path += "/" + seg(holder)
	}
	return call[[]QuotaInfo](c, ctx, http.MethodGet, path, nil)
}

// Status asks the daemon how it and the store are.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	return call[*Status](c, ctx, http.MethodGet, "/v1/status", nil)
}
