package web

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRenderMarkdown(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string // fragments the HTML holds
		not       []string // fragments it must not
	}{
		{"heading and paragraph", "# Title #\n\nSome *em* and **strong** text\nwrapped.", []string{"<h1>Title</h1>", "<p>Some <em>em</em> and <strong>strong</strong> text\nwrapped.</p>"}, nil},
		{"lists", "- a\n- b\n\n1. one\n2. two", []string{"<ul>\n<li>a</li>\n<li>b</li>\n</ul>", "<ol>\n<li>one</li>\n<li>two</li>\n</ol>"}, nil},
		{"code", "Use `a<b>` here\n\n```go\nif a < b && c {}\n```", []string{"<code>a&lt;b&gt;</code>", "<pre><code>if a &lt; b &amp;&amp; c {}\n</code></pre>"}, nil},
		{"quote and rule", "> quoted\n\n---\n", []string{"<blockquote>\n<p>quoted</p>\n</blockquote>", "<hr>"}, nil},
		{"links", "[site](https://example.org/a_b_c) and <https://x.org>", []string{`<a href="https://example.org/a_b_c" rel="noopener noreferrer">site</a>`, `<a href="https://x.org" rel="noopener noreferrer">https://x.org</a>`}, []string{"<em>"}},
		{"raw html is text", "<script>alert(1)</script>\n<img src=x onerror=alert(1)>", []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;"}, []string{"<script", "<img"}},
		{"script links are text", "[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](data:text/html,hi)", []string{"<p>x) y) z</p>"}, []string{"href", "javascript"}},
		{"quotes stay in the href", `[a](http://x"onmouseover="alert(1))`, []string{`href="http://x&#34;onmouseover=&#34;alert(1"`}, []string{`" onmouseover`, `"onmouseover`}},
		{"code keeps markdown out", "`**not bold**`", []string{"<code>**not bold**</code>"}, []string{"<strong>"}},
		{"placeholder marks in the source", "\x000\x00 `x`", []string{"0 <code>x</code>"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := renderMarkdown(c.src)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("no %q in\n%s", w, got)
				}
			}
			for _, n := range c.not {
				if strings.Contains(strings.ToLower(got), strings.ToLower(n)) {
					t.Errorf("%q in\n%s", n, got)
				}
			}
		})
	}
}

// TestMarkdownLink: a link to a Markdown file shows it as a page under
// the HTML files' sandboxing CSP, with the raw file one click away.
func TestMarkdownLink(t *testing.T) {
	f := newFixture(t)
	out := f.alice.Roots.Output
	n := f.write(out, "notes.md", "# Notes\n\n<script>x()</script> see [raw](?raw=1)\n")
	info, err := f.svc.Create("alice", n.Ino, out, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := f.get(info.URL)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(body, "<h1>Notes</h1>") || strings.Contains(body, "<script>") || !strings.Contains(body, `<a href="?raw=1">raw file</a>`) {
		t.Fatalf("page: %d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); csp != htmlCSP {
		t.Errorf("CSP %q", csp)
	}
	resp, body = f.get(info.URL + "?raw=1")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || !strings.HasPrefix(body, "# Notes\n") {
		t.Fatalf("raw: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp, _ := f.get(info.URL + "?download=1"); !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("download: %q", resp.Header.Get("Content-Disposition"))
	}
}
