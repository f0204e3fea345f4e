package agentfs

import (
	"fmt"
	"path"
	"sort"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// Info is what a stat answers of one entry.
type Info struct {
	Path string `json:"path"`
	// Type is file, directory, symlink or other.
	Type  string    `json:"type"`
	Size  uint64    `json:"size"`
	Mode  string    `json:"mode"`
	MTime time.Time `json:"mtime"`
	// Owner is the user who made it; Ownership its mode (owner, group,
	// open...): who else may change it.
	Owner     string `json:"owner,omitempty"`
	Ownership string `json:"ownership,omitempty"`
	// Zone is the zone it is in (private, output, uploads, share, group,
	// session).
	Zone   string `json:"zone"`
	Target string `json:"target,omitempty"`
	// EditLockedBy is the holder of an edit lock on it, if any.
	EditLockedBy string `json:"edit_locked_by,omitempty"`
	// SHA256 is a regular file's digest when already known (a stat
	// never computes one: lock_open does); Scan its scan state
	// (clean, pending, unscanned, infected:<signature>, error:<why>),
	// as user.shedfs.scan shows it. Stat answers them, List does not.
	SHA256 string `json:"sha256,omitempty"`
	Scan   string `json:"scan,omitempty"`
}

func typeOf(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return "file"
	case syscall.S_IFDIR:
		return "directory"
	case syscall.S_IFLNK:
		return "symlink"
	}
	return "other"
}

func (f *FS) info(e entry) Info {
	if e.groups {
		return Info{Path: e.p, Type: "directory", Mode: "0555", Zone: "groups"}
	}
	in := Info{
		Path: e.p, Type: typeOf(e.rec.Mode), Size: e.rec.Size, Mode: fmt.Sprintf("%04o", e.rec.Mode&07777),
		MTime: e.rec.Mtime, Owner: e.rec.Owner, Ownership: e.rec.OwnMode.String(), Zone: e.rec.Zone.Kind.String(),
		Target: e.rec.Target,
	}
	if in.Type == "directory" {
		in.Size = 0
	}
	if l := f.v.Core().EditLockOf(e.rec.Ino); l != nil {
		in.EditLockedBy = l.User
		if l.Session != "" {
			in.EditLockedBy += "@" + l.Session
		}
	}
	return in
}

// Stat answers what p is, without following a symlink at its end.
func (f *FS) Stat(p string) (Info, error) {
	e, err := f.reach(p, acl.AccessList, acl.OpRead, false)
	if err != nil {
		return Info{}, err
	}
	in := f.info(e)
	if !e.groups && e.rec.IsRegular() {
		// What is known only: a failure to read it leaves them out.
		if c, err := f.v.Core().ContentOf(e.rec.Ino, e.rec.Zone); err == nil {
			in.SHA256, in.Scan = c.SHA256, c.ScanLabel()
		}
	}
	return in, nil
}

// Listing is a directory's entries, cut at a bound.
type Listing struct {
	Path    string `json:"path"`
	Entries []Info `json:"entries"`
	// Truncated says the listing was cut at the limit: list a deeper
	// directory, or with a higher limit, for the rest.
	Truncated bool `json:"truncated,omitempty"`
}

// List answers the entries of directory p and, to depth (1: only p's
// own), of the directories below, at most limit entries in all, in name
// order, directories before what is in them. trash/ is not listed (the
// trash tools show it).
func (f *FS) List(p string, depth, limit int) (*Listing, error) {
	if depth < 1 {
		depth = 1
	}
	if limit < 1 {
		return nil, errorf(CodeInvalidArgument, p, "limit must be at least 1")
	}
	dir, err := f.reach(p, acl.AccessList, acl.OpRead, true)
	if err != nil {
		return nil, err
	}
	if !dir.groups && !dir.rec.IsDir() {
		return nil, errorf(CodeNotADirectory, dir.p, "not a directory: stat it, or read it")
	}
	out := &Listing{Path: dir.p, Entries: []Info{}}
	var walkDir func(d entry, level int) *Error
	walkDir = func(d entry, level int) *Error {
		names, ferr := f.names(d)
		if ferr != nil {
			return ferr
		}
		for _, name := range names {
			ch, ferr := f.child(d, name)
			if ferr != nil {
				if ferr.Code == CodeNotFound {
					continue // gone meanwhile, or the trash
				}
				return ferr
			}
			if f.grant != nil && !acl.CheckGrant(*f.grant, f.v.Door(), acl.AccessList, ch.p).Allowed() {
				continue // outside the token: not shown, as the view hides what a user may not see
			}
			if len(out.Entries) >= limit {
				out.Truncated = true
				return nil
			}
			out.Entries = append(out.Entries, f.info(ch))
			if level < depth && (ch.groups || ch.rec.IsDir()) {
				if ferr := walkDir(ch, level+1); ferr != nil && ferr.Code != CodePermissionDenied {
					return ferr
				}
				if out.Truncated {
					return nil
				}
			}
		}
		return nil
	}
	if ferr := walkDir(dir, 1); ferr != nil {
		return nil, ferr
	}
	return out, nil
}

// names are the names in d, sorted, without . and .. and trash/.
func (f *FS) names(d entry) ([]string, *Error) {
	var names []string
	if d.groups {
		for _, g := range f.v.Groups() {
			names = append(names, g.Name)
		}
	} else {
		ents, e := f.v.List(d.at, 0)
		if e != 0 {
			return nil, f.fail(e, d.p)
		}
		for _, de := range ents {
			if de.Name == "." || de.Name == ".." || d.at.Ino == f.v.Root() && de.Name == "trash" {
				continue
			}
			names = append(names, de.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// Mkdir makes directory p, and with parents the missing directories
// above it (an existing directory is then no error).
func (f *FS) Mkdir(p string, parents bool) (Info, error) {
	clean, err := shedfs.CleanViewPath(p)
	if err != nil {
		return Info{}, pathError(p, err)
	}
	if ferr := f.allow(acl.AccessWrite, clean, acl.OpCreate, f.v.RootZone()); ferr != nil {
		return Info{}, ferr
	}
	if parents {
		if e, ferr := f.walk(clean, true); ferr == nil {
			if e.groups || e.rec.IsDir() {
				return f.info(e), nil
			}
			return Info{}, errorf(CodeExists, e.p, "exists and is not a directory")
		}
		if dir := path.Dir(clean); dir != "." {
			if _, err := f.Mkdir(dir, true); err != nil {
				return Info{}, err
			}
		}
	}
	dir, name, ferr := f.parent(clean)
	if ferr != nil {
		return Info{}, ferr
	}
	if err := f.allow(acl.AccessWrite, clean, acl.OpCreate, dir.at.Zone); err != nil {
		return Info{}, err
	}
	if dir.groups {
		return Info{}, f.fail(f.v.RefuseGroups(acl.OpCreate, name), clean)
	}
	rec, _, e := f.v.Mkdir(f.caller, dir.at, name, 0o755)
	if e != 0 {
		return Info{}, f.fail(e, clean)
	}
	return f.info(entry{at: f.at(rec.Ino, rec.Zone, clean), rec: rec, p: clean}), nil
}

// Delete moves p to the trash (a directory with what is in it when
// recursive; an empty one otherwise), as rm does in a view.
func (f *FS) Delete(p string, recursive bool) error {
	if clean, err := shedfs.CleanViewPath(p); err == nil {
		if ferr := f.allow(acl.AccessDelete, clean, acl.OpUnlink, f.v.RootZone()); ferr != nil {
			return ferr
		}
	}
	dir, name, ferr := f.parent(p)
	if ferr != nil {
		return ferr
	}
	e, ferr := f.child(dir, name)
	if ferr != nil {
		return ferr
	}
	if err := f.allow(acl.AccessDelete, e.p, acl.OpUnlink, e.at.Zone); err != nil {
		return err
	}
	if dir.groups || e.groups {
		return f.fail(f.v.RefuseGroups(acl.OpUnlink, name), e.p)
	}
	if !e.rec.IsDir() {
		if _, e := f.v.Remove(dir.at, acl.OpUnlink, name); e != 0 {
			return f.fail(e, path.Join(dir.p, name))
		}
		return nil
	}
	if recursive {
		names, ferr := f.names(e)
		if ferr != nil {
			return ferr
		}
		for _, n := range names {
			if err := f.Delete(path.Join(e.p, n), true); err != nil {
				return err
			}
		}
	}
	if _, e := f.v.Remove(dir.at, acl.OpRmdir, name); e != 0 {
		return f.fail(e, path.Join(dir.p, name))
	}
	return nil
}

// Move renames src to dst; replace allows an existing dst to go (to the
// trash). Across zones a view answers EXDEV: Move says so, and the
// caller may copy instead (the tool does, and says it did).
func (f *FS) Move(src, dst string, replace bool) (Info, error) {
	for _, p := range []string{src, dst} {
		if clean, err := shedfs.CleanViewPath(p); err == nil {
			if ferr := f.allow(acl.AccessMove, clean, acl.OpRename, f.v.RootZone()); ferr != nil {
				return Info{}, ferr
			}
		}
	}
	sdir, sname, ferr := f.parent(src)
	if ferr != nil {
		return Info{}, ferr
	}
	ddir, dname, ferr := f.parent(dst)
	if ferr != nil {
		return Info{}, ferr
	}
	sp, dp := path.Join(sdir.p, sname), path.Join(ddir.p, dname)
	for _, p := range []struct {
		p string
		a acl.Access
	}{{sp, acl.AccessMove}, {dp, acl.AccessMove}} {
		if err := f.allow(p.a, p.p, acl.OpRename, sdir.at.Zone); err != nil {
			return Info{}, err
		}
	}
	var flags uint32
	if !replace {
		flags = metadata.RenameNoReplace
	}
	if sdir.groups {
		return Info{}, f.fail(f.v.RefuseGroups(acl.OpRename, sname), sp)
	}
	to := ddir.at // groups/ is vfs.GroupsIno, where Rename refuses
	if _, e := f.v.Rename(sdir.at, sname, to, dname, flags); e != 0 {
		if e == syscall.EXDEV {
			return Info{}, &Error{Code: CodeInvalidArgument, Path: sp, Rule: "cross_zone",
				Message: "source and destination are in different zones, which a move cannot cross: copy, then delete the source"}
		}
		return Info{}, f.fail(e, sp)
	}
	return f.Stat(dp)
}
