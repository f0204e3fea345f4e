package daemon

import (
	"context"
	"fmt"
	"net/http"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/vfs"
)

// UserSetRequest changes an existing user; a field left nil keeps its
// value. Uid and Gid go together: the owner every entry of the user's
// view presents (0 and 0 drop the user's own, back to the daemon's
// default). Bytes and Inodes are its quota (0: none).
type UserSetRequest struct {
	Uid    *uint32 `json:"uid,omitempty"`
	Gid    *uint32 `json:"gid,omitempty"`
	Bytes  *int64  `json:"bytes,omitempty"`
	Inodes *int64  `json:"inodes,omitempty"`
}

// UserAdmin changes existing users (shedfs user set).
type UserAdmin interface {
	SetUser(ctx context.Context, name string, req UserSetRequest) (*UserInfo, error)
}

var (
	_ UserAdmin = (*Local)(nil)
	_ UserAdmin = (*Client)(nil)
)

// SetUser changes a user's presented owner and quota. In a daemon the
// user's mounted views present the new owner at once: their kernels'
// cached attributes are invalidated through the core, with no remount,
// so open files and working directories in them stay as they are.
func (l *Local) SetUser(ctx context.Context, name string, req UserSetRequest) (*UserInfo, error) {
	if err := ValidPrincipalName("user", name); err != nil {
		return nil, err
	}
	if (req.Uid == nil) != (req.Gid == nil) {
		return nil, errorf(CodeInvalid, "uid and gid go together: give both or neither")
	}
	if req.Uid == nil && req.Bytes == nil && req.Inodes == nil {
		return nil, errorf(CodeInvalid, "user set %s: give uid and gid, a quota, or both", name)
	}
	if (req.Bytes != nil && *req.Bytes < 0) || (req.Inodes != nil && *req.Inodes < 0) {
		return nil, errorf(CodeInvalid, "quota of user %s: negative limit", name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u, err := l.st.Meta.GetUser(name)
	if err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", name))
	}
	if req.Uid != nil && (u.Uid != *req.Uid || u.Gid != *req.Gid) {
		var def vfs.ViewOptions
		if l.mount != nil {
			def = l.mount.defaultView()
		}
		var opts vfs.ViewOptions
		u, opts, err = l.core.Admin(name).SetOwner(*req.Uid, *req.Gid, def)
		if err != nil {
			return nil, asError(err, fmt.Sprintf("set owner of user %s", name))
		}
		l.log.Info("user owner set", "user", name, "uid", u.Uid, "gid", u.Gid)
		if l.mount != nil {
			l.mount.presenting(name, opts)
		}
	}
	if req.Bytes != nil || req.Inodes != nil {
		h := shedfs.UserHolder(name)
		lim, err := l.core.SetLimit(h, req.Bytes, req.Inodes)
		if err != nil {
			return nil, asError(err, fmt.Sprintf("set quota of user %s", name))
		}
		l.log.Info("quota set", "holder", string(h), "bytes", lim.Bytes, "inodes", lim.Inodes)
	}
	return l.userInfo(u)
}

// defaultView is how the views of a user without an owner of its own
// present entries.
func (d *Daemon) defaultView() vfs.ViewOptions { return d.cfg.DefaultView }

// presenting notes that the managed view of user presents entries as
// opts says from now on (the core told its kernel: Admin.SetOwner).
func (d *Daemon) presenting(user string, opts vfs.ViewOptions) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v := d.views[user]; v != nil && v.managed {
		// What a reconciliation with the store compares (remote.go):
		// the view presents this owner now, nothing to remount.
		v.opts = opts
	}
}

// SetUser asks the daemon to change a user.
func (c *Client) SetUser(ctx context.Context, name string, req UserSetRequest) (*UserInfo, error) {
	if err := ValidPrincipalName("user", name); err != nil {
		return nil, err
	}
	return call[*UserInfo](c, ctx, http.MethodPatch, "/v1/users/"+seg(name), req)
}
