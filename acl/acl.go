// Package acl decides every sandbox rule of docs/design.md, "Rules": given the
// view's principal (an Actor), the entry or directory concerned (an Entry:
// zone, owner, ownership mode) and the operation, it returns a Decision —
// allow, or deny with the errno the kernel carries and a Reason an operator
// reads. It also admits quota charges and file sizes.
//
// The FUSE layer asks, zones and acl decide: fusefs calls one function per
// callback (Create, Write, Rename, SetXattr, ...) and acts on the Decision
// — returns Errno, counts Reason in shedfs_denials_total and writes it to
// the audit trail — so no rule is implemented twice. Everything here is a
// pure function: no I/O, no global mutable state.
//
// Checks run in a fixed order, so that the most fundamental reason wins:
// name validity, visibility, structure (groups/, reserved root names, zone
// roots), cross-zone links and renames, zone policy (uploads), the mode of
// the directory whose entries change, the file type of a new entry, the
// mode of the entry itself, size, and quota last, so that a denied call
// never reaches quota admission.
package acl

import (
	"strconv"
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/zones"
)

// Decision is the answer to one question. The zero Decision allows.
type Decision struct {
	// Errno is 0 to allow, else what the caller gets.
	Errno syscall.Errno
	// Reason is empty to allow, else one of the Reason constants: a short,
	// stable snake_case rule name for metrics labels and the audit trail.
	Reason string
	// Unsupported marks an Errno that is the ordinary answer of a
	// filesystem without the feature asked for (ENOTSUP for a POSIX ACL),
	// not the refusal of a rule: tools expect it and carry on (sed -i,
	// cp -p), so a door returns the Errno but neither counts nor audits
	// it, which would be noise in shedfs_denials_total and the trail.
	Unsupported bool
}

// Allowed reports whether the decision allows the operation.
func (d Decision) Allowed() bool { return d.Errno == 0 }

// Refused reports whether the decision is the refusal of a rule, which
// every door counts and audits: not allowed, and not Unsupported.
func (d Decision) Refused() bool { return d.Errno != 0 && !d.Unsupported }

// Err returns nil to allow, else the Errno (as an error, for errors.Is).
func (d Decision) Err() error {
	if d.Errno == 0 {
		return nil
	}
	return d.Errno
}

// String is "allow" or "<reason>: <errno text>".
func (d Decision) String() string {
	if d.Errno == 0 {
		return "allow"
	}
	r := d.Reason
	if r == "" {
		r = "errno_" + strconv.Itoa(int(d.Errno))
	}
	return r + ": " + d.Errno.Error()
}

func deny(e syscall.Errno, reason string) Decision { return Decision{Errno: e, Reason: reason} }

// The reasons a Decision can carry: a bounded set, safe as a Prometheus
// label value. Each names the rule that denied.
const (
	// ReasonUploadsReadonly: writing, creating, renaming or changing
	// attributes in uploads/ (EACCES).
	ReasonUploadsReadonly = "uploads_readonly"
	// ReasonOwnerOnly: an entry in mode owner changed by someone other than
	// its owner (EACCES for write/truncate, EPERM otherwise); also setting
	// user.shedfs.mode or user.shedfs.owner by a non-owner in any mode (EPERM).
	ReasonOwnerOnly = "owner_only"
	// ReasonOwnerRO: anything but reading an owner_ro entry, owner included,
	// except its owner setting the mode back (EPERM).
	ReasonOwnerRO = "owner_ro"
	// ReasonDirMode: adding, removing or renaming entries in a directory
	// whose mode forbids the actor — owner and not the owner, or owner_ro
	// (EACCES).
	ReasonDirMode = "dir_mode"
	// ReasonCrossZone: rename or hard link between zones (EXDEV).
	ReasonCrossZone = "cross_zone"
	// ReasonSymlinkPolicy: a symlink refused by the symlink policy (EPERM).
	ReasonSymlinkPolicy = "symlink_policy"
	// ReasonReservedName: removing, renaming, replacing (EPERM) or creating
	// (EEXIST) a reserved name of the view root, or changing a zone root
	// itself (EPERM).
	ReasonReservedName = "reserved_name"
	// ReasonGroupsReadonly: any change in the synthetic groups/ directory
	// (EACCES).
	ReasonGroupsReadonly = "groups_readonly"
	// ReasonQuotaBytes: a write or truncate past the holder's byte quota
	// (EDQUOT).
	ReasonQuotaBytes = "quota_bytes"
	// ReasonQuotaInodes: a create past the holder's inode quota (EDQUOT).
	ReasonQuotaInodes = "quota_inodes"
	// ReasonFileTooBig: a write or truncate past the max file size (EFBIG).
	ReasonFileTooBig = "file_too_big"
	// ReasonNotMember: a group zone of a group the actor is not in (EACCES),
	// or user.shedfs.owner set to a non-member of the zone (EINVAL).
	ReasonNotMember = "not_member"
	// ReasonNotVisible: an entry of another user's private, output or
	// uploads zone, or of no valid zone (ENOENT, so nothing leaks). A view
	// never reaches one; this is defense in depth.
	ReasonNotVisible = "not_visible"
	// ReasonNameTooLong: a name longer than 255 bytes, or a symlink target
	// longer than 4095 (ENAMETOOLONG).
	ReasonNameTooLong = "name_too_long"
	// ReasonBadName: an empty name, ".", "..", or one containing '/' or NUL;
	// an empty symlink target or one containing NUL (EINVAL).
	ReasonBadName = "bad_name"
	// ReasonXattrReadonly: setting or removing user.shedfs.zone, any other
	// user.shedfs.* name, or user.shedfs.mode/owner in a zone without
	// ownership modes (EPERM).
	ReasonXattrReadonly = "xattr_readonly"
	// ReasonXattrBadValue: an unknown mode or a malformed principal name
	// written to user.shedfs.mode or user.shedfs.owner (EINVAL).
	ReasonXattrBadValue = "xattr_bad_value"
	// ReasonDeviceNode: mknod of a character or block device (EPERM): a
	// sandbox hands out no devices.
	ReasonDeviceNode = "device_node"
	// ReasonXattrNamespace: setting an xattr outside user.* and trusted.*
	// (EOPNOTSUPP): security.* and system.* would mean something to the
	// kernel (capabilities, ACLs) that shedfs does not enforce.
	ReasonXattrNamespace = "xattr_namespace"
	// ReasonPosixACL: setting a POSIX ACL (system.posix_acl_access or
	// system.posix_acl_default) (EOPNOTSUPP): views have no ACLs, and
	// this is the answer any filesystem mounted without them gives. The
	// Decision is Unsupported: never counted nor audited, so it is not in
	// Reasons.
	ReasonPosixACL = "posix_acl_unsupported"
	// ReasonPassthroughReaders: opening for writing a file that the same
	// view holds open for passthrough reading (ETXTBSY), which the kernel
	// would otherwise fail with EIO or let bypass the per-write checks.
	ReasonPassthroughReaders = "passthrough_readers"
	// ReasonXattrSpace: the extended attributes of one inode would pass
	// MaxXattrSpace (ENOSPC, as ext4 answers when an inode's attribute
	// block is full).
	ReasonXattrSpace = "xattr_space"
	// ReasonAllocateMode: an fallocate mode that would store blocks past
	// the file's size, which quotas do not see (FALLOC_FL_KEEP_SIZE), or
	// that moves data (collapse, insert, unshare) (EOPNOTSUPP).
	ReasonAllocateMode = "allocate_mode"
	// ReasonStoreFull: the disk that holds the store has less free space
	// or fewer free inodes than the daemon keeps for its metadata
	// (ENOSPC). Deletes are never refused for it.
	ReasonStoreFull = "store_full"
	// ReasonTrashReadonly: creating anything in a view's trash/, or
	// writing, truncating or changing a file kept there (EACCES).
	ReasonTrashReadonly = "trash_readonly"
	// ReasonSnapshotReadonly: creating, writing or changing anything in
	// a view's snapshots/: a snapshot is frozen (EROFS).
	ReasonSnapshotReadonly = "snapshot_readonly"
	// ReasonSessionReadonly: changing a session's scratch tree from
	// anywhere but that session's own view (the main view shows it
	// read-only under sessions/ID) (EACCES).
	ReasonSessionReadonly = "session_readonly"
	// ReasonTokenScope: a request of an agent door outside its token's
	// root, its allow and deny patterns or its doors (EACCES).
	ReasonTokenScope = "token_scope"
	// ReasonTokenAccess: a request of an agent door that needs a kind of
	// access its token does not carry, a write with a read-only token
	// (EACCES).
	ReasonTokenAccess = "token_access"
	// ReasonTokenInvalid: a request of an agent door whose bearer token is
	// malformed, unknown, revoked, expired, for another door, has a wrong
	// secret, or outlived its user or session (HTTP 401; audited as
	// EACCES, op authenticate).
	ReasonTokenInvalid = "token_invalid"
)

// Reasons returns every reason a refusal (Decision.Refused) can carry,
// for pre-registering metric label values. The slice is a fresh copy.
func Reasons() []string {
	return []string{
		ReasonUploadsReadonly, ReasonOwnerOnly, ReasonOwnerRO, ReasonDirMode,
		ReasonCrossZone, ReasonSymlinkPolicy, ReasonReservedName,
		ReasonGroupsReadonly, ReasonQuotaBytes, ReasonQuotaInodes,
		ReasonFileTooBig, ReasonNotMember, ReasonNotVisible,
		ReasonNameTooLong, ReasonBadName, ReasonXattrReadonly,
		ReasonXattrBadValue, ReasonDeviceNode, ReasonXattrNamespace,
		ReasonPassthroughReaders,
		ReasonXattrSpace, ReasonAllocateMode,
		ReasonStoreFull,
		ReasonScanPending, ReasonInfected,
		ReasonTrashReadonly,
		ReasonSessionReadonly,
		ReasonLockLost,
		ReasonLinkUnnamed,
		ReasonTokenScope, ReasonTokenAccess, ReasonTokenInvalid,
		ReasonEditLocked,
		ReasonArchiveEscape, ReasonArchiveBomb,
	}
}

// Op is the kind of operation asked about. Its String is a bounded metrics
// label.
type Op uint8

// The operations. OpCreate covers create, mkdir and mknod; OpSetattr covers
// chmod, chown, utimens and ordinary xattrs; OpRename is asked for both
// sides.
const (
	OpRead Op = iota
	OpWrite
	OpTruncate
	OpSetattr
	OpCreate
	OpUnlink
	OpRmdir
	OpRename
	OpLink
	OpSetMode
	OpSetOwner
	OpSetZoneXattr
	OpSymlink
	// OpLookup is resolving a name, which the kernel does before any
	// create, rename or link: a name refused there is refused for them.
	OpLookup
	// OpLock is taking a file lock (flock, fcntl, OFD).
	OpLock
)

var opNames = [...]string{"read", "write", "truncate", "setattr", "create", "unlink", "rmdir", "rename", "link", "set_mode", "set_owner", "set_zone_xattr", "symlink", "lookup", "lock"}

// String returns the operation's snake_case name.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op_" + strconv.Itoa(int(o))
}

// Actor is the principal a view was mounted for — never the uid of the
// calling process — with the groups it currently belongs to.
type Actor struct {
	User   string
	Groups []string
	// Session is the session whose view acts ("" for the user's main
	// view): only it may change the session's scratch tree.
	Session string
}

// Entry is what a decision needs to know about one file or directory.
type Entry struct {
	Zone  shedfs.Zone
	Owner string
	Mode  shedfs.OwnMode
	Dir   bool
	// Root marks the root directory of a zone: the view root (private),
	// output/, uploads/, share/, groups/<g>/.
	Root bool
	// GroupsDir marks the synthetic groups/ directory of a view; the other
	// fields are then ignored.
	GroupsDir bool
}

// EntryOf describes a stored inode. An inode is a zone root when it is a
// directory without a parent (shedfs.Inode.Parent == 0).
func EntryOf(n *shedfs.Inode) Entry {
	return Entry{
		Zone:  n.Zone,
		Owner: n.Owner,
		Mode:  n.OwnMode,
		Dir:   n.IsDir(),
		Root:  n.IsDir() && n.Parent == 0,
	}
}

// GroupsDir describes the synthetic groups/ directory of a view.
func GroupsDir() Entry { return Entry{Dir: true, GroupsDir: true} }

// ViewRoot reports whether e is the root of a view (the private zone's
// root, or a session's scratch root), where the reserved names live.
func (e Entry) ViewRoot() bool {
	return e.Root && !e.GroupsDir && zones.ViewRootZone(e.Zone.Kind)
}

// sharedRoot reports whether e is the root of share/ or of a group zone:
// a directory every member relies on, which nobody owns.
func (e Entry) sharedRoot() bool {
	return e.Root && !e.GroupsDir && zones.PolicyOf(e.Zone.Kind).OwnModes
}

func isOwner(a Actor, e Entry) bool { return a.User != "" && a.User == e.Owner }
