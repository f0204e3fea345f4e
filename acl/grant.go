package acl

import (
	"fmt"
	"path"
	"strings"
	"syscall"
)

// A token of the agent doors (MCP, the file API) is a grant, in the shape
// of a filesystem authority: a subject (the user, or one session of it,
// which the token names and the doors act as), a root within that
// subject's view, the kinds of access it carries, glob patterns that
// narrow it further, and the doors it may be used at. The view's own
// rules still apply below it: a grant only ever takes away.

// Access is a set of the kinds of access a grant carries.
type Access uint8

// The kinds of access. Each tool or API call needs one.
const (
	// AccessRead reads a file's bytes.
	AccessRead Access = 1 << iota
	// AccessList lists a directory and stats entries.
	AccessList
	// AccessWrite creates and writes files and directories.
	AccessWrite
	// AccessDelete moves entries to the trash, and restores them.
	AccessDelete
	// AccessMove renames and moves entries.
	AccessMove
	// AccessArchive packs and unpacks archives.
	AccessArchive
	// AccessMetadata changes modes, groups, links and locks.
	AccessMetadata
)

// AccessAll is every kind of access.
const AccessAll = AccessRead | AccessList | AccessWrite | AccessDelete | AccessMove | AccessArchive | AccessMetadata

var accessNames = []struct {
	a    Access
	name string
}{
	{AccessRead, "read"}, {AccessList, "list"}, {AccessWrite, "write"}, {AccessDelete, "delete"},
	{AccessMove, "move"}, {AccessArchive, "archive"}, {AccessMetadata, "metadata"},
}

// AccessNames lists the names ParseAccess takes, in their order.
func AccessNames() []string {
	out := make([]string, len(accessNames))
	for i, n := range accessNames {
		out[i] = n.name
	}
	return out
}

// ParseAccess reads a comma-separated list of access names ("read,list");
// "all" is every kind. An empty list is an error: a grant that allows
// nothing is a mistake.
func ParseAccess(s string) (Access, error) {
	var a Access
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if part == "all" {
			a |= AccessAll
			continue
		}
		found := false
		for _, n := range accessNames {
			if n.name == part {
				a |= n.a
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("access %q: not one of %s, all", part, strings.Join(AccessNames(), ", "))
		}
	}
	if a == 0 {
		return 0, fmt.Errorf("access %q: name at least one of %s, all", s, strings.Join(AccessNames(), ", "))
	}
	return a, nil
}

// String is the comma-separated names, "all" for every kind.
func (a Access) String() string {
	if a&AccessAll == AccessAll {
		return "all"
	}
	var names []string
	for _, n := range accessNames {
		if a&n.a != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}

// Grant is what a token allows, below the rules of the view it acts in.
type Grant struct {
	// Root is a directory of the view, as a clean relative path ("" for
	// the whole view): nothing outside it is reachable.
	Root string
	// Access is what the grant carries.
	Access Access
	// Allow, when not empty, are the only paths reachable; Deny are never
	// reachable, whatever Allow says. A pattern with no slash matches an
	// entry's name at any depth, one with a slash the path from the view
	// root (path.Match syntax); a pattern that matches a directory covers
	// everything below it.
	Allow, Deny []string
	// Doors are the doors ("mcp", "api") the token may be used at; empty
	// is every door.
	Doors []string
}

// ValidGrantPattern checks a glob pattern of Allow or Deny.
func ValidGrantPattern(p string) error {
	if p == "" || strings.HasPrefix(p, "/") {
		return fmt.Errorf("pattern %q: give a pattern relative to the view root, such as *.md or output/*", p)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("pattern %q: %v", p, err)
	}
	return nil
}

// CheckGrant decides whether a request at door that needs access to p, a
// clean path relative to the view root ("" is the root itself), stays
// within g. A refusal is EACCES with ReasonTokenScope (outside the root,
// the globs or the doors) or ReasonTokenAccess (a kind of access the
// grant does not carry).
//
// A directory above the root is reachable for listing only as far as the
// way down to the root: it is not; an agent given output/ as its root
// works with paths below output/.
func CheckGrant(g Grant, door string, access Access, p string) Decision {
	if len(g.Doors) > 0 && !containsString(g.Doors, door) {
		return deny(syscall.EACCES, ReasonTokenScope)
	}
	if g.Root != "" && p != g.Root && !strings.HasPrefix(p, g.Root+"/") {
		return deny(syscall.EACCES, ReasonTokenScope)
	}
	for _, pat := range g.Deny {
		if globCovers(pat, p) {
			return deny(syscall.EACCES, ReasonTokenScope)
		}
	}
	if len(g.Allow) > 0 && p != g.Root {
		ok := false
		for _, pat := range g.Allow {
			if globCovers(pat, p) {
				ok = true
				break
			}
		}
		if !ok {
			return deny(syscall.EACCES, ReasonTokenScope)
		}
	}
	if g.Access&access != access {
		return deny(syscall.EACCES, ReasonTokenAccess)
	}
	return Decision{}
}

// globCovers reports whether pat matches p or one of the directories
// above it.
func globCovers(pat, p string) bool {
	for q := p; q != "" && q != "."; q = path.Dir(q) {
		subject := q
		if !strings.Contains(pat, "/") {
			subject = path.Base(q)
		}
		if ok, _ := path.Match(pat, subject); ok {
			return true
		}
		if !strings.Contains(q, "/") {
			break
		}
	}
	return false
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
