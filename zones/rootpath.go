package zones

import "github.com/shedfs/shedfs"

// RootPath is where the root of zone z appears in the views that show it,
// relative to the view root: "" for the private tree, "output",
// "uploads", "share", "groups/<g>". Share-by-link names a linked entry by
// this path plus the names below the root, as its maker's view shows it.
func RootPath(z shedfs.Zone) string {
	switch z.Kind {
	case shedfs.ZoneOutput:
		return NameOutput
	case shedfs.ZoneUploads:
		return NameUploads
	case shedfs.ZoneShare:
		return NameShare
	case shedfs.ZoneGroup:
		return NameGroups + "/" + z.Principal
	}
	return ""
}
