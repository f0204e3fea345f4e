package shedfs

import (
	"fmt"
	"strings"
	"syscall"
)

// ZoneKind names the policy family a subtree belongs to. It is stored in
// every inode so that a rule can be decided from the inode alone, without
// walking up to a root.
type ZoneKind uint8

// The zone kinds of docs/design.md, "Words". ZoneNone is never stored; it marks
// an unset value so that a zero Zone is recognisably invalid.
const (
	ZoneNone ZoneKind = iota
	ZonePrivate
	ZoneOutput
	ZoneUploads
	ZoneShare
	ZoneGroup
	// ZoneSession is the scratch tree of one session of a user (session.go).
	ZoneSession
)

var zoneKindNames = [...]string{"", "private", "output", "uploads", "share", "group", "session"}

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
	for k := ZonePrivate; k <= ZoneSession; k++ {
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

// The ownership modes of docs/design.md, "Rules".
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
