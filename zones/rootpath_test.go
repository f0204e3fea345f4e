package zones

import (
	"testing"

	"github.com/shedfs/shedfs"
)

func TestRootPath(t *testing.T) {
	for _, tc := range []struct {
		z    shedfs.Zone
		want string
	}{
		{PrivateZone("alice"), ""},
		{OutputZone("alice"), "output"},
		{UploadsZone("alice"), "uploads"},
		{ShareZone(), "share"},
		{GroupZone("team-alpha"), "groups/team-alpha"},
		{shedfs.Zone{}, ""},
	} {
		if got := RootPath(tc.z); got != tc.want {
			t.Errorf("RootPath(%v) = %q, want %q", tc.z, got, tc.want)
		}
	}
}
