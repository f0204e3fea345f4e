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
	"sync"
	"syscall"
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

// Folder is a folder page, and its ?format=json form: one page of the
// folder's entries (Options.PageSize; ?page=N), folders first, then by
// name, with the URLs of the pages before and after it.
type Folder struct {
	Name    string    `json:"name"`
	Expires time.Time `json:"expires"`
	Top     string    `json:"top,omitempty"`
	// Total is how many entries the folder holds; Page is this page's
	// number (from 1) of Pages.
	Total   int     `json:"total"`
	Page    int     `json:"page"`
	Pages   int     `json:"pages"`
	Prev    string  `json:"prev,omitempty"`
	Next    string  `json:"next,omitempty"`
	Entries []Entry `json:"entries"`
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
{{if gt .Pages 1}}<nav><p>{{if .Prev}}<a id="prev" href="{{.Prev}}">&larr; previous</a> · {{end}}page {{.Page}} of {{.Pages}} ({{.Total}} entries){{if .Next}} · <a id="next" href="{{.Next}}">next &rarr;</a>{{end}}</p></nav>{{end}}
<footer>Shared with shedfs. This link expires {{when .Expires}}.</footer>
</body></html>
`))

// folder serves a folder page: one page of the entries of the directory,
// folders first, each with its own link under the folder's
// (links.SignChild). Only the page's entries are read beyond their names;
// the store is given back (stopReading) before the page is sent.
func (s *Service) folder(w http.ResponseWriter, r *http.Request, t target, stopReading func()) {
	ents, err := s.listing(t.rec)
	if err != nil {
		s.log.Error("read folder for a link", "ino", t.rec.Ino, "err", err)
		s.fail(w, r, http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	size := s.opts.PageSize
	page := Folder{Name: t.name, Expires: t.link.Expires, Total: len(ents), Page: 1, Pages: max(1, (len(ents)+size-1)/size)}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > page.Pages {
			s.fail(w, r, http.StatusNotFound)
			return
		}
		page.Page = n
	}
	ents = ents[(page.Page-1)*size : min(page.Page*size, len(ents))]
	base := s.publicURL() + "/l/" + links.Sign(t.key, t.tok)
	self := base
	if t.rec != t.root {
		page.Top = base
		self = base + "/" + r.PathValue("child") + "/" + url.PathEscape(t.name)
	}
	pageURL := func(n int) string {
		v := url.Values{"page": {strconv.Itoa(n)}}
		if q.Get("format") == "json" {
			v.Set("format", "json")
		}
		return self + "?" + v.Encode()
	}
	if page.Page > 1 {
		page.Prev = pageURL(page.Page - 1)
	}
	if page.Page < page.Pages {
		page.Next = pageURL(page.Page + 1)
	}
	page.Entries = make([]Entry, 0, len(ents))
	recs := s.statPage(t.rec.Ino, ents)
	for i, e := range ents {
		rec := recs[i]
		if rec == nil {
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
	stopReading()
	if q.Get("format") == "json" {
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

// statPage reads the records of one page of a listing of dir in one
// store transaction, as the views see them; nil for an entry gone since.
func (s *Service) statPage(dir uint64, ents []shedfs.DirEntry) []*shedfs.Inode {
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name
	}
	recs, err := s.store.LookupNames(dir, names)
	if err != nil {
		recs = make([]*shedfs.Inode, len(ents))
	}
	v := s.opts.Core
	for i, rec := range recs {
		if rec == nil || rec.Ino != ents[i].Ino {
			// Gone or replaced since the listing: as listed, if it
			// is still there.
			if rec, err = v.Stat(ents[i].Ino); err != nil || rec.Nlink == 0 {
				rec = nil
			}
			recs[i] = rec
			continue
		}
		v.Overlay(rec)
	}
	return recs
}

// listingTTL is how long a folder's listing is reused at most, while the
// folder's ctime says nothing changed in it.
const listingTTL = 10 * time.Second

// maxListings is how many folders' listings are kept.
const maxListings = 8

// listings keeps the sorted listings of the folders last paged through:
// a folder of 10,000 entries costs a full read and sort, which its every
// page would pay again.
type listings struct {
	mu sync.Mutex
	m  map[uint64]listing
}

type listing struct {
	ents  []shedfs.DirEntry
	ctime time.Time
	at    time.Time
}

// listing is directory dir's entries, folders first, then by name: the
// one kept while dir's ctime is the one it was read at (every change of
// an entry sets it) and for listingTTL at most, else read again.
func (s *Service) listing(dir *shedfs.Inode) ([]shedfs.DirEntry, error) {
	now := time.Now()
	s.listings.mu.Lock()
	l, ok := s.listings.m[dir.Ino]
	s.listings.mu.Unlock()
	if ok && l.ctime.Equal(dir.Ctime) && now.Sub(l.at) < listingTTL {
		return l.ents, nil
	}
	ents, err := s.store.ReadDir(dir.Ino)
	if err != nil {
		return nil, err
	}
	sort.Slice(ents, func(i, j int) bool {
		a, b := ents[i], ents[j]
		if ad, bd := a.Mode == syscall.S_IFDIR, b.Mode == syscall.S_IFDIR; ad != bd {
			return ad
		}
		return a.Name < b.Name
	})
	s.listings.mu.Lock()
	defer s.listings.mu.Unlock()
	if s.listings.m == nil {
		s.listings.m = make(map[uint64]listing)
	}
	if len(s.listings.m) >= maxListings {
		var oldest uint64
		for ino, l := range s.listings.m {
			if oldest == 0 || l.at.Before(s.listings.m[oldest].at) {
				oldest = ino
			}
		}
		delete(s.listings.m, oldest)
	}
	s.listings.m[dir.Ino] = listing{ents: ents, ctime: dir.Ctime, at: now}
	return ents, nil
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
