package daemon

import (
	"context"
	"net/http"

	"github.com/shedfs/shedfs/metadata"
)

// This file is the store settings' part of the admin API: the quota new
// users and groups start with and the largest file anyone may write
// (GET and PUT /v1/settings). Local changes them in the store and, in a
// running daemon, tells the views, which enforce a new max file size at
// once; Client asks the daemon to do so.

// Settings are the store-wide defaults as the admin API shows them. A zero
// figure means unlimited.
type Settings struct {
	DefaultUserLimit  Amount `json:"default_user_limit"`
	DefaultGroupLimit Amount `json:"default_group_limit"`
	MaxFileSize       int64  `json:"max_file_size"`
}

// SettingsSetRequest changes some of the settings: a nil field keeps its
// value, zero means unlimited.
type SettingsSetRequest struct {
	UserBytes   *int64 `json:"user_bytes,omitempty"`
	UserInodes  *int64 `json:"user_inodes,omitempty"`
	GroupBytes  *int64 `json:"group_bytes,omitempty"`
	GroupInodes *int64 `json:"group_inodes,omitempty"`
	MaxFileSize *int64 `json:"max_file_size,omitempty"`
}

// empty reports whether the request changes nothing.
func (r SettingsSetRequest) empty() bool {
	return r.UserBytes == nil && r.UserInodes == nil && r.GroupBytes == nil &&
		r.GroupInodes == nil && r.MaxFileSize == nil
}

func settingsInfo(st metadata.Settings) *Settings {
	return &Settings{
		DefaultUserLimit:  limitAmount(st.DefaultUserLimit),
		DefaultGroupLimit: limitAmount(st.DefaultGroupLimit),
		MaxFileSize:       int64(min(st.MaxFileSize, uint64(1<<63-1))),
	}
}

// GetSettings returns the store's settings.
func (l *Local) GetSettings(ctx context.Context) (*Settings, error) {
	st, err := l.st.Meta.GetSettings()
	if err != nil {
		return nil, asError(err, "read store settings")
	}
	return settingsInfo(st), nil
}

// SetSettings changes the fields of the settings req gives and keeps the
// others. The limits of existing users and groups stay as they are; a new
// max file size holds for every write from now on.
func (l *Local) SetSettings(ctx context.Context, req SettingsSetRequest) (*Settings, error) {
	if req.empty() {
		return nil, errorf(CodeInvalid, "settings: give at least one value to change")
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{
		{"default user bytes", req.UserBytes},
		{"default user inodes", req.UserInodes},
		{"default group bytes", req.GroupBytes},
		{"default group inodes", req.GroupInodes},
		{"max file size", req.MaxFileSize},
	} {
		if f.v != nil && *f.v < 0 {
			return nil, errorf(CodeInvalid, "settings: negative %s", f.name)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st, err := l.st.Meta.GetSettings()
	if err != nil {
		return nil, asError(err, "read store settings")
	}
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&st.DefaultUserLimit.Bytes, req.UserBytes)
	set(&st.DefaultUserLimit.Inodes, req.UserInodes)
	set(&st.DefaultGroupLimit.Bytes, req.GroupBytes)
	set(&st.DefaultGroupLimit.Inodes, req.GroupInodes)
	if req.MaxFileSize != nil {
		st.MaxFileSize = uint64(*req.MaxFileSize)
	}
	if err := l.st.Meta.SetSettings(st); err != nil {
		return nil, asError(err, "write store settings")
	}
	l.core.SettingsChanged()
	l.log.Info("settings changed",
		"user_bytes", st.DefaultUserLimit.Bytes, "user_inodes", st.DefaultUserLimit.Inodes,
		"group_bytes", st.DefaultGroupLimit.Bytes, "group_inodes", st.DefaultGroupLimit.Inodes,
		"max_file_size", st.MaxFileSize)
	return settingsInfo(st), nil
}

// GetSettings asks the daemon for the store's settings.
func (c *Client) GetSettings(ctx context.Context) (*Settings, error) {
	return call[*Settings](c, ctx, http.MethodGet, "/v1/settings", nil)
}

// SetSettings asks the daemon to change the store's settings.
func (c *Client) SetSettings(ctx context.Context, req SettingsSetRequest) (*Settings, error) {
	return call[*Settings](c, ctx, http.MethodPut, "/v1/settings", req)
}

// settingsRoutes adds GET and PUT /v1/settings to the admin API.
func settingsRoutes(h func(string, endpoint), admin Admin) {
	h("GET /v1/settings", route0(admin.GetSettings))
	h("PUT /v1/settings", route(jsonBody[SettingsSetRequest], admin.SetSettings))
}
