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
	defer l.core.TrashChanged()
	for _, a := range plan {
		if err := r.do(a); err != nil {
			return r.res, fmt.Errorf("restore: after %d of %d changes: %w", len(r.res.Actions), len(plan), err)
		}
		r.res.Actions = append(r.res.Actions, a)
		r.l.audit(r.req.User, r.zone, "/"+a.Path, restoreOp(a.Action), 0)
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

// zrel is view path p within the zone.
func (r *restorer) zrel(p string) string {
	_, rel, _ := zones.ZonePath(r.req.User, p)
	return rel
}

// restoreOp is the audit op of a restore action: admin_restore_ and the
// action, except "restore", an entry put back from the trash, which would
// read admin_restore_restore.
func restoreOp(action string) string {
	if action == "restore" {
		return "admin_restore_from_trash"
	}
	return "admin_restore_" + strings.ReplaceAll(action, "-", "_")
}

func (r *restorer) note(zrel string) *metadata.TrashNote {
	if r.off {
		return nil
	}
	return &metadata.TrashNote{By: r.req.User, Why: metadata.TrashRestore, Path: zrel}
}

func (r *restorer) journal(n metadata.RenameNote) *metadata.RenameNote {
	if r.off {
		return nil
	}
	return &n
}

// changed is the error of a step whose entry is not the one planned for:
// something changed it meanwhile (a view), and the rest of the plan may
// be wrong. The caller stops; a new restore plans anew.
func changed(p string) error {
	return errorf(CodeBusy, "%s changed while the restore ran; run it again", p)
}

// entryAt returns directory dir (view path) and what its entry name is
// (nil when there is none).
func (r *restorer) entryAt(p string) (dir, n *shedfs.Inode, err error) {
	dir, _, err = r.l.resolve(r.req.User, path.Dir(p))
	if err != nil {
		return nil, nil, err
	}
	n, err = r.l.st.Meta.Lookup(dir.Ino, path.Base(p))
	if errors.Is(err, syscall.ENOENT) {
		return dir, nil, nil
	}
	if err != nil {
		return nil, nil, asError(err, "look up "+p)
	}
	return dir, n, nil
}

// expect checks that p holds ino (0: nothing).
func (r *restorer) expect(p string, n *shedfs.Inode, ino uint64) error {
	switch {
	case n == nil && ino == 0:
		return nil
	case n == nil || n.Ino != ino:
		return changed(p)
	}
	return nil
}

// do runs one planned step.
func (r *restorer) do(a RestoreAction) error {
	l := r.l
	dir, cur, err := r.entryAt(a.Path)
	if err != nil {
		return err
	}
	base := path.Base(a.Path)
	zrel := r.zrel(a.Path)
	switch a.Action {
	case "trash", "rmdir":
		if err := r.expect(a.Path, cur, a.Ino); err != nil {
			return err
		}
		n, freed, kept, err := l.st.Meta.UnlinkTrash(dir.Ino, base, a.Action == "rmdir", l.core.Unused, r.note(zrel))
		if err != nil {
			return asError(err, "remove "+a.Path)
		}
		if freed && n.IsRegular() {
			l.core.Freed([]*shedfs.Inode{n}, vfs.FreedPurge, false)
		}
		l.core.EntryChanged(dir.Ino, base, n, !kept && !freed)
	case "mkdir":
		if cur != nil {
			return changed(a.Path)
		}
		if _, err := l.mkdirs(r.req.User, a.Path); err != nil {
			return err
		}
	case "rename-back":
		src, moved, err := r.entryAt(a.From)
		if err != nil {
			return err
		}
		if err := r.expect(a.From, moved, a.Ino); err != nil {
			return err
		}
		if err := r.expect(a.Path, cur, a.Replaces); err != nil {
			return err
		}
		var flags uint32
		if a.Replaces == 0 {
			flags = metadata.RenameNoReplace
		}
		replaced, kept, err := l.st.Meta.RenameTrash(src.Ino, path.Base(a.From), dir.Ino, base, flags,
			r.note(zrel), r.journal(metadata.RenameNote{From: r.zrel(a.From), To: zrel}))
		if err != nil {
			return asError(err, fmt.Sprintf("rename %s back to %s", a.From, a.Path))
		}
		l.core.EntryChanged(src.Ino, path.Base(a.From), moved, false)
		l.core.EntryChanged(dir.Ino, base, replaced, replaced != nil && !kept && replaced.Nlink == 0)
	case "link":
		if cur != nil {
			return changed(a.Path)
		}
		if _, err := l.st.Meta.LinkTrash(a.Ino, dir.Ino, base, r.journal(metadata.RenameNote{Kind: metadata.JournalAdd, To: zrel})); err != nil {
			return asError(err, "link "+a.Path)
		}
		l.core.EntryChanged(dir.Ino, base, nil, false)
		l.core.InodeChanged(a.Ino)
	case "restore":
		if err := r.expect(a.Path, cur, a.Replaces); err != nil {
			return err
		}
		_, replaced, kept, err := l.st.Meta.RestoreTrash(a.Ino, dir.Ino, base, r.note(zrel))
		if err != nil {
			return asError(err, "restore "+a.Path)
		}
		l.core.EntryChanged(dir.Ino, base, replaced, replaced != nil && !kept && replaced.Nlink == 0)
	default:
		return fmt.Errorf("restore: unknown step %q", a.Action)
	}
	return nil
}

// restoreRoutes serves RestoreAt over the admin API.
func restoreRoutes(h func(string, endpoint), admin Admin) {
	h("POST /v1/restore", route(jsonBody[RestoreAtRequest], admin.RestoreAt))
}

// RestoreAt asks the daemon to restore a subtree to a point in time.
func (c *Client) RestoreAt(ctx context.Context, req RestoreAtRequest) (*RestoreAtResult, error) {
	return call[*RestoreAtResult](c, ctx, http.MethodPost, "/v1/restore", req)
}
