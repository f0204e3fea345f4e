package zones

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/shedfs/shedfs"
)

// SymlinkPolicy decides which symlink targets may be created. The zero
// value is SymlinkSharedInZone, the default.
type SymlinkPolicy uint8

// The symlink policies of docs/design.md, "Rules".
const (
	// SymlinkSharedInZone, the default, is SymlinkAllow in a user's own
	// zones and SymlinkInZone in every other (In). The kernel follows a
	// link in the namespace of the process that reads it: a link in a
	// user's private tree, output/ or a session is read only by that
	// user's processes, in their own mount namespace, so any target there
	// reaches only what they can reach anyway (and tools such as python
	// -m venv link to /usr/bin). A link in share/ or a group is followed
	// by other users' processes too, and must not lead them out of the
	// zone.
	SymlinkSharedInZone SymlinkPolicy = iota
	// SymlinkInZone allows relative targets that cannot leave the link's
	// zone; absolute targets and targets that climb out are EPERM.
	SymlinkInZone
	// SymlinkAllow allows any well-formed target.
	SymlinkAllow
	// SymlinkDeny refuses every symlink with EPERM.
	SymlinkDeny
)

var symlinkPolicyNames = [...]string{"shared-in-zone", "in-zone", "allow", "deny"}

// String returns the policy as the configuration spells it.
func (p SymlinkPolicy) String() string {
	if int(p) < len(symlinkPolicyNames) {
		return symlinkPolicyNames[p]
	}
	return fmt.Sprintf("symlinks(%d)", uint8(p))
}

// ParseSymlinkPolicy parses "shared-in-zone", "in-zone", "allow" or
// "deny"; the empty string means the default, shared-in-zone.
func ParseSymlinkPolicy(s string) (SymlinkPolicy, error) {
	if s == "" {
		return SymlinkSharedInZone, nil
	}
	for i, n := range symlinkPolicyNames {
		if n == s {
			return SymlinkPolicy(i), nil
		}
	}
	return SymlinkSharedInZone, fmt.Errorf("unknown symlink policy %q (want shared-in-zone, in-zone, allow or deny): %w", s, syscall.EINVAL)
}

// In is the policy p applies to a link in a zone of kind k: for
// SymlinkSharedInZone, SymlinkAllow in a user's own zones (private,
// output, session) and SymlinkInZone in any other (share, group, uploads,
// and an unknown kind, failing closed); every other policy is the same
// in every zone.
func (p SymlinkPolicy) In(k shedfs.ZoneKind) SymlinkPolicy {
	if p != SymlinkSharedInZone {
		return p
	}
	switch k {
	case shedfs.ZonePrivate, shedfs.ZoneOutput, shedfs.ZoneSession:
		return SymlinkAllow
	}
	return SymlinkInZone
}

// MaxSymlinkLen is the longest symlink target in bytes (PATH_MAX - 1).
const MaxSymlinkLen = 4095

// CheckSymlinkTarget decides whether a symlink with the given target may be
// created, or followed, under policy p as it applies to the link's zone
// (SymlinkPolicy.In; SymlinkSharedInZone itself is checked as in-zone,
// failing closed). depth is the number of directory
// levels between the zone root and the directory holding the link (0 for a
// link directly in the zone root).
//
//   - deny: EPERM, always.
//   - a target that is empty or contains NUL: EINVAL; longer than
//     MaxSymlinkLen: ENAMETOOLONG.
//   - allow: 0 for any other target.
//   - in-zone (and any unknown policy, failing closed): EPERM for an
//     absolute target, for a negative depth, and for a target whose reach
//     SymlinkClimb cannot bound within depth; otherwise 0.
//
// The check walks path components; it never compares string prefixes.
// Because a link's depth changes when a directory above it is renamed, the
// FUSE layer should run the same check again in Readlink with the link's
// current depth, so that a moved link never resolves out of its zone.
func CheckSymlinkTarget(p SymlinkPolicy, target string, depth int) syscall.Errno {
	if p == SymlinkDeny {
		return syscall.EPERM
	}
	switch {
	case target == "" || strings.IndexByte(target, 0) >= 0:
		return syscall.EINVAL
	case len(target) > MaxSymlinkLen:
		return syscall.ENAMETOOLONG
	}
	if p == SymlinkAllow {
		return 0
	}
	if depth < 0 {
		return syscall.EPERM
	}
	up, ok := SymlinkClimb(target)
	if !ok || up > depth {
		return syscall.EPERM
	}
	return 0
}

// SymlinkClimb returns how many directory levels a relative target climbs:
// the number of ".." components before its first name ("." and empty
// components are ignored). ok is false for an absolute target and for a
// target with a ".." after a name, such as "a/../../x": the kernel resolves
// ".." physically, and any name the target passes may itself be a symlink,
// so such a target's reach cannot be bounded from its text. A link whose
// target climbs at most its depth therefore stays in its zone, given that
// every other link in the zone does too.
func SymlinkClimb(target string) (up int, ok bool) {
	if strings.HasPrefix(target, "/") {
		return 0, false
	}
	named := false
	for c := range strings.SplitSeq(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return 0, false
			}
			up++
		default:
			named = true
		}
	}
	return up, true
}
