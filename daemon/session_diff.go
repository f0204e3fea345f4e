package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/internal/textdiff"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// session diff says what a session changed against its start (the
// snapshot its fork took of it; nothing for a session that started
// empty), with snapshot diff's comparison (diffSides); session apply
// copies those changes into a directory of the user's view, through a
// view of the core like snapshot restore, so that every change is
// decided by acl, admitted by the quota, and what it replaces or removes
// goes to the trash.

// SessionDiff is what a session changed since it started: paths are
// relative to its scratch root. Patch, when asked, is a unified diff of
// its text files (binary ones named only).
type SessionDiff struct {
	SnapshotDiff
	Patch string `json:"patch,omitempty"`
}

// SessionApplyRequest copies what session ID of User changed into
// directory To of the user's view (relative to the view root).
type SessionApplyRequest struct {
	User   string `json:"user"`
	ID     string `json:"id"`
	To     string `json:"to"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// SessionApplyResult is what an apply did (or would do), paths relative
// to To.
type SessionApplyResult struct {
	Created  []string `json:"created"`
	Replaced []string `json:"replaced"`
	Removed  []string `json:"removed"`
	Renamed  []string `json:"renamed"`
	Modes    []string `json:"mode_changed"`
	DryRun   bool     `json:"dry_run,omitempty"`
}

// SessionDiffer is session diff and apply, implemented by Local and
// Client.
type SessionDiffer interface {
	DiffSession(ctx context.Context, user, id, patch string) (*SessionDiff, error)
	ApplySession(ctx context.Context, req SessionApplyRequest) (*SessionApplyResult, error)
}

var (
	_ SessionDiffer = (*Local)(nil)
	_ SessionDiffer = (*Client)(nil)
)

// sessionSides are the two sides of a session's diff: its start and its
// scratch now.
func (l *Local) sessionSides(user, id string) (from, to *diffSide, err error) {
	if err := ValidPrincipalName("user", user); err != nil {
		return nil, nil, err
	}
	ss, err := l.st.Meta.GetSession(user, id)
	if err != nil {
		return nil, nil, asError(err, fmt.Sprintf("no open session %s of %s", id, user))
	}
	from = &diffSide{byPath: map[string]metadata.SnapEntry{}, content: func(metadata.SnapEntry) string { return "" }}
	if ss.Start != "" {
		sn, err := l.getSnapshot(user, ss.Start)
		if err != nil {
			return nil, nil, err
		}
		if from, err = l.snapshotSide(sn); err != nil {
			return nil, nil, err
		}
	}
	root, err := l.st.Meta.GetInode(ss.Root)
	if err != nil {
		return nil, nil, asError(err, "session root")
	}
	if to, err = l.liveSide(root, "session "+id); err != nil {
		return nil, nil, err
	}
	if ss.Start == "" {
		// Started empty: only its root was there.
		from.byPath[""] = to.byPath[""]
	}
	return from, to, nil
}

// DiffSession says what session id of user changed since it started;
// patch "true" adds the unified diff of its text files.
func (l *Local) DiffSession(ctx context.Context, user, id, patch string) (*SessionDiff, error) {
	from, to, err := l.sessionSides(user, id)
	if err != nil {
		return nil, err
	}
	d := &SessionDiff{SnapshotDiff: SnapshotDiff{From: "start", To: "now"}}
	if err := diffSides(&d.SnapshotDiff, from, to); err != nil {
		return nil, asError(err, "diff")
	}
	if patch == "true" {
		if d.Patch, err = sessionPatch(&d.SnapshotDiff, from, to); err != nil {
			return nil, asError(err, "patch")
		}
	}
	return d, nil
}

// patchMax is the largest file the patch shows line by line.
const patchMax = 4 << 20

// sessionPatch writes the unified diff of the changed regular files.
func sessionPatch(d *SnapshotDiff, from, to *diffSide) (string, error) {
	var sb strings.Builder
	one := func(old, cur string, a, b *metadata.SnapEntry) error {
		var ta, tb string
		var binA, binB bool
		var err error
		if a != nil {
			if ta, binA, err = patchText(from.content(*a), a.Size); err != nil {
				return err
			}
		}
		if b != nil {
			if tb, binB, err = patchText(to.content(*b), b.Size); err != nil {
				return err
			}
		}
		an, bn := "", ""
		if a != nil {
			an = "a/" + old
		}
		if b != nil {
			bn = "b/" + cur
		}
		if binA || binB {
			fmt.Fprintf(&sb, "Binary files %s and %s differ\n", orNull(an), orNull(bn))
			return nil
		}
		if a != nil && b != nil && old != cur && ta == tb {
			fmt.Fprintf(&sb, "rename from %s\nrename to %s\n", old, cur)
			return nil
		}
		sb.WriteString(textdiff.Unified(an, bn, ta, tb))
		return nil
	}
	var err error
	each := func(cs []DiffChange, fromSide, toSide bool) {
		for _, c := range cs {
			if err != nil || c.Type != "file" {
				continue
			}
			var a, b *metadata.SnapEntry
			if fromSide {
				e := from.byPath[cmpOr(c.OldPath, c.Path)]
				a = &e
			}
			if toSide {
				e := to.byPath[c.Path]
				b = &e
			}
			err = one(cmpOr(c.OldPath, c.Path), c.Path, a, b)
		}
	}
	each(d.Modified, true, true)
	each(d.Renamed, true, true)
	each(d.Added, false, true)
	each(d.Removed, true, false)
	return sb.String(), err
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func orNull(name string) string {
	if name == "" {
		return "/dev/null"
	}
	return name
}

// patchText reads a content file for the patch: binary when it has a NUL
// in its first 8 KiB or is larger than patchMax.
func patchText(p string, size int64) (string, bool, error) {
	if size > patchMax {
		return "", true, nil
	}
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return "", false, nil // never written: empty
	}
	if err != nil {
		return "", false, err
	}
	if slices.Contains(b[:min(len(b), 8<<10)], 0) {
		return "", true, nil
	}
	return string(b), false, nil
}

// ApplySession copies what session req.ID changed into directory req.To
// of the user's view: what it added or changed is written there (created
// or replaced), what it removed is removed (to the trash), what it
// renamed is renamed when the old name is there (else written under the
// new one), and modes are set, each through the user's view.
func (l *Local) ApplySession(ctx context.Context, req SessionApplyRequest) (*SessionApplyResult, error) {
	from, to, err := l.sessionSides(req.User, req.ID)
	if err != nil {
		return nil, err
	}
	var d SnapshotDiff
	if err := diffSides(&d, from, to); err != nil {
		return nil, asError(err, "diff")
	}
	v, err := l.core.NewView("admin", req.User, nil, vfs.ViewOptions{})
	if err != nil {
		return nil, asError(err, "view of "+req.User)
	}
	defer v.Close()
	base := path.Clean("/" + req.To)[1:]
	r := &restoreView{l: l, v: v, base: base}
	if _, rec, e := r.at(""); e != 0 || !rec.IsDir() {
		return nil, errorf(CodeInvalid, "apply session %s: %q is not a directory of %s's view", req.ID, req.To, req.User)
	}
	a := &applier{r: r, to: to, res: &SessionApplyResult{Created: []string{}, Replaced: []string{}, Removed: []string{}, Renamed: []string{}, Modes: []string{}, DryRun: req.DryRun}}
	if err := a.apply(ctx, &d); err != nil {
		return a.res, err
	}
	return a.res, nil
}

// applier carries out a session's diff through a view.
type applier struct {
	r   *restoreView
	to  *diffSide
	res *SessionApplyResult
}

func (a *applier) fail(what, p string, e syscall.Errno) error {
	return asError(e, fmt.Sprintf("apply: %s %s: %v", what, p, e))
}

func (a *applier) apply(ctx context.Context, d *SnapshotDiff) error {
	rm := slices.Clone(d.Removed)
	slices.SortFunc(rm, func(x, y DiffChange) int { return strings.Compare(y.Path, x.Path) })
	for _, c := range rm {
		if err := a.remove(c.Path); err != nil {
			return err
		}
	}
	for _, c := range d.Renamed {
		if err := a.rename(ctx, c); err != nil {
			return err
		}
	}
	for _, c := range d.Added {
		if err := a.write(ctx, c.Path); err != nil {
			return err
		}
	}
	for _, c := range d.Modified {
		if err := a.write(ctx, c.Path); err != nil {
			return err
		}
	}
	for _, c := range d.Modes {
		if a.res.DryRun {
			a.res.Modes = append(a.res.Modes, c.Path)
			continue
		}
		at, rec, e := a.r.at(c.Path)
		if e == 0 {
			e = a.r.v.Setattr(at, rec, vfs.SetAttr{Mode: a.to.byPath[c.Path].Mode & 0o7777, SetMode: true})
		}
		if e != 0 {
			return a.fail("chmod", c.Path, e)
		}
		a.res.Modes = append(a.res.Modes, c.Path)
	}
	return nil
}

// remove removes p from the target, to the trash; absent is done.
func (a *applier) remove(p string) error {
	_, rec, e := a.r.at(p)
	if e == syscall.ENOENT {
		return nil
	}
	if e != 0 {
		return a.fail("remove", p, e)
	}
	a.res.Removed = append(a.res.Removed, p)
	if a.res.DryRun {
		return nil
	}
	dir, name, e := a.r.parent(p)
	if e == 0 {
		op := acl.OpUnlink
		if rec.IsDir() {
			op = acl.OpRmdir
		}
		_, e = a.r.v.Remove(dir, op, name)
	}
	if e != 0 && e != syscall.ENOENT {
		return a.fail("remove", p, e)
	}
	return nil
}

// rename moves c.OldPath to c.Path in the target when the old one is
// there and the new one is not; else it writes the new one from the
// session.
func (a *applier) rename(ctx context.Context, c DiffChange) error {
	_, _, eOld := a.r.at(c.OldPath)
	_, _, eNew := a.r.at(c.Path)
	if eOld != 0 || eNew == 0 {
		return a.writeTree(ctx, c.Path)
	}
	a.res.Renamed = append(a.res.Renamed, c.OldPath+" -> "+c.Path)
	if a.res.DryRun {
		return nil
	}
	od, on, e := a.r.parent(c.OldPath)
	if e != 0 {
		return a.fail("rename", c.OldPath, e)
	}
	nd, nn, e := a.r.parent(c.Path)
	if e != 0 {
		return a.fail("rename", c.Path, e)
	}
	if _, e := a.r.v.Rename(od, on, nd, nn, 0); e != 0 {
		return a.fail("rename", c.OldPath, e)
	}
	return nil
}

// writeTree writes p and, for a directory, everything below it.
func (a *applier) writeTree(ctx context.Context, p string) error {
	for _, q := range snapPaths(a.to.byPath) {
		if under(q, p) {
			if err := a.write(ctx, q); err != nil {
				return err
			}
		}
	}
	return nil
}

// write makes p in the target as the session has it: a directory with
// all that is below it, a symlink, or a file with its content (replacing
// the target's, whose old content goes to the trash).
func (a *applier) write(ctx context.Context, p string) error {
	e := a.to.byPath[p]
	_, cur, en := a.r.at(p)
	exists := en == 0
	if en != 0 && en != syscall.ENOENT {
		return a.fail("write", p, en)
	}
	switch {
	case exists && cur.Mode&syscall.S_IFMT != e.Mode&syscall.S_IFMT:
		if err := a.remove(p); err != nil {
			return err
		}
		exists = false
	case exists && e.Mode&syscall.S_IFMT == syscall.S_IFDIR:
		return nil
	}
	if exists {
		a.res.Replaced = append(a.res.Replaced, p)
	} else {
		a.res.Created = append(a.res.Created, p)
	}
	if a.res.DryRun {
		return nil
	}
	v := a.r.v
	dir, name, en := a.r.parent(p)
	if en != 0 {
		return a.fail("write", p, en)
	}
	switch e.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		if _, _, en = v.Mkdir(vfs.Caller{}, dir, name, e.Mode&0o7777); en != 0 {
			return a.fail("mkdir", p, en)
		}
	case syscall.S_IFLNK:
		if exists {
			if _, en = v.Remove(dir, acl.OpUnlink, name); en != 0 {
				return a.fail("replace", p, en)
			}
		}
		if _, _, en = v.Symlink(vfs.Caller{}, dir, name, e.Target); en != 0 {
			return a.fail("symlink", p, en)
		}
	case syscall.S_IFREG:
		var h *vfs.Handle
		if exists {
			at, _, _ := a.r.at(p)
			h, _, en = v.Open(ctx, at, syscall.O_WRONLY|syscall.O_TRUNC)
		} else {
			var rec *shedfs.Inode
			rec, en = v.Create(vfs.Caller{}, dir, name, e.Mode&0o7777)
			if en == 0 {
				h, _, en = v.OpenNew(dir, name, rec, syscall.O_WRONLY)
			}
		}
		if en != 0 {
			return a.fail("write", p, en)
		}
		if en = copyInto(h, a.to.content(e)); en != 0 {
			return a.fail("write", p, en)
		}
	}
	return nil
}

// sessionDiffRoutes adds session diff and apply to the admin API.
func sessionDiffRoutes(h func(string, endpoint), admin Admin) {
	sd, ok := admin.(SessionDiffer)
	if !ok {
		return
	}
	h("GET /v1/sessions/{user}/{id}/diff", route3(pathArg("user"), pathArg("id"), queryArg("patch"), sd.DiffSession))
	h("POST /v1/sessions/apply", route(jsonBody[SessionApplyRequest], sd.ApplySession))
}

// DiffSession asks the daemon what a session changed.
func (c *Client) DiffSession(ctx context.Context, user, id, patch string) (*SessionDiff, error) {
	p := "/v1/sessions/" + seg(user) + "/" + seg(id) + "/diff"
	if patch != "" {
		p += "?" + url.Values{"patch": {patch}}.Encode()
	}
	return call[*SessionDiff](c, ctx, http.MethodGet, p, nil)
}

// ApplySession asks the daemon to apply a session's changes.
func (c *Client) ApplySession(ctx context.Context, req SessionApplyRequest) (*SessionApplyResult, error) {
	return call[*SessionApplyResult](c, ctx, http.MethodPost, "/v1/sessions/apply", req)
}
