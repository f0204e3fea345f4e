package zones

import (
	"testing"

	"github.com/shedfs/shedfs"
)

func TestReservedIn(t *testing.T) {
	for _, c := range []struct {
		kind shedfs.ZoneKind
		name string
		want bool
	}{
		{shedfs.ZonePrivate, "output", true},
		{shedfs.ZonePrivate, "home", false},
		{shedfs.ZonePrivate, "sessions", false},
		{shedfs.ZoneSession, "home", true},
		{shedfs.ZoneSession, "uploads", true},
		{shedfs.ZoneSession, "trash", true},
		{shedfs.ZoneSession, "sessions", false},
		{shedfs.ZoneSession, "notes", false},
		{shedfs.ZoneOutput, "share", false},
		{shedfs.ZoneGroup, "home", false},
	} {
		if got := IsReservedIn(c.kind, c.name); got != c.want {
			t.Errorf("IsReservedIn(%v, %q) = %v", c.kind, c.name, got)
		}
	}
}

func TestSessionVisibleAndReadonly(t *testing.T) {
	s1 := SessionZone("alice", "s1")
	for _, c := range []struct {
		user, session string
		z             shedfs.Zone
		visible, ro   bool
	}{
		{"alice", "s1", s1, true, false},
		{"alice", "", s1, true, true},
		{"alice", "s2", s1, true, true},
		{"bob", "", s1, false, true},
		{"bob", "s1", s1, false, false},
		{"alice", "s1", PrivateZone("alice"), true, false},
		{"alice", "s1", ShareZone(), true, false},
		{"alice", "", SessionZone("alicex", "s1"), false, true},
	} {
		if got := Visible(c.user, nil, c.z); got != c.visible {
			t.Errorf("Visible(%s, %v) = %v", c.user, c.z, got)
		}
		if got := SessionReadonly(c.session, c.z); got != c.ro {
			t.Errorf("SessionReadonly(%q, %v) = %v", c.session, c.z, got)
		}
	}
	if p := PolicyOf(shedfs.ZoneSession); !p.Writable || !p.Removable || p.OwnModes {
		t.Errorf("session policy %+v", p)
	}
}

func TestSessionViewPath(t *testing.T) {
	for _, c := range []struct {
		z    shedfs.Zone
		rel  string
		want string
	}{
		{SessionZone("alice", "s1"), "a/b", "a/b"},
		{SessionZone("alice", "s2"), "a", ""},
		{PrivateZone("alice"), "notes.txt", "home/notes.txt"},
		{PrivateZone("bob"), "x", ""},
		{UploadsZone("alice"), "s1/data.csv", "uploads/data.csv"},
		{UploadsZone("alice"), "s1", "uploads"},
		{UploadsZone("alice"), "s10/data.csv", ""},
		{UploadsZone("alice"), "other.csv", ""},
		{OutputZone("alice"), "r.html", "output/r.html"},
		{ShareZone(), "x", "share/x"},
		{GroupZone("g"), "x", "groups/g/x"},
	} {
		got := SessionViewPath("alice", "s1", c.z, c.rel)
		if got != c.want {
			t.Errorf("SessionViewPath(%v, %q) = %q, want %q", c.z, c.rel, got, c.want)
			continue
		}
		if got == "" {
			continue
		}
		z, rel, ok := SessionZonePath("alice", "s1", got)
		if !ok || z != c.z || rel != c.rel {
			t.Errorf("SessionZonePath(%q) = %v %q %v, want %v %q", got, z, rel, ok, c.z, c.rel)
		}
	}
}
