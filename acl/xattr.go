package acl

import (
	"strings"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/zones"
)

// The in-band interface of docs/design.md, "Rules": xattrs every entry shows.
const (
	XattrPrefix = "user.shedfs."
	XattrOwner  = XattrPrefix + "owner"
	XattrMode   = XattrPrefix + "mode"
	XattrZone   = XattrPrefix + "zone"
)

// MaxXattrSpace is how many bytes of extended attributes one inode may
// hold, as shedfs.XattrCost counts them (names, values and a small
// overhead each): about what ext4 gives an inode, and small enough that
// the names always fit listxattr's 64 KiB.
const MaxXattrSpace = 64 * 1024

// AdmitXattr decides an inode's extended attributes going from before to
// after bytes (shedfs.XattrCost summed over them), charged to the holder
// whose usage and limit q gives: past MaxXattrSpace ENOSPC (xattr_space),
// past the byte quota EDQUOT (quota_bytes). A change that does not grow
// them is always admitted.
func AdmitXattr(q Quota, before, after int64) Decision {
	if after <= before {
		return Decision{}
	}
	if after > MaxXattrSpace {
		return deny(syscall.ENOSPC, ReasonXattrSpace)
	}
	return AdmitBytes(q.Usage, q.Limit, after-before)
}

// IsShedfsXattr reports whether name is in the user.shedfs. namespace,
// which shedfs computes from the entry and never stores as an ordinary
// xattr.
func IsShedfsXattr(name string) bool { return strings.HasPrefix(name, XattrPrefix) }

// XattrValue returns the value of a user.shedfs. xattr of e: the owner,
// the ownership mode (only in share and group zones) and the zone label
// (zone.Label: "private", "group:team-alpha", ...). It returns ENODATA for
// any other name, for an unset owner, for the mode outside share and group
// zones, and for everything on groups/. The caller checks Read first.
func XattrValue(e Entry, name string) (string, syscall.Errno) {
	if e.GroupsDir {
		return "", syscall.ENODATA
	}
	switch name {
	case XattrOwner:
		if e.Owner != "" {
			return e.Owner, 0
		}
	case XattrMode:
		if m := zones.EffectiveMode(e.Zone.Kind, e.Mode); m != shedfs.OwnModeNone {
			return m.String(), 0
		}
	case XattrZone:
		return e.Zone.Label(), 0
	}
	return "", syscall.ENODATA
}

// XattrNames lists the user.shedfs. xattrs e has, for listxattr.
func XattrNames(e Entry) []string {
	var names []string
	for _, n := range []string{XattrOwner, XattrMode, XattrZone} {
		if _, errno := XattrValue(e, n); errno == 0 {
			names = append(names, n)
		}
	}
	return names
}

// SetXattr decides setxattr(name, value) on e.
//
//   - user.shedfs.mode: SetMode.
//   - user.shedfs.owner: SetOwner.
//   - user.shedfs.zone and any other user.shedfs. name: EPERM
//     (xattr_readonly).
//   - any other name: an ordinary attribute change, decided as Setattr,
//     then by its namespace (XattrNamespace).
//
// In zones without ownership modes (private, output, uploads) the
// user.shedfs. xattrs are read-only: EPERM, since there is a single user
// and nothing to hand over.
func SetXattr(a Actor, e Entry, name, value string, isMember func(principal string) bool) Decision {
	switch {
	case name == XattrMode:
		return SetMode(a, e, value)
	case name == XattrOwner:
		return SetOwner(a, e, value, isMember)
	case name == XattrZone:
		return Check(a, OpSetZoneXattr, e)
	case IsShedfsXattr(name):
		return Check(a, OpSetZoneXattr, e)
	}
	if d := Check(a, OpSetattr, e); !d.Allowed() {
		return d
	}
	return XattrNamespace(name)
}

// The POSIX ACL attributes (linux/xattr.h).
const (
	XattrPosixACLAccess  = "system.posix_acl_access"
	XattrPosixACLDefault = "system.posix_acl_default"
)

// XattrNamespace decides the name of an ordinary xattr to store: user.*
// and trusted.* are stored; security.* and system.* (capabilities, ACLs)
// would mean something to the kernel that shedfs does not enforce, so they
// are refused (EOPNOTSUPP) rather than silently ignored. A POSIX ACL gets
// the same EOPNOTSUPP, but Unsupported (posix_acl_unsupported): that is
// what a filesystem without ACLs answers, and tools copying a file's ACL
// (sed -i, cp -p) expect it, so it is no refusal to count or audit. A
// name longer than shedfs.MaxXattrNameLen is ERANGE, as the kernel
// answers.
func XattrNamespace(name string) Decision {
	switch {
	case len(name) > shedfs.MaxXattrNameLen:
		return deny(syscall.ERANGE, ReasonNameTooLong)
	case strings.HasPrefix(name, "user."), strings.HasPrefix(name, "trusted."):
		return Decision{}
	case name == XattrPosixACLAccess, name == XattrPosixACLDefault:
		return Decision{Errno: syscall.EOPNOTSUPP, Reason: ReasonPosixACL, Unsupported: true}
	}
	return deny(syscall.EOPNOTSUPP, ReasonXattrNamespace)
}

// RemoveXattr decides removexattr(name) on e: the user.shedfs. xattrs
// cannot be removed (EPERM); others are decided as Setattr.
func RemoveXattr(a Actor, e Entry, name string) Decision {
	if IsShedfsXattr(name) {
		return Check(a, OpSetZoneXattr, e)
	}
	return Check(a, OpSetattr, e)
}

// SetMode decides setting e's ownership mode to value ("owner", "group",
// "owner_ro"): only e's owner, in any mode, owner_ro included (so the
// owner can set the mode back); anyone else EPERM (owner_only); an unknown
// value EINVAL (xattr_bad_value), checked after permission.
func SetMode(a Actor, e Entry, value string) Decision {
	if d := Check(a, OpSetMode, e); !d.Allowed() {
		return d
	}
	if _, err := shedfs.ParseOwnMode(value); err != nil {
		return deny(syscall.EINVAL, ReasonXattrBadValue)
	}
	return Decision{}
}

// SetOwner decides e's owner handing e over to principal value: only the
// owner, not on owner_ro (EPERM); value must be a well-formed principal
// name (EINVAL, xattr_bad_value) for which isMember reports true (EINVAL,
// not_member). isMember answers for e's zone: a member of the group for a
// group zone, any existing user for share. A nil isMember admits nobody.
func SetOwner(a Actor, e Entry, value string, isMember func(principal string) bool) Decision {
	if d := Check(a, OpSetOwner, e); !d.Allowed() {
		return d
	}
	if shedfs.CheckPrincipal(value) != 0 {
		return deny(syscall.EINVAL, ReasonXattrBadValue)
	}
	if isMember == nil || !isMember(value) {
		return deny(syscall.EINVAL, ReasonNotMember)
	}
	return Decision{}
}
