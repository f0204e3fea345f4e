package agentfs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"syscall"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// MaxVisit is how many entries one search looks at, at most, whatever its
// other bounds: a search of a huge tree ends, and says it was cut.
const MaxVisit = 100_000

// maxLineText is how much of a matching line a grep answers.
const maxLineText = 400

// tree walks the entries below d (not d itself), directories before what
// is in them, in name order, without following symlinks; fn answers
// whether to stop. Entries outside the token's grant are not shown, as in
// a listing. It answers whether it stopped for the visit bound.
func (f *FS) tree(d entry, fn func(e entry) (stop bool)) (bool, *Error) {
	visited := 0
	var walk func(d entry) (bool, bool, *Error)
	walk = func(d entry) (stop, cut bool, ferr *Error) {
		names, ferr := f.names(d)
		if ferr != nil {
			return false, false, ferr
		}
		for _, name := range names {
			if visited++; visited > MaxVisit {
				return true, true, nil
			}
			ch, ferr := f.child(d, name)
			if ferr != nil {
				if ferr.Code == CodeNotFound || ferr.Code == CodePermissionDenied {
					continue
				}
				return false, false, ferr
			}
			if f.grant != nil && !acl.CheckGrant(*f.grant, f.v.Door(), acl.AccessList, ch.p).Allowed() {
				continue
			}
			if fn(ch) {
				return true, false, nil
			}
			if ch.groups || ch.rec.IsDir() {
				stop, cut, ferr := walk(ch)
				if ferr != nil && ferr.Code != CodePermissionDenied {
					return false, false, ferr
				}
				if stop {
					return true, cut, nil
				}
			}
		}
		return false, false, nil
	}
	_, cut, ferr := walk(d)
	return cut, ferr
}

// Found is what a glob answers.
type Found struct {
	Path    string   `json:"path"`
	Pattern string   `json:"pattern"`
	Matches []string `json:"matches"`
	// Truncated says the answer was cut at the limit (or the search at
	// MaxVisit entries): narrow the directory or the pattern.
	Truncated bool `json:"truncated,omitempty"`
}

// matchName matches pattern against rel, e's path below the searched
// directory: a pattern without "/" matches the last name (*.md finds
// every Markdown file at any depth), one with "/" the whole relative path.
func matchName(pattern, rel string) bool {
	if !strings.Contains(pattern, "/") {
		rel = path.Base(rel)
	}
	ok, _ := path.Match(pattern, rel)
	return ok
}

// Glob answers the paths below directory dir whose names match pattern
// (path.Match syntax: *, ?, [a-z]), at most limit of them.
func (f *FS) Glob(dir, pattern string, limit int) (*Found, error) {
	if limit < 1 {
		return nil, errorf(CodeInvalidArgument, dir, "limit must be at least 1")
	}
	if _, err := path.Match(pattern, ""); err != nil || pattern == "" {
		return nil, errorf(CodeInvalidArgument, dir, "a pattern such as *.md or src/*.go (*, ?, [a-z]): %q is not one", pattern)
	}
	d, ferr := f.reach(dir, acl.AccessList, acl.OpRead, true)
	if ferr != nil {
		return nil, ferr
	}
	if !d.groups && !d.rec.IsDir() {
		return nil, errorf(CodeNotADirectory, d.p, "not a directory")
	}
	out := &Found{Path: d.p, Pattern: pattern, Matches: []string{}}
	cut, ferr := f.tree(d, func(e entry) bool {
		if !matchName(pattern, strings.TrimPrefix(strings.TrimPrefix(e.p, d.p), "/")) {
			return false
		}
		if len(out.Matches) >= limit {
			out.Truncated = true
			return true
		}
		out.Matches = append(out.Matches, e.p)
		return false
	})
	if ferr != nil {
		return nil, ferr
	}
	out.Truncated = out.Truncated || cut
	return out, nil
}

// GrepOptions are a grep's pattern and bounds.
type GrepOptions struct {
	// Pattern is a regular expression (RE2), or with Fixed a string.
	Pattern    string
	Fixed      bool
	IgnoreCase bool
	// Glob, when set, narrows the files searched by name (as Glob).
	Glob string
	// MaxMatches bounds the lines answered, MaxFileBytes the bytes read
	// of one file, MaxTotalBytes of all files.
	MaxMatches    int
	MaxFileBytes  int64
	MaxTotalBytes int64
}

// Match is one matching line.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Grepped is what a grep answers.
type Grepped struct {
	Path    string  `json:"path"`
	Matches []Match `json:"matches"`
	// Lines are the matches as path:line:text, as grep -n prints them.
	Lines []string `json:"lines"`
	// FilesSearched counts the text files read; SkippedBinary the files
	// skipped as binary; Partial the files read only in part (past
	// MaxFileBytes or MaxTotalBytes).
	FilesSearched int      `json:"files_searched"`
	SkippedBinary int      `json:"skipped_binary,omitempty"`
	Partial       []string `json:"partial,omitempty"`
	// Truncated says the search stopped at a bound before the end.
	Truncated bool `json:"truncated,omitempty"`
}

// handleReader reads a handle of the core from an offset.
type handleReader struct {
	h   *vfs.Handle
	off int64
}

func (r *handleReader) Read(b []byte) (int, error) {
	n, errno := r.h.Read(b, r.off)
	if errno != 0 {
		return 0, errno
	}
	if n == 0 {
		return 0, io.EOF
	}
	r.off += int64(n)
	return n, nil
}

// Grep answers the lines of the text files at or below p that match,
// reading each through the core, within the bounds of o: binary files
// (a NUL in their first 8 KiB, or not UTF-8) are skipped.
func (f *FS) Grep(ctx context.Context, p string, o GrepOptions) (*Grepped, error) {
	if o.Pattern == "" {
		return nil, errorf(CodeInvalidArgument, p, "give a pattern")
	}
	if o.MaxMatches < 1 || o.MaxFileBytes < 1 || o.MaxTotalBytes < 1 {
		return nil, errorf(CodeInvalidArgument, p, "the bounds must be at least 1")
	}
	if o.Glob != "" {
		if _, err := path.Match(o.Glob, ""); err != nil {
			return nil, errorf(CodeInvalidArgument, p, "glob %q: %v", o.Glob, err)
		}
	}
	expr := o.Pattern
	if o.Fixed {
		expr = regexp.QuoteMeta(expr)
	}
	if o.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, errorf(CodeInvalidArgument, p, "the pattern is not a regular expression (RE2 syntax; or ask for a fixed string): %v", err)
	}
	top, ferr := f.reach(p, acl.AccessRead, acl.OpRead, true)
	if ferr != nil {
		return nil, ferr
	}
	out := &Grepped{Path: top.p, Matches: []Match{}, Lines: []string{}}
	budget := o.MaxTotalBytes
	search := func(e entry) (stop bool, ferr *Error) {
		if f.grant != nil && !acl.CheckGrant(*f.grant, f.v.Door(), acl.AccessRead, e.p).Allowed() {
			return false, nil
		}
		if budget <= 0 {
			out.Truncated = true
			return true, nil
		}
		h, _, errno := f.v.Open(ctx, e.at, syscall.O_RDONLY)
		if errno != 0 {
			if errno == syscall.EACCES || errno == syscall.EPERM || errno == syscall.ENOENT {
				return false, nil // not readable here: not searched
			}
			return false, f.fail(errno, e.p)
		}
		h.Bind(paths(e.p))
		defer h.Release()
		limit := min(o.MaxFileBytes, budget)
		br := bufio.NewReaderSize(io.LimitReader(&handleReader{h: h}, limit), 64<<10)
		head, _ := br.Peek(8 << 10)
		if !looksText(head) {
			out.SkippedBinary++
			return false, nil
		}
		out.FilesSearched++
		read, line := int64(0), 0
		for {
			l, err := br.ReadSlice('\n')
			read += int64(len(l))
			text := string(bytes.TrimRight(l, "\r\n"))
			for err == bufio.ErrBufferFull { // a line longer than the buffer: its start is what is matched
				var more []byte
				more, err = br.ReadSlice('\n')
				read += int64(len(more))
			}
			if len(l) > 0 {
				line++
				if re.MatchString(text) {
					if len(out.Matches) >= o.MaxMatches {
						out.Truncated = true
						return true, nil
					}
					if len(text) > maxLineText {
						text = strings.ToValidUTF8(text[:maxLineText], "") + "…"
					}
					out.Matches = append(out.Matches, Match{Path: e.p, Line: line, Text: text})
					out.Lines = append(out.Lines, fmt.Sprintf("%s:%d:%s", e.p, line, text))
				}
			}
			if err != nil {
				if err != io.EOF {
					if errno, ok := err.(syscall.Errno); ok {
						return false, f.fail(errno, e.p)
					}
					return false, AsError(err)
				}
				break
			}
		}
		budget -= read
		if read >= limit && uint64(read) < e.rec.Size {
			out.Partial = append(out.Partial, e.p)
			if budget <= 0 {
				out.Truncated = true
			}
		}
		return false, nil
	}
	if !top.groups && top.rec.IsRegular() {
		if _, ferr := search(top); ferr != nil {
			return nil, ferr
		}
		return out, nil
	}
	if !top.groups && !top.rec.IsDir() {
		return nil, errorf(CodeInvalidArgument, top.p, "not a file or directory")
	}
	var serr *Error
	cut, ferr := f.tree(top, func(e entry) bool {
		if e.groups || !e.rec.IsRegular() {
			return false
		}
		if o.Glob != "" && !matchName(o.Glob, strings.TrimPrefix(strings.TrimPrefix(e.p, top.p), "/")) {
			return false
		}
		if err := ctx.Err(); err != nil {
			serr = errorf(CodeInternal, e.p, "the call was cancelled")
			return true
		}
		stop, ferr := search(e)
		if ferr != nil {
			serr = ferr
			return true
		}
		return stop
	})
	if ferr != nil {
		return nil, ferr
	}
	if serr != nil {
		return nil, serr
	}
	out.Truncated = out.Truncated || cut
	return out, nil
}
