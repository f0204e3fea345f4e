package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// snapshot restore puts a snapshot's tree (or a part of it) back in the
// view it was taken of, through a view of the core like any door: every
// change is decided by acl and admitted by the quota, and what it
// replaces or removes goes to the trash. It takes an automatic snapshot
// of the current state first, so that restoring that one undoes it.

// SnapshotRestoreRequest names the snapshot and the part of it to put
// back (Path, relative to the snapshot's root; "" for all of it).
type SnapshotRestoreRequest struct {
	User   string `json:"user"`
	Name   string `json:"name"`
	Path   string `json:"path,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// SnapshotRestoreResult is what a restore did (or would do).
type SnapshotRestoreResult struct {
	// Undo is the automatic snapshot taken before (none on a dry run).
	Undo     string   `json:"undo,omitempty"`
	Created  []string `json:"created"`
	Replaced []string `json:"replaced"`
	Removed  []string `json:"removed"`
	Modes    []string `json:"mode_changed"`
	DryRun   bool     `json:"dry_run,omitempty"`
}

// SnapshotRestorer is the restore operation, implemented by Local and
// Client.
type SnapshotRestorer interface {
	RestoreSnapshot(ctx context.Context, req SnapshotRestoreRequest) (*SnapshotRestoreResult, error)
}

var (
	_ SnapshotRestorer = (*Local)(nil)
	_ SnapshotRestorer = (*Client)(nil)
)

// under reports whether p is sub or below it ("" is everything).
func under(p, sub string) bool {
	return sub == "" || p == sub || strings.HasPrefix(p, sub+"/")
}

// RestoreSnapshot puts back user's snapshot name (the part at req.Path).
func (l *Local) RestoreSnapshot(ctx context.Context, req SnapshotRestoreRequest) (*SnapshotRestoreResult, error) {
	sn, err := l.getSnapshot(req.User, req.Name)
	if err != nil {
		return nil, err
	}
	sub := path.Clean("/" + req.Path)[1:]
	from, err := l.snapshotSide(sn)
	if err != nil {
		return nil, err
	}
	if _, ok := from.byPath[sub]; !ok {
		return nil, errorf(CodeNotFound, "snapshot %s has no %s", sn.Name, req.Path)
	}
	root, _, err := l.snapshotRoot(sn.User, sn.Session, sn.Path)
	if err != nil {
		return nil, err
	}
	tree, err := l.walkTree(root)
	if err != nil {
		return nil, asError(err, "walk "+sn.Path)
	}
	now := map[string]metadata.SnapEntry{}
	for _, w := range tree {
		now[w.rel] = snapEntryOf(w)
	}
	res := &SnapshotRestoreResult{Created: []string{}, Replaced: []string{}, Removed: []string{}, Modes: []string{}, DryRun: req.DryRun}
	for _, p := range snapPaths(now) {
		if e, ok := from.byPath[p]; under(p, sub) && (!ok || e.Mode&syscall.S_IFMT != now[p].Mode&syscall.S_IFMT) {
			res.Removed = append(res.Removed, p)
		}
	}
	for _, p := range snapPaths(from.byPath) {
		if !under(p, sub) {
			continue
		}
		e := from.byPath[p]
		cur, ok := now[p]
		switch {
		case !ok || slices.Contains(res.Removed, p):
			res.Created = append(res.Created, p)
		case e.Mode&syscall.S_IFMT == syscall.S_IFREG:
			if _, same, err := compareContent(from.content(e), l.st.Blobs.Path(cur.Ino), e.Size, cur.Size); err != nil {
				return nil, asError(err, "compare "+p)
			} else if !same {
				res.Replaced = append(res.Replaced, p)
			}
		case e.Mode&syscall.S_IFMT == syscall.S_IFLNK && e.Target != cur.Target:
			res.Replaced = append(res.Replaced, p)
		}
		if ok && e.Mode&syscall.S_IFMT == cur.Mode&syscall.S_IFMT && e.Mode != cur.Mode {
			res.Modes = append(res.Modes, p)
		}
	}
	if req.DryRun {
		return res, nil
	}
	undo := fmt.Sprintf("%s-undo-%s", sn.Name, strconv.FormatInt(time.Now().UnixNano(), 36))
	if len(undo) > 64 {
		undo = "undo-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if _, err := l.CreateSnapshot(ctx, SnapshotCreateRequest{User: sn.User, Session: sn.Session, Path: sn.Path, Name: undo}); err != nil {
		return nil, err
	}
	res.Undo = undo
	if err := l.applyRestore(ctx, sn, from, res); err != nil {
		return res, err
	}
	// Content the restore linked back is no longer the snapshot's alone.
	if err := l.recountSnapshots(sn.Holder); err != nil {
		return res, err
	}
	return res, nil
}

// restoreView is the view a restore acts through, with the snapshot's
// root at hand.
type restoreView struct {
	l    *Local
	v    *vfs.View
	base string // the snapshot root's path in the view
}

// at resolves p (relative to the snapshot root) in the view.
func (r *restoreView) at(p string) (vfs.At, *shedfs.Inode, syscall.Errno) {
	v := r.v
	dir := vfs.At{Ino: v.Root(), Zone: v.RootZone(), Paths: viewPath("")}
	rec, e := v.Load(dir)
	if e != 0 {
		return dir, nil, e
	}
	walked := ""
	for _, name := range strings.Split(path.Join(r.base, p), "/") {
		if name == "" || name == "." {
			continue
		}
		walked = path.Join(walked, name)
		if ino, res := v.Reserve(dir.Ino, name); res == vfs.ReservedRoot {
			zr, ok := v.ReservedRoot(ino, name)
			if !ok {
				return dir, nil, syscall.ENOENT
			}
			rec = zr
		} else if rec, _, e = v.Resolve(dir, name, nil, v.Clock()); e != 0 {
			return dir, nil, e
		}
		dir = vfs.At{Ino: rec.Ino, Zone: rec.Zone, Paths: viewPath(walked)}
	}
	return dir, rec, 0
}

// viewPath names an entry of a view by its path from the view root, for
// the audit trail and the trash (vfs.Paths).
type viewPath string

func (p viewPath) PathOf(name string) string { return "/" + path.Join(string(p), name) }

// parent resolves the directory of p and p's name.
func (r *restoreView) parent(p string) (vfs.At, string, syscall.Errno) {
	d := path.Dir(p)
	if d == "." {
		d = ""
	}
	at, _, e := r.at(d)
	return at, path.Base(p), e
}

func (l *Local) applyRestore(ctx context.Context, sn *metadata.Snapshot, from *diffSide, res *SnapshotRestoreResult) error {
	var ss *metadata.Session
	if sn.Session != "" {
		var err error
		if ss, err = l.st.Meta.GetSession(sn.User, sn.Session); err != nil {
			return asError(err, "session "+sn.Session)
		}
	}
	v, err := l.core.NewView("admin", sn.User, ss, vfs.ViewOptions{})
	if err != nil {
		return asError(err, "view of "+sn.User)
	}
	defer v.Close()
	base := sn.Path
	if base == "." {
		base = ""
	}
	r := &restoreView{l: l, v: v, base: base}
	fail := func(what, p string, e syscall.Errno) error {
		return asError(e, fmt.Sprintf("restore %s: %s %s: %v (the automatic snapshot %s undoes what was done)", sn.Name, what, p, e, res.Undo))
	}
	// What is not in the snapshot goes to the trash, deepest first.
	rm := slices.Clone(res.Removed)
	slices.SortFunc(rm, func(a, b string) int { return strings.Compare(b, a) })
	for _, p := range rm {
		dir, name, e := r.parent(p)
		if e == 0 {
			_, rec, e2 := r.at(p)
			if e2 != 0 {
				continue // gone with its directory
			}
			op := acl.OpUnlink
			if rec.IsDir() {
				op = acl.OpRmdir
			}
			_, e = v.Remove(dir, op, name)
		}
		if e != 0 && e != syscall.ENOENT {
			return fail("remove", p, e)
		}
	}
	// What is missing, parents first; then the content that differs.
	for _, p := range res.Created {
		e := from.byPath[p]
		dir, name, en := r.parent(p)
		if en != 0 {
			return fail("create", p, en)
		}
		switch e.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			if p == "" {
				continue
			}
			if _, _, en = v.Mkdir(vfs.Caller{}, dir, name, e.Mode&0o7777); en != 0 {
				return fail("mkdir", p, en)
			}
		case syscall.S_IFLNK:
			if _, _, en = v.Symlink(vfs.Caller{}, dir, name, e.Target); en != 0 {
				return fail("symlink", p, en)
			}
		case syscall.S_IFREG:
			// The snapshot's content, linked, not copied.
			rec, en := v.Create(vfs.Caller{}, dir, name, e.Mode&0o7777)
			if en != 0 {
				return fail("create", p, en)
			}
			at := vfs.At{Ino: rec.Ino, Zone: rec.Zone, Paths: viewPath(path.Join(r.base, p))}
			if _, en = v.Adopt(at, rec, from.content(e), e.Ino); en != 0 {
				return fail("write", p, en)
			}
		}
	}
	for _, p := range res.Replaced {
		e := from.byPath[p]
		at, rec, en := r.at(p)
		if en != 0 {
			return fail("replace", p, en)
		}
		if e.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			dir, name, en := r.parent(p)
			if en == 0 {
				_, en = v.Remove(dir, acl.OpUnlink, name)
			}
			if en == 0 {
				_, _, en = v.Symlink(vfs.Caller{}, dir, name, e.Target)
			}
			if en != 0 {
				return fail("replace", p, en)
			}
			continue
		}
		_ = rec
		h, _, en := v.Open(ctx, at, syscall.O_WRONLY|syscall.O_TRUNC)
		if en != 0 {
			return fail("replace", p, en)
		}
		if en = copyInto(h, from.content(e)); en != 0 {
			return fail("write", p, en)
		}
	}
	for _, p := range res.Modes {
		at, rec, en := r.at(p)
		if en == 0 {
			en = v.Setattr(at, rec, vfs.SetAttr{Mode: from.byPath[p].Mode & 0o7777, SetMode: true})
		}
		if en != 0 {
			return fail("chmod", p, en)
		}
	}
	return nil
}

// copyInto writes the content file src through handle h, then flushes
// and releases it.
func copyInto(h *vfs.Handle, src string) syscall.Errno {
	defer h.Release()
	f, err := os.Open(src)
	if err != nil && !os.IsNotExist(err) {
		return syscall.EIO
	}
	if f != nil {
		defer f.Close()
		buf := make([]byte, 1<<20)
		var off int64
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if _, _, e := h.Write(buf[:n], off); e != 0 {
					return e
				}
				off += int64(n)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return syscall.EIO
			}
		}
	}
	return h.Flush()
}

// RestoreSnapshot asks the daemon to restore a snapshot.
func (c *Client) RestoreSnapshot(ctx context.Context, req SnapshotRestoreRequest) (*SnapshotRestoreResult, error) {
	return call[*SnapshotRestoreResult](c, ctx, http.MethodPost, "/v1/snapshots/restore", req)
}
