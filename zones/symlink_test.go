package zones

import (
	"strings"
	"syscall"
	"testing"
)

func TestSymlinkPolicyParse(t *testing.T) {
	for _, p := range []SymlinkPolicy{SymlinkInZone, SymlinkAllow, SymlinkDeny} {
		got, err := ParseSymlinkPolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParseSymlinkPolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if p, err := ParseSymlinkPolicy(""); err != nil || p != SymlinkInZone {
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
