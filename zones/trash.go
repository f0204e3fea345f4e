package zones

import (
	"path"
	"strings"
	"time"

	"github.com/shedfs/shedfs"
)

// trashTimeLayout is the time in a trash entry's name: UTC with all nine
// fractional digits, so that names of one file sort by time and two
// versions made within one second still differ.
const trashTimeLayout = "2006-01-02T15:04:05.000000000Z"

// trashSep separates a kept file's name from the time it was removed.
const trashSep = "@"

// TrashName is the name of a file kept in the trash under trash/: its
// original base name, "@" and the time it was removed
// ("q3.csv@2026-11-26T02:40:11.123456789Z"). A base name too long to take
// the time is cut, so the name stays within MaxNameLen.
func TrashName(base string, t time.Time) string {
	stamp := trashSep + t.UTC().Format(trashTimeLayout)
	if len(base)+len(stamp) > shedfs.MaxNameLen {
		base = base[:shedfs.MaxNameLen-len(stamp)]
	}
	return base + stamp
}

// ParseTrashName splits a name made by TrashName; ok is false for any
// other name.
func ParseTrashName(name string) (base string, t time.Time, ok bool) {
	i := strings.LastIndex(name, trashSep)
	if i < 0 {
		return "", time.Time{}, false
	}
	t, err := time.Parse(trashTimeLayout, name[i+1:])
	if err != nil {
		return "", time.Time{}, false
	}
	return name[:i], t, true
}

// ViewPath is where rel, a path within zone z, appears in user's view:
// "share/rel", "groups/<g>/rel", "output/rel", "uploads/rel", or rel
// itself in the private tree. It is "" for a zone the view does not
// place (another user's per-user zones).
func ViewPath(user string, z shedfs.Zone, rel string) string {
	var top string
	switch z.Kind {
	case shedfs.ZonePrivate:
		if z.Principal != user {
			return ""
		}
		return rel
	case shedfs.ZoneOutput, shedfs.ZoneUploads:
		if z.Principal != user {
			return ""
		}
		top = z.Kind.String()
	case shedfs.ZoneShare:
		top = NameShare
	case shedfs.ZoneGroup:
		top = NameGroups + "/" + z.Principal
	default:
		return ""
	}
	return path.Join(top, rel)
}

// ZonePath is the inverse of ViewPath: the zone and the path within it of
// p, a clean path relative to user's view root. ok is false for paths
// inside no zone: "", "groups", "trash" and anything below trash/.
func ZonePath(user, p string) (z shedfs.Zone, rel string, ok bool) {
	first, rest, _ := strings.Cut(p, "/")
	switch first {
	case "", NameTrash:
		return shedfs.Zone{}, "", false
	case NameOutput:
		return OutputZone(user), rest, true
	case NameUploads:
		return UploadsZone(user), rest, true
	case NameShare:
		return ShareZone(), rest, true
	case NameGroups:
		g, rest, _ := strings.Cut(rest, "/")
		if g == "" {
			return shedfs.Zone{}, "", false
		}
		return GroupZone(g), rest, true
	}
	return PrivateZone(user), p, true
}
