package acl

import (
	"syscall"

	"github.com/shedfs/shedfs"
)

// ReasonLinkUnnamed: making a link to an entry that has no name in any
// zone — a file kept in trash/, or one deleted while still open. A link
// opens an entry that is still in its maker's view, so it would answer
// 404 from the first request (EACCES).
const ReasonLinkUnnamed = "link_unnamed"

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

// Linkable is what, besides its zone and owner, decides whether an entry
// can be linked at all: whether it still has a name (a kept file in
// trash/ has none) and its content verdict.
type Linkable struct {
	Named   bool
	Content shedfs.Content
}

// NewLink decides making a link to e (reading user.shedfs.link in a view,
// shedfs link create): ShareLink, then nothing the link server would
// refuse from the first request — not an entry without a name, such as a
// file kept in trash/ (EACCES, link_unnamed), not a quarantined file
// (EACCES, infected). A pending file may be linked: it is served once its
// verdict is in.
func NewLink(a Actor, e Entry, l Linkable) Decision {
	if d := ShareLink(a, e); !d.Allowed() {
		return d
	}
	if !l.Named {
		return deny(syscall.EACCES, ReasonLinkUnnamed)
	}
	if l.Content.State == shedfs.ScanInfected {
		return deny(syscall.EACCES, ReasonInfected)
	}
	return Decision{}
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
