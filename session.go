package shedfs

import (
	"strings"
	"time"
)

// Session is one bounded workspace of a user (docs/design.md, "Sessions"):
// a scratch tree of its own zone, its own limit, an expiry, and a view
// that shows the user's persistent zones beside the scratch.
type Session struct {
	User string `json:"user"`
	// ID follows the principal-name rules (CheckPrincipal): it appears in
	// paths, zone names and audit records.
	ID string `json:"id"`
	// Root is the scratch tree's root (zone session:User/ID, Parent 0).
	Root uint64 `json:"root"`
	// Placeholder is the empty directory home/sessions/ID of the user's
	// private tree that holds the session's name while it is open: the
	// main view shows the scratch there, and close --keep fills it.
	Placeholder uint64    `json:"placeholder"`
	Created     time.Time `json:"created"`
	// Expires is when the daemon closes the session; zero: never.
	Expires time.Time `json:"expires,omitzero"`
	// From is the snapshot of the user its scratch started as a fork of,
	// Fork the session; empty for a session that started empty.
	From string `json:"from,omitempty"`
	Fork string `json:"fork,omitempty"`
	// Base is the host directory its scratch started as a copy of.
	Base string `json:"base,omitempty"`
	// Start is the snapshot of the scratch taken when a fork made it,
	// what session diff compares with; none for a session that started
	// empty.
	Start string `json:"start,omitempty"`
	// CheckpointEvery, when set, makes the daemon snapshot the scratch
	// at that interval while files change, keeping the last
	// CheckpointKeep snapshots.
	CheckpointEvery time.Duration `json:"checkpoint_every,omitempty"`
	CheckpointKeep  int           `json:"checkpoint_keep,omitempty"`
}

// Expired reports whether the session's time has passed at now.
func (s *Session) Expired(now time.Time) bool {
	return !s.Expires.IsZero() && !now.Before(s.Expires)
}

// SessionsDir is the directory of a user's private tree that holds the
// placeholders of the open sessions and the scratch trees kept by close
// --keep.
const SessionsDir = "sessions"

// SessionZone is the scratch zone of session id of user.
func SessionZone(user, id string) Zone {
	return Zone{Kind: ZoneSession, Principal: user + "/" + id}
}

// SplitSession returns the user and the session id of a session zone's
// principal ("alice/s1").
func SplitSession(principal string) (user, id string) {
	user, id, _ = strings.Cut(principal, "/")
	return user, id
}

// SessionHolder is the holder of a session's own limit: the scratch tree
// is charged to it and, nested, to its user (OuterHolder).
func SessionHolder(user, id string) Holder { return HolderOf(SessionZone(user, id)) }

// OuterHolder returns the holder that every charge to h is also made to:
// the user of a session holder. ok is false for the other holders, which
// nest in nothing.
func OuterHolder(h Holder) (outer Holder, ok bool) {
	rest, ok := strings.CutPrefix(string(h), "session:")
	if !ok {
		return "", false
	}
	user, _ := SplitSession(rest)
	return UserHolder(user), true
}

// NestedPrefix returns the prefix of every holder nested in h (OuterHolder
// of each is h): "session:alice/" for user:alice. ok is false for the
// holders nothing nests in.
func NestedPrefix(h Holder) (prefix string, ok bool) {
	user, ok := strings.CutPrefix(string(h), "user:")
	if !ok {
		return "", false
	}
	return "session:" + user + "/", true
}

// Tighter returns, for a charge to a holder nested in another (a session
// in its user), the usage and limit that admit it exactly when it fits
// both: per dimension, the pair with less room left. A zero limit is no
// limit. It is the one place where nested limits combine, so that df and
// every admission see the same answer.
func Tighter(u Usage, l Limit, ou Usage, ol Limit) (Usage, Limit) {
	pick := func(used, limit, oused, olimit int64) (int64, int64) {
		if olimit == 0 || limit != 0 && limit-used <= olimit-oused {
			return used, limit
		}
		return oused, olimit
	}
	u.Bytes, l.Bytes = pick(u.Bytes, l.Bytes, ou.Bytes, ol.Bytes)
	u.Inodes, l.Inodes = pick(u.Inodes, l.Inodes, ou.Inodes, ol.Inodes)
	return u, l
}
