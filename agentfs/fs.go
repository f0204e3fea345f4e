// Package agentfs is what the doors without a kernel (the MCP server, the
// file API) do with a view, by path: walk a path the way a view's kernel
// would, answer a listing or a stat, make, move and delete entries, read
// and write contents — each step a call of the core's view (vfs.View), so
// that the same rules, quotas, trash, scanning, locks and audit apply as
// in a FUSE view, and every view's kernel sees the change at once.
//
// What is its own is what a kernel does for a FUSE view and a tool call
// has no kernel for: turning a path into inodes (following symlinks
// within the view, refusing those that lead out), bounding every answer,
// and the token's grant, checked before the view's rules. Errors are
// *Error, typed with a Code a model can act on.
package agentfs

import (
	"path"
	"strings"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// maxSymlinks is how many symlinks a walk follows, as Linux's MAXSYMLINKS.
const maxSymlinks = 40

// FS is one caller's way into one view: a request of an agent door.
type FS struct {
	v      *vfs.View
	caller vfs.Caller
	// grant narrows the view to what a token carries; nil is the whole
	// view (a local stdio server run as the user).
	grant *acl.Grant
	// refused is the decision the last refusal of the view carried, so
	// that an answer can name the rule (vfs.View.OnRefusal).
	refused acl.Decision
}

// New returns the way into view v for caller, narrowed by grant when it
// is not nil. v is the caller's own: its refusals are reported to this FS.
func New(v *vfs.View, caller vfs.Caller, grant *acl.Grant) *FS {
	f := &FS{v: v, caller: caller, grant: grant}
	v.OnRefusal(func(d acl.Decision) { f.refused = d })
	return f
}

// View is the view f acts in.
func (f *FS) View() *vfs.View { return f.v }

// entry is an inode a walk reached.
type entry struct {
	at  vfs.At
	rec *shedfs.Inode
	// p is the clean path from the view root, "" for the root.
	p string
	// groups marks groups/ itself, which has no record.
	groups bool
}

// paths names entries for the audit trail and the trash as the view
// shows them, "/"-rooted.
type paths string

func (p paths) PathOf(name string) string { return "/" + path.Join(string(p), name) }

func (f *FS) at(ino uint64, z shedfs.Zone, p string) vfs.At {
	return vfs.At{Ino: ino, Zone: z, Paths: paths(p)}
}

// fail is the answer for errno at p, naming the rule of the view's last
// refusal when errno is its.
func (f *FS) fail(errno syscall.Errno, p string) *Error {
	rule := ""
	if f.refused.Errno == errno {
		rule = f.refused.Reason
	}
	f.refused = acl.Decision{}
	return fromErrno(errno, p, rule)
}

// allow checks the token's grant for access to p (a clean view path) and
// records a refusal as the view's rules are recorded.
func (f *FS) allow(access acl.Access, p string, op acl.Op, z shedfs.Zone) *Error {
	if f.grant == nil {
		return nil
	}
	d := acl.CheckGrant(*f.grant, f.v.Door(), access, p)
	if d.Allowed() {
		return nil
	}
	return f.fail(f.v.Deny(op, "/"+p, z, d), p)
}

// root is the view root.
func (f *FS) root() (entry, *Error) {
	at := f.at(f.v.Root(), f.v.RootZone(), "")
	rec, e := f.v.Getattr(at)
	if e != 0 {
		return entry{}, f.fail(e, "")
	}
	return entry{at: at, rec: rec}, nil
}

// child is name in dir, as the view shows it.
func (f *FS) child(dir entry, name string) (entry, *Error) {
	p := path.Join(dir.p, name)
	if dir.groups {
		rec, e := f.v.Group(name)
		if e != 0 {
			return entry{}, f.fail(e, p)
		}
		return entry{at: f.at(rec.Ino, rec.Zone, p), rec: rec, p: p}, nil
	}
	if dir.rec != nil && !dir.rec.IsDir() {
		return entry{}, errorf(CodeNotADirectory, dir.p, "not a directory, so %s is not in it", name)
	}
	switch ino, r := f.v.Reserve(dir.at.Ino, name); r {
	case vfs.ReservedGroups:
		return entry{at: f.at(vfs.GroupsIno, f.v.RootZone(), p), p: p, groups: true}, nil
	case vfs.ReservedTrash:
		return entry{}, errorf(CodeNotFound, p, "the trash is not a directory here: use the trash tools (trash_list, trash_restore)")
	case vfs.ReservedRoot:
		rec, ok := f.v.ReservedRoot(ino, name)
		if !ok {
			return entry{}, errorf(CodeInternal, p, "zone root missing")
		}
		return entry{at: f.at(rec.Ino, rec.Zone, p), rec: rec, p: p}, nil
	}
	if e := f.v.CheckLookup(dir.at, name); e != 0 {
		return entry{}, f.fail(e, p)
	}
	rec, _, e := f.v.Resolve(dir.at, name, nil, f.v.Clock())
	if e != 0 {
		return entry{}, f.fail(e, p)
	}
	return entry{at: f.at(rec.Ino, rec.Zone, p), rec: rec, p: p}, nil
}

// walk resolves p, a path relative to the view root, following symlinks
// on the way (and at the end when follow): a symlink whose target is
// absolute or climbs out of the view root is CodePathEscape, as a model
// must not be led out of its sandbox by a link it did not make.
func (f *FS) walk(p string, follow bool) (entry, *Error) {
	clean, err := shedfs.CleanViewPath(p)
	if err != nil {
		return entry{}, pathError(p, err)
	}
	cur, ferr := f.root()
	if ferr != nil {
		return entry{}, ferr
	}
	names := split(clean)
	links := 0
	for i := 0; i < len(names); i++ {
		next, ferr := f.child(cur, names[i])
		if ferr != nil {
			return entry{}, ferr
		}
		last := i == len(names)-1
		if next.rec != nil && next.rec.Mode&syscall.S_IFMT == syscall.S_IFLNK && (!last || follow) {
			if links++; links > maxSymlinks {
				return entry{}, errorf(CodeInvalidArgument, next.p, "too many levels of symbolic links")
			}
			target, e := f.v.Readlink(next.at, cur.at.Ino)
			if e != 0 {
				return entry{}, f.fail(e, next.p)
			}
			if strings.HasPrefix(target, "/") {
				return entry{}, errorf(CodePathEscape, next.p, "a symlink to %s, outside the view", target)
			}
			joined := path.Join(cur.p, target)
			if joined == ".." || strings.HasPrefix(joined, "../") {
				return entry{}, errorf(CodePathEscape, next.p, "a symlink to %s, which leads out of the view", target)
			}
			rest := append(split(strings.TrimPrefix(path.Clean("/"+joined), "/")), names[i+1:]...)
			names, i = rest, -1
			if cur, ferr = f.root(); ferr != nil {
				return entry{}, ferr
			}
			continue
		}
		cur = next
	}
	return cur, nil
}

// reach resolves p for a call that needs access to it: the token's grant
// is asked of the path as given before anything is looked up (so that a
// token learns nothing of what lies outside it, not even whether it
// exists), and again of where symlinks led.
func (f *FS) reach(p string, access acl.Access, op acl.Op, follow bool) (entry, *Error) {
	clean, err := shedfs.CleanViewPath(p)
	if err != nil {
		return entry{}, pathError(p, err)
	}
	if ferr := f.allow(access, clean, op, f.v.RootZone()); ferr != nil {
		return entry{}, ferr
	}
	e, ferr := f.walk(clean, follow)
	if ferr != nil {
		return entry{}, ferr
	}
	if e.p != clean {
		if ferr := f.allow(access, e.p, op, e.at.Zone); ferr != nil {
			return entry{}, ferr
		}
	}
	return e, nil
}

// parent resolves the directory p is in and p's last name, for a call
// that makes or removes p.
func (f *FS) parent(p string) (entry, string, *Error) {
	clean, err := shedfs.CleanViewPath(p)
	if err != nil {
		return entry{}, "", pathError(p, err)
	}
	if clean == "" {
		return entry{}, "", errorf(CodeInvalidArgument, "", "the view root itself cannot be made, moved or deleted")
	}
	dir, ferr := f.walk(path.Dir(clean), true)
	if ferr != nil {
		return entry{}, "", ferr
	}
	if !dir.groups && !dir.rec.IsDir() {
		return entry{}, "", errorf(CodeNotADirectory, dir.p, "not a directory")
	}
	return dir, path.Base(clean), nil
}

func split(clean string) []string {
	if clean == "" || clean == "." {
		return nil
	}
	return strings.Split(clean, "/")
}

func pathError(p string, err error) *Error {
	if e := AsError(err); e.Code == CodePathEscape {
		e.Path = p
		e.Message = "paths are relative to the view root (output/report.md), without .. that climbs out"
		return e
	}
	return errorf(CodeInvalidArgument, p, "%v", err)
}
