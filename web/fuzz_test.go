package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzHandler sends the link server random paths, queries and headers,
// with a valid file link, folder link and child link among the seeds: it
// never panics, never answers 5xx, and never shows the store's host path.
func FuzzHandler(f *testing.F) {
	fx := newFixture(f)
	out := fx.alice.Roots.Output
	dir := fx.mkdir(out, "d")
	fx.write(dir.Ino, "a.txt", "hello")
	n := fx.write(out, "r.html", "<p>x</p>")
	file, err := fx.svc.Create("alice", n.Ino, out, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	folder, err := fx.svc.Create("alice", dir.Ino, 0, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	h := fx.svc.Handler()
	trim := func(u string) string { return strings.TrimPrefix(u, fx.srv.URL) }
	f.Add(trim(file.URL), "bytes=0-3", "application/json", "")
	f.Add(trim(folder.URL)+"?format=json", "", "", `W/"x"`)
	f.Add(trim(folder.URL)+"/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/a.txt", "bytes=-1", "*/*", "*")
	f.Add("/l/../../etc/passwd", "bytes=9-1,0-0", "text/html", "")
	f.Fuzz(func(t *testing.T, path, rng, accept, ifNone string) {
		req := httptest.NewRequest("GET", "http://x/", nil)
		req.URL.Path = "/" + strings.TrimPrefix(path, "/")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			req.URL.Path = "/" + strings.TrimPrefix(path[:i], "/")
			req.URL.RawQuery = path[i+1:]
		}
		req.Header.Set("Range", rng)
		req.Header.Set("Accept", accept)
		req.Header.Set("If-None-Match", ifNone)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%q: %d %s", path, w.Code, w.Body.String())
		}
		if strings.Contains(w.Body.String(), fx.dir) {
			t.Fatalf("%q: host path in the answer", path)
		}
		if w.Code == http.StatusOK && w.Header().Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("%q: no Referrer-Policy", path)
		}
	})
}
