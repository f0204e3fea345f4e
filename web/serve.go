package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/links"
	"github.com/shedfs/shedfs/metadata"
)

// OpDownload is the audit operation of every link request, served or
// refused.
const OpDownload = "download"

// The audit rules of refusals that are not acl decisions: what was wrong
// with the link or the request.
const (
	ruleMalformed = "link_malformed"
	ruleSignature = "link_signature"
	ruleExpired   = "link_expired"
	ruleRevoked   = "link_revoked"
	ruleRotated   = "link_key_rotated"
	ruleUserGone  = "link_user_gone"
	ruleDeleted   = "link_target_deleted"
	ruleOutside   = "link_outside_folder"
	ruleNoEntry   = "link_no_entry"
	ruleType      = "link_not_file_or_folder"
)

// htmlCSP is the policy of a served HTML or SVG file: scripts and styles
// of the page itself run, in a sandbox with an origin of its own, and
// reach nothing — no request leaves the page, no form posts, no frame
// holds it.
const htmlCSP = "sandbox allow-scripts allow-popups allow-downloads; default-src 'none'; " +
	"script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; media-src data: blob:; " +
	"font-src data:; connect-src 'none'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// target is what a link request resolved to.
type target struct {
	link  metadata.Link
	tok   links.Token
	key   links.Key
	actor acl.Actor
	// root is the linked inode; rec the one served (root, or an entry
	// below a linked folder, named name in directory dir).
	root *shedfs.Inode
	rec  *shedfs.Inode
	dir  uint64
	name string
	// path is where rec is in the maker's view ("output/a.txt"), "" if
	// unknown: the audit trail's path.
	path string
}

// refusal is why a request is not served: an HTTP status and the rule the
// audit trail names.
type refusal struct {
	status int
	rule   string
}

// serveLink answers GET and HEAD of a link and of entries below a linked
// folder, within the limits per link, of serving slots and of store
// readers (limits.go).
func (s *Service) serveLink(w http.ResponseWriter, r *http.Request) {
	now := s.opts.Now()
	token := r.PathValue("token")
	var linkID string
	if key, err := s.signingKey(); err == nil {
		// Counted per link only once its signature holds: anyone can
		// make up IDs.
		if tok, err := links.Verify(key, token, now); err == nil || errors.Is(err, links.ErrExpired) {
			linkID = tok.ID.String()
		}
	}
	if linkID != "" {
		done, ok := s.lim.link(linkID)
		if !ok {
			s.busy(w, r, ruleBusyLink, linkID)
			return
		}
		defer done()
	}
	sl := &slot{l: s.lim}
	defer sl.release()
	if !sl.acquire() {
		s.busy(w, r, ruleBusyServer, linkID)
		return
	}
	doneReading, ok := s.lim.read(r.Context())
	if !ok {
		s.busy(w, r, ruleBusyServer, linkID)
		return
	}
	reading := true
	stopReading := func() {
		if reading {
			reading = false
			doneReading()
		}
	}
	defer stopReading()

	t, ref := s.resolve(token, r.PathValue("child"), r.PathValue("name"), now)
	ev := shedfs.Event{Time: now, User: shedfs.NoUser, Op: OpDownload, Link: t.link.ID, Client: r.RemoteAddr}
	if t.link.User != "" {
		ev.User = t.link.User
	}
	if t.rec != nil {
		ev.Zone = t.rec.Zone
		ev.Path = s.eventPath(t)
	} else if t.root != nil {
		ev.Zone = t.root.Zone
	}
	if ref.status != 0 {
		ev.Errno, ev.Reason = errnoOf(ref.status), ref.rule
		s.record(ev)
		s.fail(w, r, ref.status)
		return
	}
	cw, _ := w.(*counting)
	if t.rec.IsDir() {
		s.folder(w, r, t, stopReading)
	} else {
		stopReading()
		tag := etag(t.rec)
		if s.opts.Content != nil {
			// A pending scan is waited for without a serving slot.
			sl.release()
			sum, c, d := s.opts.Content.ForLink(r.Context(), t.rec.Ino, t.rec.Zone)
			if !sl.acquire() {
				s.busy(w, r, ruleBusyServer, linkID)
				return
			}
			if !d.Allowed() {
				status := http.StatusForbidden
				switch {
				case d.Reason == acl.ReasonScanPending:
					status = http.StatusServiceUnavailable
					w.Header().Set("Retry-After", "10")
				case d.Reason == "":
					status = http.StatusInternalServerError
				}
				ev.Errno, ev.Reason, ev.Scan = d.Errno, d.Reason, c.ScanLabel()
				if ev.Reason == "" {
					ev.Reason = "content_unavailable"
				}
				s.record(ev)
				s.fail(w, r, status)
				return
			}
			if sum != "" {
				tag, ev.SHA256 = `"`+sum+`"`, sum
			}
		}
		s.file(w, r, t, tag)
		if cw != nil && r.Method == http.MethodGet && (cw.code() == http.StatusOK || cw.code() == http.StatusPartialContent) {
			s.metrics.downloads.Inc()
			s.countDownload(t.link.ID)
		}
	}
	if cw != nil {
		ev.Bytes = cw.bytes
		if cw.code() >= 400 {
			ev.Errno, ev.Reason = errnoOf(cw.code()), http.StatusText(cw.code())
		}
	}
	s.record(ev)
}

// countDownload adds a download to the link's record, unless the store's
// disk is down to what its metadata needs.
func (s *Service) countDownload(id string) {
	if s.opts.Core.DiskShort() {
		return
	}
	if err := s.store.CountDownload(id); err != nil && !errors.Is(err, syscall.ENOENT) {
		s.log.Warn("count link download", "link", id, "err", err)
	}
}

// Door is the door of the link server in the audit trail.
const Door = "link"

// record puts e into the trail, as an event of the door "link".
func (s *Service) record(e shedfs.Event) {
	e.Door = Door
	s.opts.Core.Record(e)
}

// errnoOf is the errno an audit record shows for an HTTP refusal.
func errnoOf(status int) syscall.Errno {
	switch status {
	case http.StatusForbidden:
		return syscall.EACCES
	case http.StatusNotFound:
		return syscall.ENOENT
	case http.StatusServiceUnavailable:
		return syscall.EBUSY
	case http.StatusRequestedRangeNotSatisfiable, http.StatusPreconditionFailed:
		return syscall.EINVAL
	}
	return syscall.EIO
}

// resolve checks a request's link and finds what it opens, in the order
// that leaks least: the token's signature and expiry, the link's record
// (revoked when gone), its maker, the inode (404 once deleted), the maker's
// read access now (acl.ShareLink), then, below a folder, the child token,
// that its directory is inside the linked folder, and the entry.
func (s *Service) resolve(token, child, name string, now time.Time) (t target, ref refusal) {
	key, err := s.signingKey()
	if err != nil {
		s.log.Error("link key", "err", err)
		return t, refusal{http.StatusInternalServerError, "link_key"}
	}
	t.key = key
	if tok, err := links.Verify(key, token, now); err == nil || errors.Is(err, links.ErrExpired) {
		// The signature held: the ID is the link's, for the audit trail.
		t.link.ID = tok.ID.String()
	}
	rec, err := links.Check(key, token, now, s.lookup)
	if err != nil {
		return t, refusal{http.StatusForbidden, ruleOf(err)}
	}
	t.tok = links.TokenOf(rec)
	l, err := s.store.GetLink(rec.ID.String())
	if err != nil {
		return t, refusal{http.StatusForbidden, ruleRevoked}
	}
	t.link = *l
	if _, t.actor, err = s.makerOf(l.User, l.UserRoot); err != nil {
		return t, s.storeRefusal(err, http.StatusForbidden, ruleUserGone)
	}
	root, ref := s.live(l.Ino)
	if ref.status != 0 {
		return t, ref
	}
	t.root = root
	if d := acl.ShareLink(t.actor, acl.EntryOf(root)); !d.Allowed() {
		return t, refusal{http.StatusForbidden, d.Reason}
	}
	if child == "" {
		t.rec = root
		s.placeRoot(&t)
		return t, refusal{}
	}
	if !root.IsDir() {
		return t, refusal{http.StatusNotFound, ruleNoEntry}
	}
	dir, err := links.VerifyChild(key, t.tok, child, name)
	if err != nil {
		return t, refusal{http.StatusForbidden, ruleOf(err)}
	}
	if !s.within(dir, root.Ino) {
		return t, refusal{http.StatusNotFound, ruleOutside}
	}
	ent, err := s.store.Lookup(dir, name)
	if err != nil {
		return t, s.storeRefusal(err, http.StatusNotFound, ruleNoEntry)
	}
	if t.rec, ref = s.live(ent.Ino); ref.status != 0 {
		return t, ref
	}
	if d := acl.ShareLink(t.actor, acl.EntryOf(t.rec)); !d.Allowed() {
		return t, refusal{http.StatusForbidden, d.Reason}
	}
	t.dir, t.name = dir, name
	if p := s.dirPath(dir); p != "" {
		t.path = path.Join(p, name)
	}
	return t, refusal{}
}

// lookup finds a link's record for links.Check.
func (s *Service) lookup(id links.ID) (links.Record, bool) {
	l, err := s.store.GetLink(id.String())
	if err != nil {
		return links.Record{}, false
	}
	return links.Record{ID: id, User: l.User, Ino: l.Ino, Created: l.Created, Expires: l.Expires, Downloads: l.Downloads, KeyID: l.Key}, true
}

// live reads an inode that must still have a name: 404 once it is deleted
// (an open file keeps an unlinked inode for a while), and only files and
// folders are served.
func (s *Service) live(ino uint64) (*shedfs.Inode, refusal) {
	rec, err := s.statOf(ino)
	if err != nil {
		return nil, s.storeRefusal(err, http.StatusNotFound, ruleDeleted)
	}
	if rec.Nlink == 0 {
		return nil, refusal{http.StatusNotFound, ruleDeleted}
	}
	if !rec.IsRegular() && !rec.IsDir() {
		return nil, refusal{http.StatusNotFound, ruleType}
	}
	return rec, refusal{}
}

// storeRefusal is status with rule for a store answer that something is
// missing, and a 500 (logged) for anything else.
func (s *Service) storeRefusal(err error, status int, rule string) refusal {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG) {
		return refusal{status, rule}
	}
	s.log.Error("link request", "err", err)
	return refusal{http.StatusInternalServerError, "store_error"}
}

func ruleOf(err error) string {
	switch {
	case errors.Is(err, links.ErrSignature):
		return ruleSignature
	case errors.Is(err, links.ErrExpired):
		return ruleExpired
	case errors.Is(err, links.ErrRevoked):
		return ruleRevoked
	case errors.Is(err, links.ErrRotated):
		return ruleRotated
	}
	return ruleMalformed
}

// within reports whether directory dir is root or lies below it.
func (s *Service) within(dir, root uint64) bool {
	for range maxDepth {
		if dir == root {
			return true
		}
		d, err := s.store.GetInode(dir)
		if err != nil || !d.IsDir() || d.Parent == 0 {
			return false
		}
		dir = d.Parent
	}
	return false
}

// placeRoot finds the name and path of a linked inode now: a folder's
// from its place in the tree (the maker's name for a view root), a file's
// where it is now (placeOf), else the name it had when linked.
func (s *Service) placeRoot(t *target) {
	if t.rec.IsDir() {
		t.path = s.dirPath(t.rec.Ino)
		t.name = t.link.User
		if t.path != "" && t.path != "." {
			t.name = path.Base(t.path)
		}
		return
	}
	t.dir, t.name = s.placeOf(t.link)
	if t.name != "" {
		if p := s.dirPath(t.dir); p != "" {
			t.path = path.Join(p, t.name)
		}
		return
	}
	t.name = t.link.Name
	if t.name == "" {
		t.name = "download"
	}
}

// eventPath is the path the audit trail shows: where the entry is in the
// link maker's view.
func (s *Service) eventPath(t target) string {
	if t.path == "" {
		return ""
	}
	return "/" + t.path
}

// file serves a regular file: Content-Type by name (sniffed when the name
// says nothing), the ETag tag, Last-Modified, ranges and conditional
// requests (http.ServeContent), attachment with ?download=1.
func (s *Service) file(w http.ResponseWriter, r *http.Request, t target, tag string) {
	var content io.ReadSeeker = bytes.NewReader(nil)
	size := int64(t.rec.Size)
	if size > 0 {
		f, err := s.opts.Core.Blobs().OpenReader(t.rec.Ino)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Error("open blob for a link", "ino", t.rec.Ino, "err", err)
			s.fail(w, r, http.StatusInternalServerError)
			return
		}
		if err == nil {
			defer f.Close()
			content = io.NewSectionReader(f, 0, size)
		}
	}
	h := w.Header()
	q := r.URL.Query()
	if isMarkdown(t.name) && size <= maxMarkdownPage && q.Get("raw") != "1" && q.Get("download") != "1" && r.Header.Get("Range") == "" {
		s.markdown(w, r, t, tag, content)
		return
	}
	h.Set("ETag", tag)
	ctype := contentType(t.name, content)
	if isMarkdown(t.name) && q.Get("raw") == "1" {
		ctype = "text/plain; charset=utf-8" // shown as it is, not downloaded
	}
	h.Set("Content-Type", ctype)
	if active(ctype) {
		h.Set("Content-Security-Policy", htmlCSP)
	}
	disp := "inline"
	if r.URL.Query().Get("download") == "1" {
		disp = "attachment"
	}
	if v := mime.FormatMediaType(disp, map[string]string{"filename": t.name}); v != "" {
		disp = v
	}
	h.Set("Content-Disposition", disp)
	if rng := r.Header.Get("Range"); rng != "" {
		rng, ok := satisfiable(rng)
		if !ok {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			s.fail(w, r, http.StatusRequestedRangeNotSatisfiable)
			return
		}
		r.Header.Set("Range", rng)
		if rng == "" {
			r.Header.Del("Range")
		}
	}
	http.ServeContent(&errorPages{ResponseWriter: w, s: s, r: r}, r, t.name, t.rec.Mtime, content)
}

// markdown serves a Markdown file as a page (markdown.go), under the
// sandboxing CSP of an HTML file, with its own validator.
func (s *Service) markdown(w http.ResponseWriter, r *http.Request, t target, tag string, content io.ReadSeeker) {
	b, err := io.ReadAll(io.LimitReader(content, maxMarkdownPage))
	if err != nil {
		s.log.Error("read a Markdown file for a link", "ino", t.rec.Ino, "err", err)
		s.fail(w, r, http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("ETag", strings.TrimSuffix(tag, `"`)+`-page"`)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", htmlCSP)
	h.Set("Content-Disposition", "inline")
	page := markdownPage(t.name, string(b))
	http.ServeContent(&errorPages{ResponseWriter: w, s: s, r: r}, r, "", t.rec.Mtime, strings.NewReader(page))
}

// maxRanges is the most byte ranges one request gets: a player seeks with
// one, a download manager with a few; a request for thousands would make
// each a part with its own headers (3,000 one-byte ranges of a 100 KiB file
// were 441 KB). More get the whole file, once, as RFC 9110 allows.
const maxRanges = 16

// satisfiable adjusts a Range header before http.ServeContent reads it:
// without the zero-length suffixes ("-0", which it answers with a 206 of
// an empty, malformed range), and without any range when there are more
// than maxRanges (""); false when nothing satisfiable was asked. Other
// syntax is left to ServeContent, which answers 416 for what it cannot
// read.
func satisfiable(h string) (string, bool) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return h, true
	}
	var keep []string
	n := 0
	for r := range strings.SplitSeq(spec, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		n++
		if suffix, ok := strings.CutPrefix(r, "-"); ok && strings.Trim(suffix, "0") == "" && suffix != "" {
			continue
		}
		keep = append(keep, r)
	}
	switch {
	case n > maxRanges:
		return "", true
	case len(keep) == 0 && n > 0:
		return "", false
	}
	return "bytes=" + strings.Join(keep, ","), true
}

// errorPages turns the errors http.ServeContent answers in plain text
// (416, 412) into the link server's error pages.
type errorPages struct {
	http.ResponseWriter
	s      *Service
	r      *http.Request
	failed bool
}

func (e *errorPages) WriteHeader(code int) {
	switch {
	case e.failed:
	case code >= 400:
		e.failed = true
		e.s.fail(e.ResponseWriter, e.r, code)
	default:
		e.ResponseWriter.WriteHeader(code)
	}
}

func (e *errorPages) Write(b []byte) (int, error) {
	if e.failed {
		return len(b), nil
	}
	return e.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (e *errorPages) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// etag is the weak validator of a file's content when no checksum is at
// hand (no content service): inode, size and mtime. With one, the ETag is
// the file's SHA-256, a strong validator (so If-Range works too).
func etag(rec *shedfs.Inode) string {
	return fmt.Sprintf(`W/"%x-%x-%x"`, rec.Ino, rec.Size, rec.Mtime.UnixNano())
}

// contentType is the type of a file by its name's extension, else sniffed
// from its first 512 bytes.
func contentType(name string, content io.ReadSeeker) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	var buf [512]byte
	n, _ := io.ReadFull(content, buf[:])
	content.Seek(0, io.SeekStart)
	return http.DetectContentType(buf[:n])
}

// active reports whether a type runs scripts in a browser.
func active(ctype string) bool {
	t, _, _ := mime.ParseMediaType(ctype)
	return t == "text/html" || t == "image/svg+xml" || t == "application/xhtml+xml" ||
		t == "text/xml" || t == "application/xml" || strings.HasSuffix(t, "+xml")
}
