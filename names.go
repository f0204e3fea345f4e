package shedfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// MaxNameLen is the longest entry name, in bytes (NAME_MAX).
const MaxNameLen = 255

// MaxPrincipalLen is the longest user or group name, in bytes.
const MaxPrincipalLen = 64

// CheckName validates one entry name (one path component) and returns 0 if
// it may be created: EINVAL for "", ".", ".." or a name containing '/' or
// NUL; ENAMETOOLONG for more than MaxNameLen bytes. Any other byte,
// including invalid UTF-8, is allowed, as on Linux.
func CheckName(name string) syscall.Errno {
	switch {
	case name == "" || name == "." || name == "..":
		return syscall.EINVAL
	case len(name) > MaxNameLen:
		return syscall.ENAMETOOLONG
	case strings.ContainsAny(name, "/\x00"):
		return syscall.EINVAL
	}
	return 0
}

// CheckPrincipal validates a user or group name against
// [a-z0-9][a-z0-9_-]{0,63} and returns 0 or EINVAL.
func CheckPrincipal(name string) syscall.Errno {
	if name == "" || len(name) > MaxPrincipalLen {
		return syscall.EINVAL
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return syscall.EINVAL
		}
	}
	return 0
}

// Display shows a field that may hold what a user chose (a name, a path, a
// signature) to a person: "-" when empty, and Go-quoted ("a\nb") when it
// holds anything that could forge a row or a column or mislead a reader —
// control characters, tabs, invisible format characters such as bidi
// overrides (which show "rtl\u202etxt.exe" as "rtlexe.txt"), invalid
// UTF-8 — or could be mistaken for a quoted or empty field. It is the one
// format of such fields: the CLI's tables (the audit trail's among them)
// and the link server's folder pages use it.
func Display(s string) string {
	if s == "" {
		return "-"
	}
	if s == "-" || strings.HasPrefix(s, `"`) || !printable(s) {
		return strconv.Quote(s)
	}
	return s
}

// printable reports whether s is valid UTF-8 made only of printable
// characters and plain spaces.
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// ErrPathEscape is a path given to a door without a kernel (a tool call,
// a file API request, a token's root) that is absolute or climbs out of
// the view root with "..".
var ErrPathEscape = errors.New("the path leaves the view root: give a path relative to it, with no \"..\" that climbs out")

// CleanViewPath reads a path relative to a view root as the doors without
// a kernel take it: "." and empty components are dropped, so "" and "."
// are the root itself; an absolute path or any ".." is ErrPathEscape
// (even one that would come back in, "a/../b": a model that writes it
// meant something else); a component CheckName refuses for its length
// or a NUL is an error naming it. It returns the clean path, names
// joined by "/", "" for the root.
func CleanViewPath(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return "", ErrPathEscape
	}
	var names []string
	for name := range strings.SplitSeq(p, "/") {
		switch name {
		case "", ".":
			continue
		case "..":
			return "", ErrPathEscape
		}
		if e := CheckName(name); e != 0 {
			return "", fmt.Errorf("path %q: the name %s: %w", p, Display(name), e)
		}
		names = append(names, name)
	}
	return strings.Join(names, "/"), nil
}
