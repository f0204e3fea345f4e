package web

import (
	"html"
	"regexp"
	"strconv"
	"strings"
)

// A Markdown file behind a link is shown as a page: rendered here by a
// small renderer of the common Markdown (headings, paragraphs, lists,
// quotes, code, rules, emphasis, links) that escapes every character of
// the source first, so that the page holds no markup the file did not
// spell in Markdown: no raw HTML, no script, no attribute but a checked
// href. The page is served under the same sandboxing CSP as an HTML file,
// with the raw file one click away.

// maxMarkdownPage is the largest Markdown file rendered; a larger one is
// served as it is.
const maxMarkdownPage = 2 << 20

// isMarkdown reports whether a file of this name is Markdown.
func isMarkdown(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".md") || strings.HasSuffix(n, ".markdown")
}

var (
	reHeading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	reUL      = regexp.MustCompile(`^\s{0,3}[-*+]\s+(.*)$`)
	reOL      = regexp.MustCompile(`^\s{0,3}\d{1,9}[.)]\s+(.*)$`)
	reRule    = regexp.MustCompile(`^\s{0,3}([-*_])(\s*[-*_]){2,}\s*$`)
	reCode    = regexp.MustCompile("`([^`]+)`")
	reLink    = regexp.MustCompile(`!?\[([^\]]*)\]\(([^)\s]*)(?:\s+&quot;[^)]*&quot;)?\)`)
	reStrong  = regexp.MustCompile(`(\*\*|__)(\S(?:.*?\S)?)(\*\*|__)`)
	reEm      = regexp.MustCompile(`(^|[^\w*])[*_](\S(?:.*?\S)?)[*_]($|[^\w*])`)
	reAuto    = regexp.MustCompile(`&lt;(https?://[^\s&]+)&gt;`)
)

// safeHref is u when it is a link a page may hold: http, https, mailto,
// or relative without a scheme; "" otherwise (javascript:, data:...).
func safeHref(u string) string {
	raw := html.UnescapeString(u)
	low := strings.ToLower(strings.TrimSpace(raw))
	if i := strings.IndexAny(low, ":/?#"); i >= 0 && low[i] == ':' {
		if !strings.HasPrefix(low, "http:") && !strings.HasPrefix(low, "https:") && !strings.HasPrefix(low, "mailto:") {
			return ""
		}
	}
	return html.EscapeString(raw)
}

// inline renders the spans of one escaped line. Code spans and links,
// once made, are held out of the later rules (emphasis must not reach
// into an href).
func inline(s string) string {
	var held []string
	hold := func(h string) string {
		held = append(held, h)
		return "\x00" + strconv.Itoa(len(held)-1) + "\x00"
	}
	s = reCode.ReplaceAllStringFunc(s, func(m string) string {
		return hold("<code>" + m[1:len(m)-1] + "</code>")
	})
	s = reLink.ReplaceAllStringFunc(s, func(m string) string {
		sub := reLink.FindStringSubmatch(m)
		href := safeHref(sub[2])
		text := sub[1]
		if strings.HasPrefix(m, "!") && text == "" {
			text = "image"
		}
		if href == "" {
			return text
		}
		return hold(`<a href="`+href+`" rel="noopener noreferrer">`) + text + hold("</a>")
	})
	s = reAuto.ReplaceAllStringFunc(s, func(m string) string {
		u := reAuto.FindStringSubmatch(m)[1]
		return hold(`<a href="`+u+`" rel="noopener noreferrer">`+u) + hold("</a>")
	})
	s = reStrong.ReplaceAllString(s, "<strong>$2</strong>")
	s = reEm.ReplaceAllString(s, "$1<em>$2</em>$3")
	return reHeld.ReplaceAllStringFunc(s, func(m string) string {
		i, _ := strconv.Atoi(m[1 : len(m)-1])
		return held[i]
	})
}

var reHeld = regexp.MustCompile("\x00[0-9]+\x00")

// renderMarkdown is the HTML of Markdown source src, every character of
// which is escaped before any rule applies.
func renderMarkdown(src string) string {
	src = strings.ReplaceAll(src, "\x00", "") // the placeholders' mark
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	var out strings.Builder
	var para []string
	list := "" // "ul" or "ol" while a list is open
	quote := false
	flush := func() {
		if len(para) > 0 {
			out.WriteString("<p>" + inline(strings.Join(para, "\n")) + "</p>\n")
			para = nil
		}
	}
	closeList := func() {
		if list != "" {
			out.WriteString("</" + list + ">\n")
			list = ""
		}
	}
	closeQuote := func() {
		if quote {
			flush()
			out.WriteString("</blockquote>\n")
			quote = false
		}
	}
	for i := 0; i < len(lines); i++ {
		raw := lines[i]
		if t := strings.TrimLeft(raw, " "); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			flush()
			closeList()
			closeQuote()
			marker := strings.TrimLeft(raw, " ")[:3]
			out.WriteString("<pre><code>")
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimLeft(lines[i], " "), marker); i++ {
				out.WriteString(html.EscapeString(lines[i]) + "\n")
			}
			out.WriteString("</code></pre>\n")
			continue
		}
		l := html.EscapeString(raw)
		if q, ok := strings.CutPrefix(strings.TrimLeft(l, " "), "&gt;"); ok {
			if !quote {
				flush()
				closeList()
				out.WriteString("<blockquote>\n")
				quote = true
			}
			l = strings.TrimPrefix(q, " ")
		} else if strings.TrimSpace(l) == "" {
			flush()
			closeList()
			closeQuote()
			continue
		} else if quote && len(para) == 0 {
			closeQuote()
		}
		switch {
		case reRule.MatchString(l) && len(para) == 0:
			closeList()
			out.WriteString("<hr>\n")
		case reHeading.MatchString(l):
			flush()
			closeList()
			m := reHeading.FindStringSubmatch(l)
			n := string(rune('0' + len(m[1])))
			out.WriteString("<h" + n + ">" + inline(m[2]) + "</h" + n + ">\n")
		case reUL.MatchString(l) || reOL.MatchString(l):
			flush()
			kind, re := "ul", reUL
			if !reUL.MatchString(l) {
				kind, re = "ol", reOL
			}
			if list != kind {
				closeList()
				out.WriteString("<" + kind + ">\n")
				list = kind
			}
			out.WriteString("<li>" + inline(re.FindStringSubmatch(l)[1]) + "</li>\n")
		case strings.HasPrefix(raw, "    ") && len(para) == 0 && list == "":
			out.WriteString("<pre><code>")
			for ; i < len(lines) && (strings.HasPrefix(lines[i], "    ") || strings.TrimSpace(lines[i]) == ""); i++ {
				out.WriteString(html.EscapeString(strings.TrimPrefix(lines[i], "    ")) + "\n")
			}
			i--
			out.WriteString("</code></pre>\n")
		default:
			if list != "" && len(para) == 0 {
				closeList()
			}
			para = append(para, strings.TrimSpace(l))
		}
	}
	flush()
	closeList()
	closeQuote()
	return out.String()
}

// markdownPage is the page of a Markdown file named name.
func markdownPage(name, src string) string {
	title := html.EscapeString(name)
	return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>` + title + `</title>
<style>body{font:16px/1.55 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#222}
pre{background:#f4f4f4;padding:.8rem;overflow:auto}code{font-family:ui-monospace,monospace;font-size:.92em}
blockquote{border-left:3px solid #ccc;margin-left:0;padding-left:1rem;color:#555}
nav{font-size:.85rem;color:#666;border-bottom:1px solid #ddd;padding-bottom:.4rem;margin-bottom:1rem}</style>
</head><body><nav>` + title + ` · <a href="?raw=1">raw file</a> · <a href="?download=1">download</a></nav>
` + renderMarkdown(src) + `</body></html>
`
}
