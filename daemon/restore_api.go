package daemon

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/zones"
)

// Restoring a subtree to a point in time (docs/design.md, "Trash and
// point-in-time restore"): the planner works out the tree as it was then
// (restore_history.go) and the list of steps that turns the tree now
// into it (restore_plan.go); a dry run prints that list, and the real run
// does exactly that list, step by step, checking before each that the
// entries it names are still the ones planned for. Every step is an
// ordinary change, journaled or kept in the trash like a user's, so a
// restore can itself be undone by another.

// RestoreAtRequest asks for the subtree Path of User's view as it was at
// At; DryRun lists what would be done, changing nothing.
type RestoreAtRequest struct {
	User   string    `json:"user"`
	Path   string    `json:"path"`
	At     time.Time `json:"at"`
	DryRun bool      `json:"dry_run,omitempty"`
}

// RestoreAction is one step of a restore: "rename-back" (From to Path),
// "trash" (Path was not there then, or not that file), "restore" (a kept
// file back to Path; Entry names it when it was in the trash before the
// restore began), "link" (another name Path for the file at From),
// "mkdir", "rmdir" (a directory that was not there then, empty by then).
type RestoreAction struct {
	Action string `json:"action"`
	Path   string `json:"path"`
	From   string `json:"from,omitempty"`
	Entry  string `json:"entry,omitempty"`
	// Ino is the inode the step moves, removes, links or restores: the
	// real run checks that it is still the one there.
	Ino uint64 `json:"ino,omitempty"`
	// Replaces is the file a rename-back or restore replaces at Path
	// (it goes to the trash); 0: Path is free.
	Replaces uint64 `json:"replaces,omitempty"`
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
	// off: the trash is off, so nothing is kept or journaled.
	off bool
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
	r := &restorer{l: l, req: req, zone: zone, rel: rel, off: l.trashOff(),
		res: &RestoreAtResult{User: req.User, Path: p, At: req.At, DryRun: req.DryRun, Actions: []RestoreAction{}}}
	plan, err := r.plan()
	if err != nil {
		return r.res, err
	}
	if req.DryRun {
		r.res.Actions = append(r.res.Actions, plan...)
		return r.res, nil
	}
	steps := make([]vfs.RestoreStep, len(plan))
	for i, a := range plan {
		steps[i] = vfs.RestoreStep{Action: a.Action, Path: a.Path, From: a.From, Ino: a.Ino, Replaces: a.Replaces}
	}
	done, err := l.core.Admin(req.User).Restore(r.zone, steps)
	r.res.Actions = append(r.res.Actions, plan[:done]...)
	if err != nil {
		err = asError(err, "restore "+plan[done].Path)
		return r.res, fmt.Errorf("restore: after %d of %d changes: %w", done, len(plan), err)
	}
	if err := l.st.Meta.Sync(); err != nil {
		return r.res, asError(err, "sync metadata")
	}
	return r.res, nil
}

// canSee reports whether user's view shows zone z.
func (l *Local) canSee(user string, z shedfs.Zone) bool {
	hs, err := l.visibleHolders(user)
	return err == nil && slices.Contains(hs, shedfs.HolderOf(z))
}

func (r *restorer) view(zrel string) string { return zones.ViewPath(r.req.User, r.zone, zrel) }

// restoreRoutes serves RestoreAt over the admin API.
func restoreRoutes(h func(string, endpoint), admin Admin) {
	h("POST /v1/restore", route(jsonBody[RestoreAtRequest], admin.RestoreAt))
}

// RestoreAt asks the daemon to restore a subtree to a point in time.
func (c *Client) RestoreAt(ctx context.Context, req RestoreAtRequest) (*RestoreAtResult, error) {
	return call[*RestoreAtResult](c, ctx, http.MethodPost, "/v1/restore", req)
}
