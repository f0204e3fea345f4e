package zones

import (
	"testing"

	"github.com/shedfs/shedfs"
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
		want shedfs.Zone
		ok   bool
	}{
		{"output", shedfs.Zone{Kind: shedfs.ZoneOutput, Principal: "alice"}, true},
		{"uploads", shedfs.Zone{Kind: shedfs.ZoneUploads, Principal: "alice"}, true},
		{"share", shedfs.Zone{Kind: shedfs.ZoneShare}, true},
		{"groups", shedfs.Zone{}, true},
		{"trash", shedfs.Zone{}, true},
		{"docs", shedfs.Zone{}, false},
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
	cfg := Config{ShareDefault: shedfs.OwnModeOwner}
	tests := []struct {
		kind                          shedfs.ZoneKind
		writable, removable, ownModes bool
		def                           shedfs.OwnMode
	}{
		{shedfs.ZonePrivate, true, true, false, shedfs.OwnModeNone},
		{shedfs.ZoneOutput, true, true, false, shedfs.OwnModeNone},
		{shedfs.ZoneUploads, false, true, false, shedfs.OwnModeNone},
		{shedfs.ZoneShare, true, true, true, shedfs.OwnModeOwner},
		{shedfs.ZoneGroup, true, true, true, shedfs.OwnModeGroup},
		{shedfs.ZoneNone, false, false, false, shedfs.OwnModeNone},
		{shedfs.ZoneKind(99), false, false, false, shedfs.OwnModeNone},
	}
	for _, tt := range tests {
		p := cfg.Policy(tt.kind)
		want := Policy{Kind: tt.kind, Writable: tt.writable, Removable: tt.removable, OwnModes: tt.ownModes, DefaultMode: tt.def}
		if p != want {
			t.Errorf("Policy(%v) = %+v, want %+v", tt.kind, p, want)
		}
	}
	if d := DefaultConfig(); d.Policy(shedfs.ZoneShare).DefaultMode != shedfs.OwnModeGroup ||
		d.Policy(shedfs.ZoneGroup).DefaultMode != shedfs.OwnModeGroup || d.Symlinks != SymlinkSharedInZone {
		t.Errorf("DefaultConfig = %+v", d)
	}
	if (Config{}).Policy(shedfs.ZoneShare).DefaultMode != shedfs.OwnModeGroup {
		t.Error("zero Config: share default is not group")
	}
	if g := (Config{GroupDefault: shedfs.OwnModeOwnerRO}).Policy(shedfs.ZoneGroup).DefaultMode; g != shedfs.OwnModeOwnerRO {
		t.Errorf("configured group default = %v", g)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
	for _, bad := range []Config{{ShareDefault: 9}, {GroupDefault: 4}, {Symlinks: SymlinkDeny + 1}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}

func TestEffectiveMode(t *testing.T) {
	tests := []struct {
		kind shedfs.ZoneKind
		m    shedfs.OwnMode
		want shedfs.OwnMode
	}{
		{shedfs.ZonePrivate, shedfs.OwnModeOwnerRO, shedfs.OwnModeNone},
		{shedfs.ZoneUploads, shedfs.OwnModeOwner, shedfs.OwnModeNone},
		{shedfs.ZoneShare, shedfs.OwnModeNone, shedfs.OwnModeGroup},
		{shedfs.ZoneShare, shedfs.OwnModeOwner, shedfs.OwnModeOwner},
		{shedfs.ZoneGroup, shedfs.OwnModeOwnerRO, shedfs.OwnModeOwnerRO},
		{shedfs.ZoneGroup, 42, shedfs.OwnModeGroup},
	}
	for _, tt := range tests {
		if got := EffectiveMode(tt.kind, tt.m); got != tt.want {
			t.Errorf("EffectiveMode(%v, %v) = %v, want %v", tt.kind, tt.m, got, tt.want)
		}
	}
}

func TestHolderOf(t *testing.T) {
	tests := []struct {
		z    shedfs.Zone
		want shedfs.Holder
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
		z    shedfs.Zone
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
		{"zone none", "alice", shedfs.Zone{}, false},
		{"share with principal", "alice", shedfs.Zone{Kind: shedfs.ZoneShare, Principal: "x"}, false},
		{"unknown kind", "alice", shedfs.Zone{Kind: 77, Principal: "alice"}, false},
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
