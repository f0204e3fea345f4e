package zones

import (
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs/metadata"
)

func TestReserved(t *testing.T) {
	for _, n := range ReservedNames() {
		if !IsReserved(n) {
			t.Errorf("IsReserved(%q) = false", n)
		}
	}
	for _, n := range []string{"", "Output", "share2", "group", "shares", ".", "..", "output/", " share"} {
		if IsReserved(n) {
			t.Errorf("IsReserved(%q) = true", n)
		}
	}
	tests := []struct {
		name string
		want metadata.Zone
		ok   bool
	}{
		{"output", metadata.Zone{Kind: metadata.ZoneOutput, Principal: "alice"}, true},
		{"uploads", metadata.Zone{Kind: metadata.ZoneUploads, Principal: "alice"}, true},
		{"share", metadata.Zone{Kind: metadata.ZoneShare}, true},
		{"groups", metadata.Zone{}, true},
		{"docs", metadata.Zone{}, false},
	}
	for _, tt := range tests {
		z, ok := ReservedZone("alice", tt.name)
		if z != tt.want || ok != tt.ok {
			t.Errorf("ReservedZone(alice, %q) = %v, %v; want %v, %v", tt.name, z, ok, tt.want, tt.ok)
		}
		if ok != IsReserved(tt.name) {
			t.Errorf("ReservedZone and IsReserved disagree on %q", tt.name)
		}
	}
	// The returned slice is a copy.
	r := ReservedNames()
	r[0] = "x"
	if ReservedNames()[0] != NameOutput {
		t.Error("ReservedNames shares its backing array")
	}
}

func TestPolicy(t *testing.T) {
	cfg := Config{ShareDefault: metadata.OwnModeOwner}
	tests := []struct {
		kind                          metadata.ZoneKind
		writable, removable, ownModes bool
		def                           metadata.OwnMode
	}{
		{metadata.ZonePrivate, true, true, false, metadata.OwnModeNone},
		{metadata.ZoneOutput, true, true, false, metadata.OwnModeNone},
		{metadata.ZoneUploads, false, true, false, metadata.OwnModeNone},
		{metadata.ZoneShare, true, true, true, metadata.OwnModeOwner},
		{metadata.ZoneGroup, true, true, true, metadata.OwnModeGroup},
		{metadata.ZoneNone, false, false, false, metadata.OwnModeNone},
		{metadata.ZoneKind(99), false, false, false, metadata.OwnModeNone},
	}
	for _, tt := range tests {
		p := cfg.Policy(tt.kind)
		want := Policy{Kind: tt.kind, Writable: tt.writable, Removable: tt.removable, OwnModes: tt.ownModes, DefaultMode: tt.def}
		if p != want {
			t.Errorf("Policy(%v) = %+v, want %+v", tt.kind, p, want)
		}
	}
	if d := DefaultConfig(); d.Policy(metadata.ZoneShare).DefaultMode != metadata.OwnModeGroup ||
		d.Policy(metadata.ZoneGroup).DefaultMode != metadata.OwnModeGroup || d.Symlinks != SymlinkInZone {
		t.Errorf("DefaultConfig = %+v", d)
	}
	if (Config{}).Policy(metadata.ZoneShare).DefaultMode != metadata.OwnModeGroup {
		t.Error("zero Config: share default is not group")
	}
	if g := (Config{GroupDefault: metadata.OwnModeOwnerRO}).Policy(metadata.ZoneGroup).DefaultMode; g != metadata.OwnModeOwnerRO {
		t.Errorf("configured group default = %v", g)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
	for _, bad := range []Config{{ShareDefault: 9}, {GroupDefault: 4}, {Symlinks: 3}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}

func TestEffectiveMode(t *testing.T) {
	tests := []struct {
		kind metadata.ZoneKind
		m    metadata.OwnMode
		want metadata.OwnMode
	}{
		{metadata.ZonePrivate, metadata.OwnModeOwnerRO, metadata.OwnModeNone},
		{metadata.ZoneUploads, metadata.OwnModeOwner, metadata.OwnModeNone},
		{metadata.ZoneShare, metadata.OwnModeNone, metadata.OwnModeGroup},
		{metadata.ZoneShare, metadata.OwnModeOwner, metadata.OwnModeOwner},
		{metadata.ZoneGroup, metadata.OwnModeOwnerRO, metadata.OwnModeOwnerRO},
		{metadata.ZoneGroup, 42, metadata.OwnModeGroup},
	}
	for _, tt := range tests {
		if got := EffectiveMode(tt.kind, tt.m); got != tt.want {
			t.Errorf("EffectiveMode(%v, %v) = %v, want %v", tt.kind, tt.m, got, tt.want)
		}
	}
}

func TestHolderOf(t *testing.T) {
	tests := []struct {
		z    metadata.Zone
		want metadata.Holder
	}{
		{PrivateZone("alice"), "user:alice"},
		{OutputZone("alice"), "user:alice"},
		{UploadsZone("alice"), "user:alice"},
		{ShareZone(), "share"},
		{GroupZone("team-alpha"), "group:team-alpha"},
	}
	for _, tt := range tests {
		if got := HolderOf(tt.z); got != tt.want {
			t.Errorf("HolderOf(%v) = %q, want %q", tt.z, got, tt.want)
		}
	}
}

func TestVisible(t *testing.T) {
	groups := []string{"team-alpha", "ops"}
	tests := []struct {
		name string
		user string
		z    metadata.Zone
		want bool
	}{
		{"own private", "alice", PrivateZone("alice"), true},
		{"own output", "alice", OutputZone("alice"), true},
		{"own uploads", "alice", UploadsZone("alice"), true},
		{"other private", "alice", PrivateZone("bob"), false},
		{"other output", "alice", OutputZone("bob"), false},
		{"other uploads", "alice", UploadsZone("bob"), false},
		{"share", "alice", ShareZone(), true},
		{"member group", "alice", GroupZone("team-alpha"), true},
		{"second group", "alice", GroupZone("ops"), true},
		{"not member", "alice", GroupZone("team-beta"), false},
		{"group prefix", "alice", GroupZone("team"), false},
		{"empty user private", "", PrivateZone(""), false},
		{"empty group", "alice", GroupZone(""), false},
		{"zone none", "alice", metadata.Zone{}, false},
		{"share with principal", "alice", metadata.Zone{Kind: metadata.ZoneShare, Principal: "x"}, false},
		{"unknown kind", "alice", metadata.Zone{Kind: 77, Principal: "alice"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Visible(tt.user, groups, tt.z); got != tt.want {
				t.Errorf("Visible(%q, %v, %v) = %v, want %v", tt.user, groups, tt.z, got, tt.want)
			}
		})
	}
	if Visible("alice", nil, GroupZone("team-alpha")) {
		t.Error("group visible without membership")
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want syscall.Errno
	}{
		{"plain", "report.pdf", 0},
		{"dotfile", ".git", 0},
		{"three dots", "...", 0},
		{"utf8", "résumé ☃", 0},
		{"invalid utf8", "\xff\xfe", 0},
		{"255 bytes", strings.Repeat("a", 255), 0},
		{"256 bytes", strings.Repeat("a", 256), syscall.ENAMETOOLONG},
		{"empty", "", syscall.EINVAL},
		{"dot", ".", syscall.EINVAL},
		{"dotdot", "..", syscall.EINVAL},
		{"slash", "a/b", syscall.EINVAL},
		{"trailing slash", "a/", syscall.EINVAL},
		{"nul", "a\x00b", syscall.EINVAL},
		{"reserved is a valid name", "share", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CheckName(tt.in); got != tt.want {
				t.Errorf("CheckName(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestCheckPrincipal(t *testing.T) {
	ok := []string{"alice", "team-alpha", "a", "0", "a_b", "a-", strings.Repeat("z", 64), "9lives"}
	bad := []string{"", "Alice", "-a", "_a", "a b", "a.b", "a/b", "é", strings.Repeat("z", 65), "a\x00", "user:alice"}
	for _, n := range ok {
		if e := CheckPrincipal(n); e != 0 {
			t.Errorf("CheckPrincipal(%q) = %v, want ok", n, e)
		}
	}
	for _, n := range bad {
		if e := CheckPrincipal(n); e != syscall.EINVAL {
			t.Errorf("CheckPrincipal(%q) = %v, want EINVAL", n, e)
		}
	}
}

var principalRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func FuzzName(f *testing.F) {
	for _, s := range []string{"", ".", "..", "...", "a", "a/b", "a\x00", "alice", "team-alpha", "-x", "Z", strings.Repeat("a", 256), strings.Repeat("b", 64), strings.Repeat("b", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := CheckName(s)
		valid := s != "" && s != "." && s != ".." && len(s) <= MaxNameLen && !strings.ContainsAny(s, "/\x00")
		if (e == 0) != valid {
			t.Fatalf("CheckName(%q) = %v, valid = %v", s, e, valid)
		}
		if e != 0 && e != syscall.EINVAL && e != syscall.ENAMETOOLONG {
			t.Fatalf("CheckName(%q) = unexpected %v", s, e)
		}
		p := CheckPrincipal(s)
		if (p == 0) != principalRE.MatchString(s) {
			t.Fatalf("CheckPrincipal(%q) = %v, regexp says %v", s, p, principalRE.MatchString(s))
		}
		if p == 0 && e != 0 {
			t.Fatalf("principal %q is not a valid entry name", s)
		}
	})
}
