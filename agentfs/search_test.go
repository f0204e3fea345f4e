package agentfs

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shedfs/shedfs/acl"
)

func put(t *testing.T, f *FS, files map[string]string) {
	t.Helper()
	ctx := context.Background()
	for p, c := range files {
		if i := strings.LastIndex(p, "/"); i > 0 {
			if _, err := f.Mkdir(p[:i], true); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.Write(ctx, p, []byte(c), Overwrite, ""); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
}

// TestSearch: glob on names and a bounded grep on text, binaries skipped.
func TestSearch(t *testing.T) {
	fx := newFixture(t)
	f := fx.fs(t, "alice", nil)
	ctx := context.Background()
	put(t, f, map[string]string{
		"docs/a.md":        "# Title\nhello world\nbye\n",
		"docs/sub/b.md":    "Hello again\r\nno\r\n",
		"docs/sub/c.txt":   "hello text\n",
		"docs/bin.dat":     "hello\x00binary",
		"docs/long.txt":    strings.Repeat("x", 100) + "\nhello at the end\n",
		"output/other.md":  "hello\n",
		"docs/sub/deep.go": "package x // hello\n",
	})
	globs := []struct {
		dir, pattern string
		limit        int
		want         []string
		truncated    bool
		code         Code
	}{
		{"docs", "*.md", 10, []string{"docs/a.md", "docs/sub/b.md"}, false, ""},
		{"docs", "sub/*.go", 10, []string{"docs/sub/deep.go"}, false, ""},
		{"", "*.md", 1, []string{"docs/a.md"}, true, ""},
		{"docs", "[", 10, nil, false, CodeInvalidArgument},
		{"docs/a.md", "*", 10, nil, false, CodeNotADirectory},
		{"../x", "*", 10, nil, false, CodePathEscape},
	}
	for _, g := range globs {
		got, err := f.Glob(g.dir, g.pattern, g.limit)
		if g.code != "" {
			wantCode(t, "glob "+g.pattern, err, g.code)
			continue
		}
		if err != nil || strings.Join(got.Matches, ",") != strings.Join(g.want, ",") || got.Truncated != g.truncated {
			t.Errorf("glob %s %s: %+v %v, want %v", g.dir, g.pattern, got, err, g.want)
		}
	}
	greps := []struct {
		name  string
		path  string
		o     GrepOptions
		lines []string
		trunc bool
		code  Code
	}{
		{"regexp", "docs", GrepOptions{Pattern: "^hel+o"}, []string{"docs/a.md:2:hello world", "docs/long.txt:2:hello at the end", "docs/sub/c.txt:1:hello text"}, false, ""},
		{"ignore case, crlf", "docs/sub", GrepOptions{Pattern: "hello", IgnoreCase: true, Glob: "*.md"}, []string{"docs/sub/b.md:1:Hello again"}, false, ""},
		{"fixed", "docs", GrepOptions{Pattern: "// hello", Fixed: true}, []string{"docs/sub/deep.go:1:package x // hello"}, false, ""},
		{"max matches", "docs", GrepOptions{Pattern: "hello", MaxMatches: 1}, []string{"docs/a.md:2:hello world"}, true, ""},
		{"max per file", "docs/long.txt", GrepOptions{Pattern: "hello", MaxFileBytes: 50}, []string{}, false, ""},
		{"one file", "docs/long.txt", GrepOptions{Pattern: "hello"}, []string{"docs/long.txt:2:hello at the end"}, false, ""},
		{"total budget", "docs", GrepOptions{Pattern: "hello", MaxTotalBytes: 30}, []string{"docs/a.md:2:hello world"}, true, ""},
		{"bad regexp", "docs", GrepOptions{Pattern: "("}, nil, false, CodeInvalidArgument},
		{"escape", "/etc", GrepOptions{Pattern: "root"}, nil, false, CodePathEscape},
	}
	for _, g := range greps {
		if g.o.MaxMatches == 0 {
			g.o.MaxMatches = 100
		}
		if g.o.MaxFileBytes == 0 {
			g.o.MaxFileBytes = 1 << 20
		}
		if g.o.MaxTotalBytes == 0 {
			g.o.MaxTotalBytes = 1 << 20
		}
		got, err := f.Grep(ctx, g.path, g.o)
		if g.code != "" {
			wantCode(t, g.name, err, g.code)
			continue
		}
		if err != nil || strings.Join(got.Lines, "|") != strings.Join(g.lines, "|") || got.Truncated != g.trunc {
			t.Errorf("%s: %+v %v, want %v", g.name, got, err, g.lines)
		}
		if g.name == "regexp" && got.SkippedBinary != 1 {
			t.Errorf("binaries skipped: %d", got.SkippedBinary)
		}
		if g.name == "max per file" && len(got.Partial) != 1 {
			t.Errorf("partial: %v", got.Partial)
		}
	}
	// A token limited to docs/ finds nothing elsewhere, and may not ask.
	tok := fx.fs(t, "alice", &acl.Grant{Root: "docs", Access: acl.AccessAll})
	if _, err := tok.Grep(ctx, "output", GrepOptions{Pattern: "hello", MaxMatches: 9, MaxFileBytes: 99, MaxTotalBytes: 99}); err == nil {
		t.Fatal("a grep outside the token's root")
	}
	ro := fx.fs(t, "alice", &acl.Grant{Access: acl.AccessList})
	wantCode(t, "grep without read access", func() error {
		_, err := ro.Grep(ctx, "docs", GrepOptions{Pattern: "x", MaxMatches: 9, MaxFileBytes: 99, MaxTotalBytes: 99})
		return err
	}(), CodePermissionDenied)
}

// TestFileTools: MIME sniffing, hexdump, line endings.
func TestFileTools(t *testing.T) {
	fx := newFixture(t)
	f := fx.fs(t, "alice", nil)
	ctx := context.Background()
	png := "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 20)
	put(t, f, map[string]string{
		"img.bin":   png,
		"notes.md":  "# hi\n",
		"page.html": "<!DOCTYPE html><html></html>",
		"data.json": `{"a":1}`,
		"dos.txt":   "a\r\nb\r\nc",
		"unix.txt":  "a\nb\n",
	})
	types := []struct{ path, mime string }{
		{"img.bin", "image/png"},
		{"notes.md", "text/markdown; charset=utf-8"},
		{"page.html", "text/html; charset=utf-8"},
		{"data.json", "application/json"},
	}
	for _, tt := range types {
		ft, err := f.FileType(ctx, tt.path)
		if err != nil || ft.MIME != tt.mime {
			t.Errorf("file_type %s: %+v %v, want %s", tt.path, ft, err, tt.mime)
		}
	}
	h, err := f.Hexdump(ctx, "img.bin", 1, 16)
	if err != nil || !strings.HasPrefix(h.Dump, "00000001  50 4e 47 0d 0a 1a 0a 00  00 00") || !strings.Contains(h.Dump, "|PNG.....") || h.EOF || h.NextOffset != 17 {
		t.Fatalf("hexdump: %+v %v", h, err)
	}
	ends := []struct {
		path, to, want string
		changed        int
		code           Code
	}{
		{"dos.txt", "lf", "a\nb\nc", 2, ""},
		{"unix.txt", "crlf", "a\r\nb\r\n", 2, ""},
		{"unix.txt", "crlf", "a\r\nb\r\n", 0, ""},
		{"unix.txt", "cr", "", 0, CodeInvalidArgument},
		{"img.bin", "lf", "", 0, CodeInvalidArgument},
		{"uploads/x", "lf", "", 0, CodeNotFound},
	}
	for _, e := range ends {
		c, err := f.LineEndings(ctx, e.path, e.to, 1<<20)
		if e.code != "" {
			wantCode(t, "line_endings "+e.path, err, e.code)
			continue
		}
		if err != nil || c.Changed != e.changed {
			t.Fatalf("line_endings %s %s: %+v %v", e.path, e.to, c, err)
		}
		if b, _, _ := f.ReadAll(ctx, e.path, 1<<20); !bytes.Equal(b, []byte(e.want)) {
			t.Errorf("line_endings %s: %q", e.path, b)
		}
	}
}
