package web

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/links"
)

// Entry is one entry of a folder page. URL is empty for what a link cannot
// open (symlinks, devices).
type Entry struct {
	Name  string    `json:"name"`
	Type  string    `json:"type"`
	Size  uint64    `json:"size"`
	Mtime time.Time `json:"mtime"`
	URL   string    `json:"url,omitempty"`
}

// Folder is a folder page, and its ?format=json form.
type Folder struct {
	Name    string    `json:"name"`
	Expires time.Time `json:"expires"`
	Top     string    `json:"top,omitempty"`
	Entries []Entry   `json:"entries"`
}

// folderCSP lets a folder page use its own style and nothing else.
const folderCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

var folderPage = template.Must(template.New("folder").Funcs(template.FuncMap{
	"size": humanSize,
	// show is how a name a user chose is shown to a person everywhere
	// (shedfs.Display): a bidi override or invalid UTF-8 Go-quoted.
	"show": shedfs.Display,
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{show .Name}}</title>
<style>
body{font:16px/1.4 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem;color:#222}
h1{font-size:1.3rem;word-break:break-all}
table{width:100%;border-collapse:collapse}
td{padding:.5rem .4rem;border-bottom:1px solid #ddd;vertical-align:top}
td.n{word-break:break-all}
td.s,td.t{white-space:nowrap;color:#555;font-size:.9rem}
a{color:#0645ad;text-decoration:none}
.d a::after{content:"/"}
@media (max-width:600px){td.t{display:none}}
footer{margin-top:1rem;color:#777;font-size:.85rem}
</style></head><body>
<h1 id="name">{{show .Name}}</h1>
{{if .Top}}<p><a id="top" href="{{.Top}}">&larr; top folder</a></p>{{end}}
<table id="entries"><tbody>
{{range .Entries}}<tr class="{{if eq .Type "folder"}}d{{else}}f{{end}}"><td class="n">{{if .URL}}<a href="{{.URL}}">{{show .Name}}</a>{{else}}{{show .Name}}{{end}}</td><td class="s">{{if ne .Type "folder"}}{{size .Size}}{{end}}</td><td class="t">{{when .Mtime}}</td></tr>
{{else}}<tr><td>This folder is empty.</td></tr>
{{end}}</tbody></table>
<footer>Shared with shedfs. This link expires {{when .Expires}}.</footer>
</body></html>
`))

// folder serves a folder page: the entries of the directory, folders
// first, each with its own link under the folder's (links.SignChild).
func (s *Service) folder(w http.ResponseWriter, r *http.Request, t target) {
	ents, err := s.store.ReadDir(t.rec.Ino)
	if err != nil {
		s.log.Error("read folder for a link", "ino", t.rec.Ino, "err", err)
		s.fail(w, r, http.StatusInternalServerError)
		return
	}
	base := s.publicURL() + "/l/" + links.Sign(t.key, t.tok)
	page := Folder{Name: t.name, Expires: t.link.Expires, Entries: make([]Entry, 0, len(ents))}
	if t.rec != t.root {
		page.Top = base
	}
	for _, e := range ents {
		rec, err := s.statOf(e.Ino)
		if err != nil {
			continue
		}
		en := Entry{Name: e.Name, Type: typeOf(rec.Mode), Size: rec.Size, Mtime: rec.Mtime}
		if rec.IsDir() {
			en.Size = 0
		}
		if rec.IsDir() || rec.IsRegular() {
			en.URL = base + "/" + links.SignChild(t.key, t.tok, t.rec.Ino, e.Name) + "/" + url.PathEscape(e.Name)
		}
		page.Entries = append(page.Entries, en)
	}
	sort.SliceStable(page.Entries, func(i, j int) bool {
		a, b := page.Entries[i], page.Entries[j]
		if (a.Type == "folder") != (b.Type == "folder") {
			return a.Type == "folder"
		}
		return a.Name < b.Name
	})
	if r.URL.Query().Get("format") == "json" {
		writeJSON(w, http.StatusOK, page)
		return
	}
	var buf bytes.Buffer
	if err := folderPage.Execute(&buf, page); err != nil {
		s.log.Error("folder page", "err", err)
		s.fail(w, r, http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", folderCSP)
	w.Write(buf.Bytes())
}

func typeOf(mode uint32) string {
	switch mode & 0o170000 {
	case 0o040000:
		return "folder"
	case 0o100000:
		return "file"
	case 0o120000:
		return "symlink"
	}
	return "other"
}

// humanSize shows a size for people: 512 B, 1.5 KiB, 3.2 MiB.
func humanSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return formatUint(n) + " B"
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return strings.TrimSuffix(strings.TrimSuffix(formatFloat(float64(n)/float64(div)), "0"), ".") + " " + string("KMGTPE"[exp]) + "iB"
}

var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Status}} {{.Text}}</title>
<style>body{font:16px/1.4 system-ui,sans-serif;margin:2rem auto;max-width:40rem;padding:0 1rem;color:#222}</style>
</head><body><h1>{{.Status}} {{.Text}}</h1><p>{{.Message}}</p></body></html>
`))

// messages are what an error page says, by status: never more.
var messages = map[int]string{
	http.StatusForbidden:                    "This link is not valid: it has expired, was revoked, or no longer gives access.",
	http.StatusNotFound:                     "There is nothing here: the file or folder was deleted or moved away.",
	http.StatusMethodNotAllowed:             "Links can only be opened (GET or HEAD).",
	http.StatusServiceUnavailable:           "The server is busy. Try again in a moment.",
	http.StatusInternalServerError:          "Something went wrong on the server.",
	http.StatusRequestedRangeNotSatisfiable: "The requested range is not in the file.",
	http.StatusPreconditionFailed:           "The file changed since you last fetched it: open the link again.",
}

// fail answers with a short error page (JSON when the client asks for
// application/json): the status and one sentence, never a path or a
// trace.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, status int) {
	msg := messages[status]
	if msg == "" {
		msg = http.StatusText(status) + "."
	}
	h := w.Header()
	h.Del("Content-Disposition")
	h.Del("ETag")
	h.Del("Last-Modified")
	h.Set("Cache-Control", "no-store")
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		writeJSON(w, status, map[string]any{"status": status, "error": http.StatusText(status), "message": msg})
		return
	}
	var buf bytes.Buffer
	errorPage.Execute(&buf, map[string]any{"Status": status, "Text": http.StatusText(status), "Message": msg})
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"status":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Security-Policy")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func formatUint(n uint64) string { return strconv.FormatUint(n, 10) }

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
