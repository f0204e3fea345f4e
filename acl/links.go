package acl

import "syscall"

// The in-band names of share-by-link (docs/design.md, "Share by link"):
// reading XattrLink makes a new link to the entry; XattrLinkTTL sets, for
// the links the view makes to it afterwards, how long they live.
const (
	XattrLink    = XattrPrefix + "link"
	XattrLinkTTL = XattrLink + ".ttl"
)

// IsLinkXattr reports whether name is one of the share-by-link xattrs,
// which the FUSE layer answers apart from the computed ones.
func IsLinkXattr(name string) bool { return name == XattrLink || name == XattrLinkTTL }

// ShareLink decides making a link to e, and serving one: a link opens
// only what its maker can read in their view now, so it is Read; the
// synthetic groups/ directory, which no store record backs, cannot be
// linked (EPERM, xattr_readonly).
func ShareLink(a Actor, e Entry) Decision {
	if e.GroupsDir {
		return deny(syscall.EPERM, ReasonXattrReadonly)
	}
	return Read(a, e)
}

// SetLinkTTL decides setting user.shedfs.link.ttl on e to a value that
// parsed as a lifetime (valid) or did not: ShareLink first, then EINVAL
// (xattr_bad_value) for a bad value.
func SetLinkTTL(a Actor, e Entry, valid bool) Decision {
	if d := ShareLink(a, e); !d.Allowed() {
		return d
	}
	if !valid {
		return deny(syscall.EINVAL, ReasonXattrBadValue)
	}
	return Decision{}
}
