package zones

import (
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

func TestSymlinkPolicyParse(t *testing.T) {
	for _, p := range []SymlinkPolicy{SymlinkSharedInZone, SymlinkInZone, SymlinkAllow, SymlinkDeny} {
		got, err := ParseSymlinkPolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParseSymlinkPolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if p, err := ParseSymlinkPolicy(""); err != nil || p != SymlinkSharedInZone {
		t.Errorf(`ParseSymlinkPolicy("") = %v, %v`, p, err)
	}
	for _, s := range []string{"inzone", "ALLOW", "none", "in-zone "} {
		if _, err := ParseSymlinkPolicy(s); err == nil {
			t.Errorf("ParseSymlinkPolicy(%q) accepted", s)
		}
	}
	if s := SymlinkPolicy(9).String(); s != "symlinks(9)" {
		t.Errorf("String of unknown policy = %q", s)
	}
}

func TestCheckSymlinkTarget(t *testing.T) {
	tests := []struct {
		name   string
		p      SymlinkPolicy
		target string
		depth  int
		want   syscall.Errno
	}{
		{"sibling", SymlinkInZone, "a", 0, 0},
		{"subdir", SymlinkInZone, "a/b/c", 0, 0},
		{"dot", SymlinkInZone, ".", 0, 0},
		{"dot slash", SymlinkInZone, "./a", 0, 0},
		{"trailing slash", SymlinkInZone, "a/", 0, 0},
		{"double slash", SymlinkInZone, "a//b", 0, 0},
		{"up at depth 0", SymlinkInZone, "../x", 0, syscall.EPERM},
		{"dotdot alone at depth 0", SymlinkInZone, "..", 0, syscall.EPERM},
		{"up at depth 1", SymlinkInZone, "../x", 1, 0},
		{"dotdot alone at depth 1", SymlinkInZone, "..", 1, 0},
		{"up twice at depth 1", SymlinkInZone, "../../x", 1, syscall.EPERM},
		{"up twice at depth 2", SymlinkInZone, "../../x", 2, 0},
		{"dot between ups", SymlinkInZone, ".././../x", 2, 0},
		{"name then climb", SymlinkInZone, "a/../../x", 1, syscall.EPERM},
		{"name then climb deep", SymlinkInZone, "a/../x", 5, syscall.EPERM},
		{"climb after descent", SymlinkInZone, "../a/../b", 3, syscall.EPERM},
		{"absolute", SymlinkInZone, "/etc/passwd", 0, syscall.EPERM},
		{"absolute deep", SymlinkInZone, "/etc/passwd", 100, syscall.EPERM},
		{"absolute root", SymlinkInZone, "/", 3, syscall.EPERM},
		{"negative depth", SymlinkInZone, "a", -1, syscall.EPERM},
		{"empty", SymlinkInZone, "", 0, syscall.EINVAL},
		{"nul", SymlinkInZone, "a\x00b", 0, syscall.EINVAL},
		{"too long", SymlinkInZone, strings.Repeat("a", MaxSymlinkLen+1), 0, syscall.ENAMETOOLONG},
		{"longest", SymlinkInZone, strings.Repeat("a", MaxSymlinkLen), 0, 0},
		{"dotdot-like name", SymlinkInZone, "..a/x", 0, 0},
		{"allow absolute", SymlinkAllow, "/etc/passwd", 0, 0},
		{"allow climb", SymlinkAllow, "../../../x", 0, 0},
		{"allow empty", SymlinkAllow, "", 0, syscall.EINVAL},
		{"allow nul", SymlinkAllow, "\x00", 0, syscall.EINVAL},
		{"deny relative", SymlinkDeny, "a", 3, syscall.EPERM},
		{"deny empty", SymlinkDeny, "", 0, syscall.EPERM},
		{"unknown policy fails closed", SymlinkPolicy(7), "../x", 0, syscall.EPERM},
		{"unknown policy in zone ok", SymlinkPolicy(7), "x", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CheckSymlinkTarget(tt.p, tt.target, tt.depth); got != tt.want {
				t.Errorf("CheckSymlinkTarget(%v, %q, %d) = %v, want %v", tt.p, tt.target, tt.depth, got, tt.want)
			}
		})
	}
}

func TestSymlinkClimb(t *testing.T) {
	tests := []struct {
		target string
		up     int
		ok     bool
	}{
		{"a", 0, true},
		{"..", 1, true},
		{"../..", 2, true},
		{"../../a/b", 2, true},
		{"./../.", 1, true},
		{"a/..", 0, false},
		{"/a", 0, false},
		{"", 0, true},
	}
	for _, tt := range tests {
		up, ok := SymlinkClimb(tt.target)
		if up != tt.up || ok != tt.ok {
			t.Errorf("SymlinkClimb(%q) = %d, %v; want %d, %v", tt.target, up, ok, tt.up, tt.ok)
		}
	}
}

// lexicalLowest walks target from depth and returns the lowest level any
// prefix of it reaches, and whether a ".." follows a name.
func lexicalLowest(target string, depth int) (lowest int, dotdotAfterName bool) {
	level, lowest, named := depth, depth, false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				dotdotAfterName = true
			}
			level--
		default:
			named = true
			level++
		}
		lowest = min(lowest, level)
	}
	return lowest, dotdotAfterName
}

func FuzzSymlinkTarget(f *testing.F) {
	for _, s := range []string{"a", "../x", "a/../../x", "/etc/passwd", "..", ".", "", "a\x00", "./../a/./b", "../../../../", "a//b/../c"} {
		for _, d := range []int{0, 1, 2, 5} {
			f.Add(s, d)
		}
	}
	f.Fuzz(func(t *testing.T, target string, depth int) {
		depth %= 64
		got := CheckSymlinkTarget(SymlinkInZone, target, depth)
		switch got {
		case 0, syscall.EPERM, syscall.EINVAL, syscall.ENAMETOOLONG:
		default:
			t.Fatalf("unexpected errno %v", got)
		}
		if got == 0 {
			if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) || len(target) > MaxSymlinkLen {
				t.Fatalf("in-zone accepted malformed or absolute %q", target)
			}
			low, after := lexicalLowest(target, depth)
			if low < 0 {
				t.Fatalf("in-zone accepted %q at depth %d, which climbs to level %d", target, depth, low)
			}
			if after {
				t.Fatalf("in-zone accepted %q with '..' after a name", target)
			}
			// Deeper links may use what shallower ones may.
			if CheckSymlinkTarget(SymlinkInZone, target, depth+1) != 0 {
				t.Fatalf("%q allowed at depth %d but not %d", target, depth, depth+1)
			}
		}
		a := CheckSymlinkTarget(SymlinkAllow, target, depth)
		if got == 0 && a != 0 {
			t.Fatalf("allow is stricter than in-zone for %q", target)
		}
		if a == syscall.EPERM {
			t.Fatalf("allow gave EPERM for %q", target)
		}
		if CheckSymlinkTarget(SymlinkDeny, target, depth) != syscall.EPERM {
			t.Fatal("deny allowed a symlink")
		}
	})
}

// TestSymlinkPolicyIn: the policy each setting applies in each zone kind
// (issue 27). shared-in-zone, the default, allows any target where only
// the zone's user follows a link and keeps links in their zone wherever
// other users' processes follow them; an unknown kind fails closed.
func TestSymlinkPolicyIn(t *testing.T) {
	def, in, all, no := SymlinkSharedInZone, SymlinkInZone, SymlinkAllow, SymlinkDeny
	if (Config{}).Symlinks != def {
		t.Errorf("the zero Config's policy is %v, want shared-in-zone", (Config{}).Symlinks)
	}
	kinds := []shedfs.ZoneKind{shedfs.ZonePrivate, shedfs.ZoneOutput, shedfs.ZoneSession, shedfs.ZoneShare, shedfs.ZoneGroup, shedfs.ZoneUploads, shedfs.ZoneNone, shedfs.ZoneKind(99)}
	want := map[SymlinkPolicy][]SymlinkPolicy{
		def: {all, all, all, in, in, in, in, in},
		in:  {in, in, in, in, in, in, in, in},
		all: {all, all, all, all, all, all, all, all},
		no:  {no, no, no, no, no, no, no, no},
	}
	for p, ws := range want {
		for i, k := range kinds {
			if got := p.In(k); got != ws[i] {
				t.Errorf("%v.In(%v) = %v, want %v", p, k, got, ws[i])
			}
		}
	}
	// Unresolved, the default is checked as in-zone (failing closed).
	if e := CheckSymlinkTarget(def, "/usr/bin/python3", 0); e != syscall.EPERM {
		t.Errorf("CheckSymlinkTarget(shared-in-zone unresolved, absolute) = %v, want EPERM", e)
	}
	if e := CheckSymlinkTarget(def.In(shedfs.ZonePrivate), "/usr/bin/python3", 0); e != 0 {
		t.Errorf("CheckSymlinkTarget(shared-in-zone in private, absolute) = %v, want 0", e)
	}
}
