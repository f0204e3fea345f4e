package shedfs

import (
	"errors"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

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

// Display is the one format of user-chosen fields: the CLI tables and
// the folder pages of links.
func TestDisplay(t *testing.T) {
	for in, want := range map[string]string{
		"":            "-",
		"-":           `"-"`,
		"/plain path": "/plain path",
		"/été/naïve":  "/été/naïve",
		"a\nb":        `"a\nb"`,
		"a\tb":        `"a\tb"`,
		"a\xffb":      `"a\xffb"`,
		"a\u202eb":    `"a\u202eb"`,
		"a\u2028b":    `"a\u2028b"`,
		`"q"`:         `"\"q\""`,
	} {
		if got := Display(in); got != want {
			t.Errorf("Display(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCleanViewPath(t *testing.T) {
	for _, c := range []struct {
		in, want string
		escape   bool
		bad      bool
	}{
		{in: "", want: ""},
		{in: ".", want: ""},
		{in: "output", want: "output"},
		{in: "output/", want: "output"},
		{in: "./output//a/./b", want: "output/a/b"},
		{in: "/etc/passwd", escape: true},
		{in: "..", escape: true},
		{in: "../etc/passwd", escape: true},
		{in: "a/../b", escape: true},
		{in: "a/..", escape: true},
		{in: "a/\x00b", bad: true},
		{in: "a/" + strings.Repeat("x", 256), bad: true},
		{in: "...", want: "..."},
	} {
		got, err := CleanViewPath(c.in)
		switch {
		case c.escape:
			if !errors.Is(err, ErrPathEscape) {
				t.Errorf("CleanViewPath(%q) = %q, %v; want ErrPathEscape", c.in, got, err)
			}
		case c.bad:
			if err == nil || errors.Is(err, ErrPathEscape) {
				t.Errorf("CleanViewPath(%q) = %q, %v; want a bad name", c.in, got, err)
			}
		case err != nil || got != c.want:
			t.Errorf("CleanViewPath(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
