package content

import (
	"fmt"
	"strings"

	"github.com/shedfs/shedfs"
)

// ParseZones reads --scan-zones: "all" (or ""), or a comma list of zone
// kinds ("share", "group") and zones ("group:team-alpha",
// "private:alice"); it returns whether a zone is scanned.
func ParseZones(s string) (func(shedfs.Zone) bool, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return nil, nil
	}
	want := map[string]bool{}
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		kind, _, _ := strings.Cut(w, ":")
		if !knownKind(kind) {
			return nil, fmt.Errorf("unknown zone %q: use private, output, uploads, share, group or group:NAME", w)
		}
		want[w] = true
	}
	return func(z shedfs.Zone) bool {
		return want[z.Kind.String()] || want[z.String()]
	}, nil
}

func knownKind(k string) bool {
	for kind := shedfs.ZonePrivate; kind <= shedfs.ZoneGroup; kind++ {
		if kind.String() == k {
			return true
		}
	}
	return false
}
