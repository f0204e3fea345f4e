package metadata

import (
	"fmt"
	"strings"
	"syscall"
	"time"
)

// ZoneKind names the policy family a subtree belongs to. It is stored in
// every inode so that a rule can be decided from the inode alone, without
// walking up to a root.
type ZoneKind uint8

// The zone kinds of DESIGN.md section 1. ZoneNone is never stored; it marks
// an unset value so that a zero Zone is recognisably invalid.
const (
	ZoneNone ZoneKind = iota
	ZonePrivate
	ZoneOutput
	ZoneUploads
	ZoneShare
	ZoneGroup
)

var zoneKindNames = [...]string{"", "private", "output", "uploads", "share", "group"}

// String returns the kind's name as users see it ("private", "group", ...).
func (k ZoneKind) String() string {
	if int(k) < len(zoneKindNames) {
		return zoneKindNames[k]
	}
	return fmt.Sprintf("zone(%d)", uint8(k))
}

// Zone identifies one subtree with one policy. Principal is the user for the
// per-user zones (private, output, uploads), the group for ZoneGroup, and
// empty for ZoneShare, so that two users' private trees are distinct zones.
type Zone struct {
	Kind      ZoneKind
	Principal string
}

// Label is the zone as a view shows it in user.shedfs.zone and in metrics:
// "private", "output", "uploads", "share" or "group:<name>". It never names
// another user, so it is safe to show to anyone who can see the inode.
func (z Zone) Label() string {
	if z.Kind == ZoneGroup {
		return "group:" + z.Principal
	}
	return z.Kind.String()
}

// String is the unambiguous form used in logs, audit records and keys:
// "private:alice", "share", "group:team-alpha".
func (z Zone) String() string {
	if z.Kind == ZoneShare || z.Principal == "" {
		return z.Kind.String()
	}
	return z.Kind.String() + ":" + z.Principal
}

// ParseZone is the inverse of Zone.String.
func ParseZone(s string) (Zone, error) {
	kind, principal, _ := strings.Cut(s, ":")
	for k := ZonePrivate; k <= ZoneGroup; k++ {
		if k.String() == kind {
			z := Zone{Kind: k, Principal: principal}
			if (k == ZoneShare) != (principal == "") {
				return Zone{}, fmt.Errorf("zone %q: %w", s, syscall.EINVAL)
			}
			return z, nil
		}
	}
	return Zone{}, fmt.Errorf("unknown zone %q: %w", s, syscall.EINVAL)
}

// OwnMode is the ownership mode of an entry in a shared zone (share or a
// group): who besides reading may change or delete it. Entries of the
// per-user zones carry OwnModeNone: their single user decides everything.
type OwnMode uint8

// The ownership modes of DESIGN.md section 3.
const (
	OwnModeNone OwnMode = iota
	OwnModeOwner
	OwnModeGroup
	OwnModeOwnerRO
)

var ownModeNames = [...]string{"", "owner", "group", "owner_ro"}

// String returns the mode as user.shedfs.mode shows it.
func (m OwnMode) String() string {
	if int(m) < len(ownModeNames) {
		return ownModeNames[m]
	}
	return fmt.Sprintf("ownmode(%d)", uint8(m))
}

// ParseOwnMode parses the value a user writes to user.shedfs.mode.
func ParseOwnMode(s string) (OwnMode, error) {
	for m := OwnModeOwner; m <= OwnModeOwnerRO; m++ {
		if m.String() == s {
			return m, nil
		}
	}
	return OwnModeNone, fmt.Errorf("unknown ownership mode %q: %w", s, syscall.EINVAL)
}

// Inode is the stored record of one file, directory, symlink or fifo. It
// carries its zone and ownership from creation on, so policy never needs a
// path.
type Inode struct {
	Ino    uint64
	Mode   uint32 // file type (syscall.S_IFMT bits) and permission bits
	Uid    uint32
	Gid    uint32
	Nlink  uint32
	Size   uint64
	Rdev   uint32
	Atime  time.Time
	Mtime  time.Time
	Ctime  time.Time
	Parent uint64 // directories only: the one directory holding it (0 for a zone root)
	Target string // symlinks only: the link text as the user wrote it
	// Inline is set for a regular file whose content lives in the store
	// (ReadInline) instead of a blob: small files cost no host file. A
	// file stops being inline when it grows past what the data path
	// keeps inline, and never becomes inline again.
	Inline bool

	Zone    Zone
	Owner   string // principal of the view that created the entry
	OwnMode OwnMode
}

// IsDir reports whether the inode is a directory.
func (n *Inode) IsDir() bool { return n.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// IsRegular reports whether the inode is a regular file, the only kind with
// a blob.
func (n *Inode) IsRegular() bool { return n.Mode&syscall.S_IFMT == syscall.S_IFREG }

// DirEntry is one name in a directory listing.
type DirEntry struct {
	Name string
	Ino  uint64
	Mode uint32 // file type bits only
}

// Roots holds the root inode of every zone of one user, so a view can be
// assembled without scanning.
type Roots struct {
	Private uint64
	Output  uint64
	Uploads uint64
}

// User is a principal that has a view.
type User struct {
	Name  string
	Roots Roots
	// Uid and Gid, when non-zero, are presented as the owner of every entry
	// in this user's view (DESIGN.md section 3, like bindfs --force-user).
	Uid, Gid uint32
	Created  time.Time
}

// Group is a principal whose members share a zone.
type Group struct {
	Name    string
	Root    uint64
	Members []string
	Created time.Time
}

// Holder names who a quota is charged to: "user:alice", "group:team-alpha"
// or "share".
type Holder string

// HolderOf returns the quota holder of a zone: the user for the per-user
// zones, the group for a group zone, "share" for share.
func HolderOf(z Zone) Holder {
	switch z.Kind {
	case ZonePrivate, ZoneOutput, ZoneUploads:
		return Holder("user:" + z.Principal)
	case ZoneGroup:
		return Holder("group:" + z.Principal)
	default:
		return Holder("share")
	}
}

// Usage is what a holder has stored: bytes (logical sizes rounded up to
// ChargeUnit) and inodes.
type Usage struct {
	Bytes  int64
	Inodes int64
}

// Limit is a holder's quota. Zero means unlimited.
type Limit struct {
	Bytes  int64
	Inodes int64
}

// ChargeUnit is the granularity of byte charges: a file's logical size
// rounded up to it, so sparse files and extending truncates count.
const ChargeUnit = 4096

// Charge is the number of bytes a regular file of the given size is charged.
func Charge(size uint64) int64 {
	return int64((size + ChargeUnit - 1) / ChargeUnit * ChargeUnit)
}
