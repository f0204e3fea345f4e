package zones

import (
	"path"
	"strings"

	"github.com/shedfs/shedfs"
)

// The names a session view adds (docs/design.md, "Sessions"): home/ in the
// session root is the user's private tree, and sessions/ in the private
// tree is where the main view shows the user's open sessions and where
// close --keep leaves a session's scratch tree.
const (
	NameHome     = "home"
	NameSessions = shedfs.SessionsDir
)

// SessionZone is the scratch tree of session id of user.
func SessionZone(user, id string) shedfs.Zone { return shedfs.SessionZone(user, id) }

// ViewRootZone reports whether a root of zone kind k is the root of a
// view, where the reserved names live: the private tree of a main view
// and the scratch tree of a session view.
func ViewRootZone(k shedfs.ZoneKind) bool {
	return k == shedfs.ZonePrivate || k == shedfs.ZoneSession
}

// IsReservedIn reports whether name is reserved in the root of a view
// whose root zone is of kind k: the names of IsReserved in both, and
// home/ in a session root only (in the private tree "home" is an
// ordinary name).
func IsReservedIn(k shedfs.ZoneKind, name string) bool {
	if k == shedfs.ZoneSession && name == NameHome {
		return true
	}
	return ViewRootZone(k) && IsReserved(name)
}

// SessionReadonly reports whether a view of session viewSession ("" for
// the user's main view) may only read zone z: a session's scratch is
// writable in that session's own view and read-only everywhere else (the
// main view shows it under sessions/ID).
func SessionReadonly(viewSession string, z shedfs.Zone) bool {
	if z.Kind != shedfs.ZoneSession {
		return false
	}
	_, id := shedfs.SplitSession(z.Principal)
	return id != viewSession
}

// SessionViewPath is where rel, a path within zone z, appears in the view
// of session id of user: the scratch at the root, the private tree under
// home/, the session's uploads (uploads/ID of the user's uploads zone)
// under uploads/, the other zones as in ViewPath. It is "" for what the
// session view does not place.
func SessionViewPath(user, id string, z shedfs.Zone, rel string) string {
	switch z.Kind {
	case shedfs.ZoneSession:
		if z != SessionZone(user, id) {
			return ""
		}
		return rel
	case shedfs.ZonePrivate:
		if z.Principal != user {
			return ""
		}
		return path.Join(NameHome, rel)
	case shedfs.ZoneUploads:
		below, ok := strings.CutPrefix(rel, id)
		if z.Principal != user || !ok || below != "" && below[0] != '/' {
			return ""
		}
		return path.Join(NameUploads, below)
	}
	return ViewPath(user, z, rel)
}

// SessionZonePath is the inverse of SessionViewPath: the zone and the path
// within it of p, a clean path relative to the root of the view of
// session id of user.
func SessionZonePath(user, id, p string) (z shedfs.Zone, rel string, ok bool) {
	first, rest, _ := strings.Cut(p, "/")
	switch first {
	case NameHome:
		return PrivateZone(user), rest, true
	case NameUploads:
		return UploadsZone(user), path.Join(id, rest), true
	case NameOutput, NameShare, NameGroups, NameTrash, NameSnapshots, "":
		return ZonePath(user, p)
	}
	return SessionZone(user, id), p, true
}
