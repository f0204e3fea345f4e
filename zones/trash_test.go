package zones

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

func TestTrashName(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 2, 40, 11, 0, time.UTC)
	names := []string{
		TrashName("q3.csv", t0.Add(time.Second)),
		TrashName("q3.csv", t0),
		TrashName("q3.csv", t0.Add(1)),
		TrashName("q3.csv", t0.Add(500*time.Millisecond)),
	}
	if names[1] != "q3.csv@2026-11-26T02:40:11.000000000Z" {
		t.Errorf("TrashName = %q", names[1])
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if want := []string{names[1], names[2], names[3], names[0]}; !slices.Equal(sorted, want) {
		t.Errorf("sorted %q, want %q", sorted, want)
	}
	for _, n := range names {
		base, tm, ok := ParseTrashName(n)
		if !ok || base != "q3.csv" {
			t.Errorf("ParseTrashName(%q) = %q, %v", n, base, ok)
		}
		if TrashName(base, tm) != n {
			t.Errorf("round trip of %q", n)
		}
	}
	long := TrashName(strings.Repeat("x", 255), t0)
	if len(long) > shedfs.MaxNameLen {
		t.Errorf("long name %d bytes", len(long))
	}
	if b, _, ok := ParseTrashName("a@b@2026-11-26T02:40:11.000000000Z"); !ok || b != "a@b" {
		t.Errorf("name with @: %q %v", b, ok)
	}
	for _, bad := range []string{"q3.csv", "q3.csv@", "q3.csv@2026-11-26", "q3@2026-11-26T02:40:11Z"} {
		if _, _, ok := ParseTrashName(bad); ok {
			t.Errorf("ParseTrashName(%q) ok", bad)
		}
	}
}

func TestViewPath(t *testing.T) {
	tests := []struct {
		z    shedfs.Zone
		rel  string
		want string
	}{
		{PrivateZone("alice"), "notes/a", "notes/a"},
		{PrivateZone("bob"), "notes/a", ""},
		{OutputZone("alice"), "r.txt", "output/r.txt"},
		{UploadsZone("bob"), "r.txt", ""},
		{ShareZone(), "reports/q3.csv", "share/reports/q3.csv"},
		{GroupZone("team-alpha"), "plan.md", "groups/team-alpha/plan.md"},
	}
	for _, tt := range tests {
		got := ViewPath("alice", tt.z, tt.rel)
		if got != tt.want {
			t.Errorf("ViewPath(%v, %q) = %q, want %q", tt.z, tt.rel, got, tt.want)
		}
		if got == "" {
			continue
		}
		z, rel, ok := ZonePath("alice", got)
		if !ok || z != tt.z || rel != tt.rel {
			t.Errorf("ZonePath(%q) = %v %q %v", got, z, rel, ok)
		}
	}
	for _, p := range []string{"", "trash", "trash/share/x", "groups"} {
		if _, _, ok := ZonePath("alice", p); ok {
			t.Errorf("ZonePath(%q) ok", p)
		}
	}
}
