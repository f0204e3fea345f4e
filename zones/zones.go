// Package zones is the layout of a view and the policy of each zone: the
// reserved names of a view root and the zones they lead to, what each zone
// kind allows, the default ownership mode of new entries, the symlink policy,
// the quota holder of a zone, name validation and which zones a user sees.
//
// The core (vfs) asks, zones and acl decide: every rule of docs/design.md,
// "What a view shows" and "Rules", lives in exactly one pure function here
// or in package acl, so no rule is implemented twice. Nothing in this
// package does I/O or keeps mutable state; it imports only the leaf
// package shedfs, for its types.
package zones

import (
	"fmt"
	"slices"
	"syscall"

	"github.com/shedfs/shedfs"
)

// The reserved names of a view root (docs/design.md, "What a view shows"). They always
// exist, and a user can neither create, remove, rename nor replace them.
const (
	NameOutput  = "output"
	NameUploads = "uploads"
	NameShare   = "share"
	NameGroups  = "groups"
	// NameTrash is the read-only trash/ of a view (docs/design.md,
	// "Trash and point-in-time restore"): the files removed or replaced in the zones the view
	// sees, by their original paths.
	NameTrash = "trash"
	// NameSnapshots is the read-only snapshots/ of a view: the user's
	// snapshots taken of it (README, "Snapshots"), one directory each.
	NameSnapshots = "snapshots"
)

// ReservedNames returns the reserved names of a view root, in the order a
// listing shows them. The slice is a fresh copy.
func ReservedNames() []string {
	return []string{NameOutput, NameUploads, NameShare, NameGroups, NameTrash, NameSnapshots}
}

// IsReserved reports whether name is reserved in a view root. The match is
// exact and case-sensitive, like every name in a Linux filesystem. Names
// are reserved only directly in the view root; "share" elsewhere is an
// ordinary name.
func IsReserved(name string) bool {
	switch name {
	case NameOutput, NameUploads, NameShare, NameGroups, NameTrash, NameSnapshots:
		return true
	}
	return false
}

// ReservedZone returns the zone that a reserved name of user's view root
// leads to. For NameGroups it returns the zero Zone and true: groups/ is a
// synthetic, read-only directory, not a zone; each of its children is
// GroupZone of one group. ok is false for a name that is not reserved.
func ReservedZone(user, name string) (z shedfs.Zone, ok bool) {
	switch name {
	case NameOutput:
		return OutputZone(user), true
	case NameUploads:
		return UploadsZone(user), true
	case NameShare:
		return ShareZone(), true
	case NameGroups, NameTrash:
		return shedfs.Zone{}, true
	}
	return shedfs.Zone{}, false
}

// PrivateZone is user's private tree, the root of user's view.
func PrivateZone(user string) shedfs.Zone {
	return shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: user}
}

// OutputZone is user's output/ folder.
func OutputZone(user string) shedfs.Zone {
	return shedfs.Zone{Kind: shedfs.ZoneOutput, Principal: user}
}

// UploadsZone is user's uploads/ folder.
func UploadsZone(user string) shedfs.Zone {
	return shedfs.Zone{Kind: shedfs.ZoneUploads, Principal: user}
}

// ShareZone is share/, common to every user.
func ShareZone() shedfs.Zone { return shedfs.Zone{Kind: shedfs.ZoneShare} }

// GroupZone is groups/<group>/.
func GroupZone(group string) shedfs.Zone {
	return shedfs.Zone{Kind: shedfs.ZoneGroup, Principal: group}
}

// HolderOf returns the quota holder a zone's usage is charged to (the user
// for private, output and uploads together; the group; or "share"). It is
// shedfs.HolderOf, repeated here so that callers find every zone rule in
// one package.
func HolderOf(z shedfs.Zone) shedfs.Holder { return shedfs.HolderOf(z) }

// Visible reports whether the view of user, a member of groups, can reach
// zone z by any path: user's own private, output, uploads and session
// zones, share, and the zone of each group in groups. Everything else — in
// particular any other user's zones — is unreachable. An invalid zone is
// never visible. Which of a user's sessions a view shows is the view's
// layout, not this rule (SessionReadonly is what it may do there).
func Visible(user string, groups []string, z shedfs.Zone) bool {
	switch z.Kind {
	case shedfs.ZonePrivate, shedfs.ZoneOutput, shedfs.ZoneUploads:
		return user != "" && z.Principal == user
	case shedfs.ZoneShare:
		return z.Principal == ""
	case shedfs.ZoneGroup:
		return z.Principal != "" && slices.Contains(groups, z.Principal)
	case shedfs.ZoneSession:
		owner, _ := shedfs.SplitSession(z.Principal)
		return user != "" && owner == user
	}
	return false
}

// Policy is what one zone kind allows. The zero Policy allows nothing.
type Policy struct {
	Kind shedfs.ZoneKind
	// Writable: data may be written, entries created, renamed, linked and
	// their attributes changed. False only for uploads.
	Writable bool
	// Removable: entries may be unlinked and directories removed. True for
	// every zone, uploads included.
	Removable bool
	// OwnModes: ownership modes (owner, group, owner_ro) apply and the
	// user.shedfs.mode and user.shedfs.owner xattrs may be set. True for
	// share and group zones only.
	OwnModes bool
	// DefaultMode is the ownership mode of a new entry: OwnModeNone where
	// OwnModes is false.
	DefaultMode shedfs.OwnMode
}

// Config holds the configurable parts of zone policy. The zero Config is
// the default of docs/design.md, "Rules": new entries in share and group
// zones get mode group, symlinks in share and group zones must stay in
// their zone.
type Config struct {
	// ShareDefault and GroupDefault are the ownership modes of new entries
	// in share/ and in group zones. OwnModeNone means the default, group.
	ShareDefault shedfs.OwnMode
	GroupDefault shedfs.OwnMode
	// Symlinks is the symlink policy (SymlinkPolicy.In says what it is in
	// each zone).
	Symlinks SymlinkPolicy
}

// DefaultConfig returns the default configuration, with every field spelled
// out.
func DefaultConfig() Config {
	return Config{
		ShareDefault: shedfs.OwnModeGroup,
		GroupDefault: shedfs.OwnModeGroup,
		Symlinks:     SymlinkSharedInZone,
	}
}

// Validate reports a configuration value that is out of range.
func (c Config) Validate() error {
	for _, m := range []struct {
		name string
		mode shedfs.OwnMode
	}{{"share default mode", c.ShareDefault}, {"group default mode", c.GroupDefault}} {
		if m.mode > shedfs.OwnModeOwnerRO {
			return fmt.Errorf("%s %v: %w", m.name, m.mode, syscall.EINVAL)
		}
	}
	if c.Symlinks > SymlinkDeny {
		return fmt.Errorf("symlink policy %v: %w", c.Symlinks, syscall.EINVAL)
	}
	return nil
}

// Policy returns the policy of zone kind k under c. An unknown kind, or
// ZoneNone, gets the zero Policy: nothing is writable or removable.
func (c Config) Policy(k shedfs.ZoneKind) Policy {
	switch k {
	case shedfs.ZonePrivate, shedfs.ZoneOutput, shedfs.ZoneSession:
		return Policy{Kind: k, Writable: true, Removable: true}
	case shedfs.ZoneUploads:
		return Policy{Kind: k, Removable: true}
	case shedfs.ZoneShare:
		return Policy{Kind: k, Writable: true, Removable: true, OwnModes: true, DefaultMode: orGroup(c.ShareDefault)}
	case shedfs.ZoneGroup:
		return Policy{Kind: k, Writable: true, Removable: true, OwnModes: true, DefaultMode: orGroup(c.GroupDefault)}
	}
	return Policy{Kind: k}
}

// PolicyOf returns the policy of zone kind k under the default Config. The
// parts that decide access (Writable, Removable, OwnModes) do not depend on
// the Config; only DefaultMode does.
func PolicyOf(k shedfs.ZoneKind) Policy { return Config{}.Policy(k) }

func orGroup(m shedfs.OwnMode) shedfs.OwnMode {
	if m == shedfs.OwnModeNone || m > shedfs.OwnModeOwnerRO {
		return shedfs.OwnModeGroup
	}
	return m
}

// EffectiveMode is the ownership mode that governs an entry with stored mode
// m in a zone of kind k: OwnModeNone where modes do not apply (whatever is
// stored), and group for an unset or unknown mode in a zone where they do.
func EffectiveMode(k shedfs.ZoneKind, m shedfs.OwnMode) shedfs.OwnMode {
	if !PolicyOf(k).OwnModes {
		return shedfs.OwnModeNone
	}
	return orGroup(m)
}
