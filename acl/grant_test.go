package acl

import (
	"testing"
)

func TestParseAccess(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Access
		bad  bool
	}{
		{in: "read", want: AccessRead},
		{in: "read, list", want: AccessRead | AccessList},
		{in: "all", want: AccessAll},
		{in: "write,all", want: AccessAll},
		{in: "metadata,archive,move,delete", want: AccessMetadata | AccessArchive | AccessMove | AccessDelete},
		{in: "", bad: true},
		{in: ",", bad: true},
		{in: "read,exec", bad: true},
		{in: "READ", bad: true},
	} {
		got, err := ParseAccess(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("ParseAccess(%q) = %v, %v; want %v, bad %v", c.in, got, err, c.want, c.bad)
		}
	}
	if s := (AccessRead | AccessList).String(); s != "read,list" {
		t.Errorf("String = %q", s)
	}
	if s := AccessAll.String(); s != "all" {
		t.Errorf("String = %q", s)
	}
	for _, n := range AccessNames() {
		a, err := ParseAccess(n)
		if err != nil || a.String() != n {
			t.Errorf("%s does not round-trip: %v %v", n, a, err)
		}
	}
}

func TestValidGrantPattern(t *testing.T) {
	for p, ok := range map[string]bool{"*.md": true, "output/*": true, "a/b/c": true, "": false, "/etc": false, "[": false} {
		if err := ValidGrantPattern(p); (err == nil) != ok {
			t.Errorf("ValidGrantPattern(%q) = %v, want ok %v", p, err, ok)
		}
	}
}

func TestCheckGrant(t *testing.T) {
	ro := Grant{Access: AccessRead | AccessList}
	rooted := Grant{Root: "output", Access: AccessAll}
	globs := Grant{Access: AccessAll, Allow: []string{"*.md", "docs"}, Deny: []string{"secret*", "docs/private/*"}}
	doors := Grant{Access: AccessAll, Doors: []string{"mcp"}}
	for _, c := range []struct {
		name   string
		g      Grant
		door   string
		access Access
		path   string
		want   string
	}{
		{"read-only reads", ro, "mcp", AccessRead, "notes.txt", ""},
		{"read-only lists the root", ro, "mcp", AccessList, "", ""},
		{"read-only cannot write", ro, "mcp", AccessWrite, "notes.txt", ReasonTokenAccess},
		{"read-only cannot delete", ro, "api", AccessDelete, "notes.txt", ReasonTokenAccess},
		{"two kinds need both", ro, "api", AccessRead | AccessWrite, "x", ReasonTokenAccess},
		{"root itself", rooted, "mcp", AccessList, "output", ""},
		{"below the root", rooted, "mcp", AccessWrite, "output/a/b.txt", ""},
		{"beside the root", rooted, "mcp", AccessRead, "outputs/x", ReasonTokenScope},
		{"above the root", rooted, "mcp", AccessList, "", ReasonTokenScope},
		{"another zone", rooted, "mcp", AccessRead, "share/x", ReasonTokenScope},
		{"allowed by name at depth", globs, "api", AccessRead, "a/b/readme.md", ""},
		{"allowed directory covers below", globs, "api", AccessRead, "docs/guide/x.txt", ""},
		{"not allowed", globs, "api", AccessRead, "main.go", ReasonTokenScope},
		{"denied by name", globs, "api", AccessRead, "secret.md", ReasonTokenScope},
		{"denied directory covers below", globs, "api", AccessRead, "x/secrets/a.md", ReasonTokenScope},
		{"denied by path", globs, "api", AccessRead, "docs/private/a.md", ReasonTokenScope},
		{"denied by path, deeper", globs, "api", AccessRead, "docs/private/a/b.txt", ReasonTokenScope},
		{"door allowed", doors, "mcp", AccessRead, "x", ""},
		{"door not allowed", doors, "api", AccessRead, "x", ReasonTokenScope},
		{"scope before access", Grant{Root: "output", Access: AccessRead}, "mcp", AccessWrite, "uploads/x", ReasonTokenScope},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := CheckGrant(c.g, c.door, c.access, c.path)
			if d.Reason != c.want {
				t.Fatalf("CheckGrant(%+v, %s, %v, %q) = %v, want reason %q", c.g, c.door, c.access, c.path, d, c.want)
			}
			if c.want != "" && !d.Refused() {
				t.Fatalf("a refusal must count: %+v", d)
			}
		})
	}
}
