package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
)

// The trash over the admin API (docs/design.md, "Trash and point-in-time restore"): list kept
// files, restore them (creating the parent directories a view would need
// to exist), purge them, and set the retention.

// TrashEntry is one kept file as the API shows it.
type TrashEntry struct {
	// Entry is its name under trash/ in the view it was listed for
	// ("trash/share/reports/q3.csv@2026-11-26T02:40:11.123456789Z"), what
	// trash restore takes.
	Entry string `json:"entry"`
	// Path is where it was, in that view ("share/reports/q3.csv").
	Path   string    `json:"path"`
	Holder string    `json:"holder"`
	Zone   string    `json:"zone"`
	Owner  string    `json:"owner,omitempty"`
	Mode   string    `json:"mode,omitempty"`
	By     string    `json:"by"`
	Why    string    `json:"why"`
	Time   time.Time `json:"time"`
	Size   uint64    `json:"size"`
	Type   string    `json:"type"`
	Ino    uint64    `json:"ino"`
}

// TrashListRequest selects kept files: those a user's view sees, or one
// holder's, below a path, removed since a time.
type TrashListRequest struct {
	User   string    `json:"user,omitempty"`
	Holder string    `json:"holder,omitempty"`
	Path   string    `json:"path,omitempty"`
	Since  time.Time `json:"since,omitempty"`
}

// TrashRestoreRequest puts kept files back: Entries as trash list shows
// them for User, each to its original path or, with To, to To (one entry)
// or into directory To (several).
type TrashRestoreRequest struct {
	User    string   `json:"user"`
	Entries []string `json:"entries"`
	To      string   `json:"to,omitempty"`
}

// TrashRestored is one restored file.
type TrashRestored struct {
	Entry string `json:"entry"`
	Path  string `json:"path"`
	// Replaced is set when a file stood at Path; it went to the trash.
	Replaced bool `json:"replaced,omitempty"`
}

// TrashPurgeRequest deletes kept files for good: one holder's, those
// removed before a time, or (All) every one.
type TrashPurgeRequest struct {
	Holder string    `json:"holder,omitempty"`
	Before time.Time `json:"before,omitempty"`
	All    bool      `json:"all,omitempty"`
}

// TrashPurgeResult says what a purge deleted.
type TrashPurgeResult struct {
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
}

// TrashSettings is the trash's store setting.
type TrashSettings struct {
	// RetentionSeconds is how long a kept file stays; 0: the trash is off.
	RetentionSeconds int64 `json:"retention_seconds"`
}

// visibleHolders are the holders whose trash user's view shows.
func (l *Local) visibleHolders(user string) ([]shedfs.Holder, error) {
	if _, err := l.st.Meta.GetUser(user); err != nil {
		return nil, asError(err, fmt.Sprintf("no user named %s", user))
	}
	groups, err := l.st.Meta.GroupsOf(user)
	if err != nil {
		return nil, asError(err, "groups of "+user)
	}
	hs := []shedfs.Holder{shedfs.HolderOf(zones.PrivateZone(user)), shedfs.HolderOf(zones.ShareZone())}
	for _, g := range groups {
		hs = append(hs, shedfs.HolderOf(zones.GroupZone(g)))
	}
	return hs, nil
}

// ListTrash lists kept files, oldest first.
func (l *Local) ListTrash(ctx context.Context, req TrashListRequest) ([]TrashEntry, error) {
	var holders []shedfs.Holder
	switch {
	case req.User != "" && req.Holder != "":
		return nil, errorf(CodeInvalid, "trash list: give a user or a holder, not both")
	case req.User != "":
		hs, err := l.visibleHolders(req.User)
		if err != nil {
			return nil, err
		}
		holders = hs
	case req.Holder != "":
		h, err := l.parseHolder(req.Holder)
		if err != nil {
			return nil, err
		}
		holders = []shedfs.Holder{h}
	}
	list, err := l.st.Meta.ListTrash(holders)
	if err != nil {
		return nil, asError(err, "list the trash")
	}
	prefix := cleanViewPath(req.Path)
	out := []TrashEntry{}
	for _, e := range list {
		te := trashEntry(req.User, e)
		if te.Path == "" || e.Time.Before(req.Since) {
			continue
		}
		if prefix != "" && te.Path != prefix && !strings.HasPrefix(te.Path, prefix+"/") {
			continue
		}
		out = append(out, te)
	}
	slices.SortStableFunc(out, func(a, b TrashEntry) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// trashEntry describes e as user's view shows it; without a user, as the
// view of the zone's own user (per-user zones) or any member shows it.
func trashEntry(user string, e metadata.TrashEntry) TrashEntry {
	viewer := user
	if viewer == "" {
		viewer = e.Zone.Principal
	}
	p := zones.ViewPath(viewer, e.Zone, e.Path)
	te := TrashEntry{
		Path: p, Holder: string(e.Holder), Zone: e.Zone.Label(), Owner: e.Owner,
		By: e.By, Why: e.Why, Time: e.Time, Size: e.Size, Ino: e.Ino,
		Type: typeName(&shedfs.Inode{Mode: e.Mode}),
	}
	if m := zones.EffectiveMode(e.Zone.Kind, e.OwnMode); m != shedfs.OwnModeNone {
		te.Mode = m.String()
	}
	if p != "" {
		dir, base := path.Split(p)
		te.Entry = path.Join(zones.NameTrash, dir, zones.TrashName(base, e.Time))
	}
	return te
}

// cleanViewPath is p relative to a view root, without "./", a leading or
// trailing slash.
func cleanViewPath(p string) string {
	p = path.Clean("/" + p)
	return strings.TrimPrefix(p, "/")
}

// RestoreTrash puts kept files back, each in one transaction, and stops
// at the first that cannot be.
func (l *Local) RestoreTrash(ctx context.Context, req TrashRestoreRequest) ([]TrashRestored, error) {
	if len(req.Entries) == 0 {
		return nil, errorf(CodeInvalid, "trash restore: name at least one entry")
	}
	list, err := l.ListTrash(ctx, TrashListRequest{User: req.User})
	if err != nil {
		return nil, err
	}
	byEntry := map[string]TrashEntry{}
	for _, e := range list {
		byEntry[e.Entry] = e
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []TrashRestored
	for _, name := range req.Entries {
		key := cleanViewPath(name)
		if !strings.HasPrefix(key, zones.NameTrash+"/") {
			key = path.Join(zones.NameTrash, key)
		}
		e, ok := byEntry[key]
		if !ok {
			return out, errorf(CodeNotFound, "no %s in the trash of %s", name, req.User)
		}
		to := e.Path
		switch {
		case req.To != "" && len(req.Entries) == 1:
			to = cleanViewPath(req.To)
		case req.To != "":
			to = path.Join(cleanViewPath(req.To), path.Base(e.Path))
		}
		r, err := l.restoreOne(req.User, e, to)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// restoreOne puts kept file e back at view path to of user's view,
// creating its parent directories as needed (the core's admin restore).
func (l *Local) restoreOne(user string, e TrashEntry, to string) (TrashRestored, error) {
	replaced, err := l.core.Admin(user).RestoreKept(e.Ino, e.Entry, e.Path, e.Zone, to)
	if err != nil {
		return TrashRestored{}, asError(err, fmt.Sprintf("restore %s to %s", e.Entry, to))
	}
	return TrashRestored{Entry: e.Entry, Path: to, Replaced: replaced}, nil
}

// trashOff reports whether the store's trash is off.
func (l *Local) trashOff() bool {
	st, err := l.st.Meta.GetSettings()
	return err == nil && st.TrashRetention() == 0
}

// PurgeTrash deletes kept files for good.
func (l *Local) PurgeTrash(ctx context.Context, req TrashPurgeRequest) (*TrashPurgeResult, error) {
	if !req.All && req.Holder == "" && req.Before.IsZero() {
		return nil, errorf(CodeInvalid, "trash purge: give --holder, --before or --all")
	}
	list, err := l.ListTrash(ctx, TrashListRequest{Holder: req.Holder})
	if err != nil {
		return nil, err
	}
	res := &TrashPurgeResult{}
	var gone []*shedfs.Inode
	for _, e := range list {
		if !req.Before.IsZero() && !e.Time.Before(req.Before) {
			continue
		}
		n, freed, err := l.st.Meta.PurgeTrash(e.Ino, l.core.Unused)
		if errors.Is(err, syscall.ENOENT) {
			continue
		}
		if err != nil {
			return res, asError(err, "purge "+e.Entry)
		}
		if freed {
			gone = append(gone, n)
		} else {
			// Held open: it goes, with its charge, at its last
			// release, not at the next start.
			l.core.ReclaimIfUnused(n)
		}
		res.Entries++
		res.Bytes += shedfs.Charge(e.Size)
	}
	l.core.Freed(gone, vfs.FreedPurge, false)
	l.core.TrashChanged()
	l.audit("", shedfs.Zone{}, "/"+zones.NameTrash, "admin_trash_purge", res.Bytes)
	return res, nil
}

// SetTrashSettings shows the trash setting, and changes it when
// retention is not nil (0 turns the trash off; what it holds then goes at
// the daemon's next sweep).
func (l *Local) SetTrashSettings(ctx context.Context, retention *time.Duration) (*TrashSettings, error) {
	st, err := l.st.Meta.GetSettings()
	if err != nil {
		return nil, asError(err, "read store settings")
	}
	if retention != nil {
		if *retention < 0 {
			return nil, errorf(CodeInvalid, "trash retention %v: must not be negative", *retention)
		}
		secs := int64(retention.Round(time.Second) / time.Second)
		st.TrashRetentionSeconds = &secs
		if err := l.st.Meta.SetSettings(st); err != nil {
			return nil, asError(err, "write store settings")
		}
		l.core.SettingsChanged()
		l.log.Info("trash retention changed", "retention", *retention)
	}
	return &TrashSettings{RetentionSeconds: int64(st.TrashRetention() / time.Second)}, nil
}

// trashRoutes serves the trash over the admin API.
func trashRoutes(h func(string, endpoint), admin Admin) {
	restoreRoutes(h, admin)
	h("GET /v1/trash", route(trashListQuery, admin.ListTrash))
	h("POST /v1/trash/restore", route(jsonBody[TrashRestoreRequest], admin.RestoreTrash))
	h("POST /v1/trash/purge", route(jsonBody[TrashPurgeRequest], admin.PurgeTrash))
	h("GET /v1/trash/settings", route(constant[*time.Duration](nil), admin.SetTrashSettings))
	h("PUT /v1/trash/settings", route(retentionBody, admin.SetTrashSettings))
}

// trashListQuery reads the query of GET /v1/trash.
func trashListQuery(r *http.Request) (TrashListRequest, error) {
	q := r.URL.Query()
	req := TrashListRequest{User: q.Get("user"), Holder: q.Get("holder"), Path: q.Get("path")}
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return req, errorf(CodeInvalid, "since %q: not an RFC 3339 time", s)
		}
		req.Since = t
	}
	return req, nil
}

// retentionBody reads the retention PUT /v1/trash/settings sets.
func retentionBody(r *http.Request) (*time.Duration, error) {
	req, err := jsonBody[TrashSettings](r)
	if err != nil {
		return nil, err
	}
	d := time.Duration(req.RetentionSeconds) * time.Second
	return &d, nil
}

// ListTrash asks the daemon for kept files.
func (c *Client) ListTrash(ctx context.Context, req TrashListRequest) ([]TrashEntry, error) {
	q := url.Values{}
	for k, v := range map[string]string{"user": req.User, "holder": req.Holder, "path": req.Path} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !req.Since.IsZero() {
		q.Set("since", req.Since.Format(time.RFC3339Nano))
	}
	return call[[]TrashEntry](c, ctx, http.MethodGet, "/v1/trash?"+q.Encode(), nil)
}

// RestoreTrash asks the daemon to restore kept files.
func (c *Client) RestoreTrash(ctx context.Context, req TrashRestoreRequest) ([]TrashRestored, error) {
	return call[[]TrashRestored](c, ctx, http.MethodPost, "/v1/trash/restore", req)
}

// PurgeTrash asks the daemon to purge kept files.
func (c *Client) PurgeTrash(ctx context.Context, req TrashPurgeRequest) (*TrashPurgeResult, error) {
	return call[*TrashPurgeResult](c, ctx, http.MethodPost, "/v1/trash/purge", req)
}

// SetTrashSettings asks the daemon for the trash setting, changing it
// when retention is not nil.
func (c *Client) SetTrashSettings(ctx context.Context, retention *time.Duration) (*TrashSettings, error) {
	if retention == nil {
		return call[*TrashSettings](c, ctx, http.MethodGet, "/v1/trash/settings", nil)
	}
	req := TrashSettings{RetentionSeconds: int64(*retention / time.Second)}
	return call[*TrashSettings](c, ctx, http.MethodPut, "/v1/trash/settings", req)
}
