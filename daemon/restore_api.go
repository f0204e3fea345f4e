package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

// Restoring a subtree to a point in time (docs/design.md, "Trash and point-in-time restore"):
// renames since then are undone, files made since then go to the trash,
// and files removed or replaced since then come back from it. Every step
// is an ordinary change (the trash keeps what it replaces), so a restore
// can itself be undone by another.

// RestoreAtRequest asks for the subtree Path of User's view as it was at
// At; DryRun lists what would be done, changing nothing.
type RestoreAtRequest struct {
	User   string    `json:"user"`
	Path   string    `json:"path"`
	At     time.Time `json:"at"`
	DryRun bool      `json:"dry_run,omitempty"`
}

// RestoreAction is one step of a restore: "rename-back" (From to Path),
// "trash" (Path was made since), "restore" (Entry back to Path), "rmdir"
// (an empty directory made since).
type RestoreAction struct {
	Action string `json:"action"`
	Path   string `json:"path"`
	From   string `json:"from,omitempty"`
	Entry  string `json:"entry,omitempty"`
}

// RestoreAtResult is what a restore did (or, dry, would do).
type RestoreAtResult struct {
	User    string          `json:"user"`
	Path    string          `json:"path"`
	At      time.Time       `json:"at"`
	DryRun  bool            `json:"dry_run"`
	Actions []RestoreAction `json:"actions"`
}

// restorer is one restore under way.
type restorer struct {
	l    *Local
	req  RestoreAtRequest
	zone shedfs.Zone
	rel  string // the subtree, within zone ("" for its root)
	res  *RestoreAtResult
	// renames are the journaled renames in the zone since the time.
	renames []metadata.RenameRecord
}

// RestoreAt puts the subtree req.Path of req.User's view back as it was
// at req.At.
func (l *Local) RestoreAt(ctx context.Context, req RestoreAtRequest) (*RestoreAtResult, error) {
	if err := ValidPrincipalName("user", req.User); err != nil {
		return nil, err
	}
	if req.At.IsZero() || req.At.After(time.Now()) {
		return nil, errorf(CodeInvalid, "restore: give a time in the past")
	}
	p := cleanViewPath(req.Path)
	zone, rel, ok := zones.ZonePath(req.User, p)
	if !ok {
		return nil, errorf(CodeInvalid, "restore: %q is not a path inside a zone of the view", req.Path)
	}
	if !l.canSee(req.User, zone) {
		return nil, errorf(CodeNotFound, "no %s in the view of %s", p, req.User)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &restorer{l: l, req: req, zone: zone, rel: rel,
		res: &RestoreAtResult{User: req.User, Path: p, At: req.At, DryRun: req.DryRun, Actions: []RestoreAction{}}}
	if err := r.renamesBack(); err != nil {
		return r.res, err
	}
	dirs, err := r.trashNew()
	if err != nil {
		return r.res, err
	}
	if err := r.restoreKept(); err != nil {
		return r.res, err
	}
	r.removeDirs(dirs)
	if !req.DryRun {
		l.core.TrashChanged()
		if err := l.st.Meta.Sync(); err != nil {
			return r.res, asError(err, "sync metadata")
		}
	}
	return r.res, nil
}

// canSee reports whether user's view shows zone z.
func (l *Local) canSee(user string, z shedfs.Zone) bool {
	hs, err := l.visibleHolders(user)
	return err == nil && slices.Contains(hs, shedfs.HolderOf(z))
}

// under reports whether zrel (a path within the zone) lies in the subtree.
func (r *restorer) under(zrel string) bool {
	return r.rel == "" || zrel == r.rel || strings.HasPrefix(zrel, r.rel+"/")
}

func (r *restorer) view(zrel string) string { return zones.ViewPath(r.req.User, r.zone, zrel) }

func (r *restorer) did(a RestoreAction) {
	r.res.Actions = append(r.res.Actions, a)
	if !r.req.DryRun {
		r.l.audit(r.req.User, r.zone, "/"+a.Path, "admin_restore_"+strings.ReplaceAll(a.Action, "-", "_"), 0)
	}
}

func (r *restorer) note(zrel string) *metadata.TrashNote {
	if r.l.trashOff() {
		return nil
	}
	return &metadata.TrashNote{By: r.req.User, Why: metadata.TrashRestore, Path: zrel}
}

// renamesBack undoes the journaled renames into or out of the subtree,
// newest first, of entries that are still where the rename put them.
func (r *restorer) renamesBack() error {
	l := r.l
	renames, err := l.st.Meta.RenamesSince(r.zone, r.req.At)
	if err != nil {
		return asError(err, "read the rename journal")
	}
	r.renames = renames
	for i := len(renames) - 1; i >= 0; i-- {
		rn := renames[i]
		if !r.under(rn.From) && !r.under(rn.To) {
			continue
		}
		cur, _, err := l.resolve(r.req.User, r.view(rn.To))
		if err != nil || cur.Ino != rn.Ino {
			continue // moved again or gone since
		}
		a := RestoreAction{Action: "rename-back", Path: r.view(rn.From), From: r.view(rn.To)}
		if r.req.DryRun {
			r.did(a)
			continue
		}
		src, _, err := l.resolve(r.req.User, path.Dir(a.From))
		if err != nil {
			return err
		}
		dst, err := l.mkdirs(r.req.User, path.Dir(a.Path))
		if err != nil {
			return err
		}
		moved, err := l.st.Meta.Lookup(src.Ino, path.Base(a.From))
		if err != nil {
			return asError(err, fmt.Sprintf("rename %s back to %s", a.From, a.Path))
		}
		replaced, kept, err := l.st.Meta.RenameTrash(src.Ino, path.Base(a.From), dst.Ino, path.Base(a.Path), 0,
			r.note(rn.From), &metadata.RenameNote{From: rn.To, To: rn.From})
		if err != nil {
			return asError(err, fmt.Sprintf("rename %s back to %s", a.From, a.Path))
		}
		l.core.EntryChanged(src.Ino, path.Base(a.From), moved, false)
		l.core.EntryChanged(dst.Ino, path.Base(a.Path), replaced, !kept)
		r.did(a)
	}
	return nil
}

// trashNew moves the files of the subtree made since the time to the
// trash, and returns the directories made since, deepest first.
func (r *restorer) trashNew() ([]string, error) {
	l := r.l
	root, _, err := l.resolve(r.req.User, r.view(r.rel))
	var ae *Error
	if errors.As(err, &ae) && ae.Code == CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var dirs []string
	var walk func(n *shedfs.Inode, zrel string) error
	walk = func(n *shedfs.Inode, zrel string) error {
		born, err := l.st.Meta.Birth(n.Ino)
		if err != nil {
			return asError(err, "birth of "+zrel)
		}
		isNew := !born.Before(r.req.At)
		if !n.IsDir() {
			if isNew {
				return r.trashOne(zrel)
			}
			return nil
		}
		entries, err := l.st.Meta.ReadDir(n.Ino)
		if err != nil {
			return asError(err, "list "+zrel)
		}
		for _, de := range entries {
			c, err := l.st.Meta.GetInode(de.Ino)
			if err != nil {
				continue
			}
			if err := walk(c, path.Join(zrel, de.Name)); err != nil {
				return err
			}
		}
		if isNew && zrel != "" {
			dirs = append(dirs, zrel)
		}
		return nil
	}
	if err := walk(root, r.rel); err != nil {
		return nil, err
	}
	return dirs, nil
}

// trashOne moves file zrel, made since the time, to the trash.
func (r *restorer) trashOne(zrel string) error {
	l := r.l
	a := RestoreAction{Action: "trash", Path: r.view(zrel)}
	if r.req.DryRun {
		r.did(a)
		return nil
	}
	dir, _, err := l.resolve(r.req.User, path.Dir(a.Path))
	if err != nil {
		return err
	}
	n, freed, kept, err := l.st.Meta.UnlinkTrash(dir.Ino, path.Base(a.Path), false, l.core.Unused, r.note(zrel))
	if err != nil {
		return asError(err, "move "+a.Path+" to the trash")
	}
	if freed && n.IsRegular() {
		l.core.Freed([]*shedfs.Inode{n}, vfs.FreedPurge, false)
	}
	l.core.EntryChanged(dir.Ino, path.Base(a.Path), n, !kept && !freed)
	r.did(a)
	return nil
}

// before is where zrel, a path at time t, was at the restore's time:
// the journaled renames between are undone, newest first.
func (r *restorer) before(zrel string, t time.Time) string {
	for i := len(r.renames) - 1; i >= 0; i-- {
		rn := r.renames[i]
		if !rn.Time.Before(t) {
			continue
		}
		switch {
		case zrel == rn.To:
			zrel = rn.From
		case strings.HasPrefix(zrel, rn.To+"/"):
			zrel = rn.From + zrel[len(rn.To):]
		}
	}
	return zrel
}

// restoreKept brings back, for each path of the subtree, the oldest file
// kept since the time that existed at the time.
func (r *restorer) restoreKept() error {
	l := r.l
	list, err := l.st.Meta.ListTrash([]shedfs.Holder{shedfs.HolderOf(r.zone)})
	if err != nil {
		return asError(err, "list the trash")
	}
	first := map[string]metadata.TrashEntry{}
	var paths []string
	for _, e := range list {
		if e.Zone != r.zone || e.Time.Before(r.req.At) {
			continue
		}
		zrel := r.before(e.Path, e.Time)
		if !r.under(zrel) {
			continue
		}
		born, err := l.st.Meta.Birth(e.Ino)
		if err != nil {
			return asError(err, "birth of a kept file")
		}
		if !born.Before(r.req.At) {
			continue // made since: it was not there at the time
		}
		if old, ok := first[zrel]; ok && !e.Time.Before(old.Time) {
			continue
		}
		if _, ok := first[zrel]; !ok {
			paths = append(paths, zrel)
		}
		first[zrel] = e
	}
	slices.Sort(paths)
	for _, zrel := range paths {
		e := first[zrel]
		te := trashEntry(r.req.User, e) // the entry's name, at the path it was
		te.Path = r.view(zrel)
		a := RestoreAction{Action: "restore", Path: te.Path, Entry: te.Entry}
		if r.req.DryRun {
			r.did(a)
			continue
		}
		dir, err := l.mkdirs(r.req.User, path.Dir(te.Path))
		if err != nil {
			return err
		}
		_, replaced, kept, err := l.st.Meta.RestoreTrash(e.Ino, dir.Ino, path.Base(te.Path), r.note(zrel))
		if errors.Is(err, syscall.EISDIR) {
			continue // a directory stands there now: left as it is
		}
		if err != nil {
			return asError(err, "restore "+te.Entry)
		}
		l.core.EntryChanged(dir.Ino, path.Base(te.Path), replaced, !kept)
		r.did(a)
	}
	return nil
}

// removeDirs removes the directories made since the time that are empty
// now, deepest first.
func (r *restorer) removeDirs(dirs []string) {
	l := r.l
	for _, zrel := range dirs {
		a := RestoreAction{Action: "rmdir", Path: r.view(zrel)}
		if r.req.DryRun {
			r.did(a)
			continue
		}
		parent, _, err := l.resolve(r.req.User, path.Dir(a.Path))
		if err != nil {
			continue
		}
		if _, err := l.st.Meta.Unlink(parent.Ino, path.Base(a.Path), true); err != nil {
			continue // not empty: something older was restored into it
		}
		l.core.EntryChanged(parent.Ino, path.Base(a.Path), nil, false)
		r.did(a)
	}
}

// restoreRoutes serves RestoreAt over the admin API.
func restoreRoutes(h func(string, endpoint), admin Admin) {
	h("POST /v1/restore", route(jsonBody[RestoreAtRequest], admin.RestoreAt))
}

// RestoreAt asks the daemon to restore a subtree to a point in time.
func (c *Client) RestoreAt(ctx context.Context, req RestoreAtRequest) (*RestoreAtResult, error) {
	return call[*RestoreAtResult](c, ctx, http.MethodPost, "/v1/restore", req)
}
