package agentfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// A unified diff, as diff -u and git diff print it.

type hunkLine struct {
	op    byte // ' ', '-' or '+'
	text  string
	noEOL bool // followed by "\ No newline at end of file"
}

type hunk struct {
	oldStart, oldLen int
	lines            []hunkLine
}

type filePatch struct {
	old, new string // paths, "" for /dev/null
	hunks    []hunk
}

// headerPath is the path of a ---/+++ line: "" for /dev/null, without a
// trailing timestamp.
func headerPath(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return ""
	}
	return s
}

var errNoHunks = fmt.Errorf("no file in the diff: a unified diff has --- and +++ lines, then @@ hunks")

// parsePatch reads the file patches of a unified diff.
func parsePatch(diff string) ([]filePatch, error) {
	lines := strings.SplitAfter(diff, "\n")
	var out []filePatch
	for i := 0; i < len(lines); {
		l := strings.TrimSuffix(lines[i], "\n")
		if !strings.HasPrefix(l, "--- ") || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "+++ ") {
			i++ // diff --git, index, commentary: skipped
			continue
		}
		fp := filePatch{old: headerPath(l[4:]), new: headerPath(strings.TrimSuffix(lines[i+1], "\n")[4:])}
		i += 2
		for i < len(lines) && strings.HasPrefix(lines[i], "@@ ") {
			h, err := parseHunkHeader(strings.TrimSuffix(lines[i], "\n"))
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			i++
			oldN, newN := 0, 0
			newLen := h.newLenHint
			for i < len(lines) && (oldN < h.oldLen || newN < newLen) {
				l := strings.TrimSuffix(lines[i], "\n")
				if l == "" && lines[i] == "\n" {
					l = " " // an empty context line some tools write without its space
				}
				if l == "" {
					break
				}
				switch l[0] {
				case ' ':
					oldN++
					newN++
				case '-':
					oldN++
				case '+':
					newN++
				case '\\':
					if len(h.lines) > 0 {
						h.lines[len(h.lines)-1].noEOL = true
					}
					i++
					continue
				default:
					return nil, fmt.Errorf("line %d: %q is not a hunk line (' ', '-', '+')", i+1, l)
				}
				h.lines = append(h.lines, hunkLine{op: l[0], text: l[1:]})
				i++
			}
			if oldN != h.oldLen || newN != newLen {
				return nil, fmt.Errorf("a hunk of %s says -%d +%d lines and has -%d +%d", nameOf(fp), h.oldLen, newLen, oldN, newN)
			}
			if i < len(lines) && strings.HasPrefix(lines[i], `\`) {
				h.lines[len(h.lines)-1].noEOL = true
				i++
			}
			fp.hunks = append(fp.hunks, h.hunk)
		}
		if len(fp.hunks) == 0 && !(fp.old != "" && fp.new == "") {
			return nil, fmt.Errorf("%s has no @@ hunk", nameOf(fp))
		}
		out = append(out, fp)
	}
	if len(out) == 0 {
		return nil, errNoHunks
	}
	return out, nil
}

func nameOf(fp filePatch) string {
	if fp.new != "" {
		return fp.new
	}
	return fp.old
}

type parsedHunk struct {
	hunk
	newLenHint int
}

// parseHunkHeader reads "@@ -l[,s] +l[,s] @@".
func parseHunkHeader(l string) (parsedHunk, error) {
	f := strings.Fields(l)
	if len(f) < 4 || f[3] != "@@" || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return parsedHunk{}, fmt.Errorf("%q is not a hunk header (@@ -l,s +l,s @@)", l)
	}
	rng := func(s string) (int, int, error) {
		a, b, ok := strings.Cut(s, ",")
		start, err := strconv.Atoi(a)
		if err != nil || start < 0 {
			return 0, 0, fmt.Errorf("%q is not a hunk header", l)
		}
		n := 1
		if ok {
			if n, err = strconv.Atoi(b); err != nil || n < 0 {
				return 0, 0, fmt.Errorf("%q is not a hunk header", l)
			}
		}
		return start, n, nil
	}
	os, on, err := rng(f[1][1:])
	if err != nil {
		return parsedHunk{}, err
	}
	_, nn, err := rng(f[2][1:])
	if err != nil {
		return parsedHunk{}, err
	}
	return parsedHunk{hunk: hunk{oldStart: os, oldLen: on}, newLenHint: nn}, nil
}

// stripGit drops git's a/ and b/ prefixes when both sides have them (or
// the other side is /dev/null).
func stripGit(fps []filePatch) {
	for i := range fps {
		fp := &fps[i]
		oldOK := fp.old == "" || strings.HasPrefix(fp.old, "a/")
		newOK := fp.new == "" || strings.HasPrefix(fp.new, "b/")
		if oldOK && newOK {
			fp.old = strings.TrimPrefix(fp.old, "a/")
			fp.new = strings.TrimPrefix(fp.new, "b/")
		}
	}
}

func (l hunkLine) line() string {
	if l.noEOL {
		return l.text
	}
	return l.text + "\n"
}

// applyHunks applies fp's hunks to src, each where its context matches
// (at its line, or the nearest place after the previous hunk, as patch
// does without fuzz).
func applyHunks(fp filePatch, src []byte) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var out strings.Builder
	pos := 0
	for n, h := range fp.hunks {
		var old, new []string
		for _, l := range h.lines {
			if l.op != '+' {
				old = append(old, l.line())
			}
			if l.op != '-' {
				new = append(new, l.line())
			}
		}
		want := h.oldStart - 1
		if h.oldLen == 0 {
			want = h.oldStart
		}
		at := -1
		for d := 0; at < 0 && (want-d >= pos || want+d <= len(lines)); d++ {
			for _, i := range []int{want - d, want + d} {
				if i >= pos && i+len(old) <= len(lines) && equalLines(lines[i:i+len(old)], old) {
					at = i
					break
				}
			}
		}
		if at < 0 {
			first := ""
			if len(old) > 0 {
				first = strings.TrimSuffix(old[0], "\n")
			}
			return nil, fmt.Errorf("hunk %d (@@ -%d,%d) does not match the file's current content (its first line %q is not where it says, nor near): read the file again and make the diff against it", n+1, h.oldStart, h.oldLen, first)
		}
		for _, l := range lines[pos:at] {
			out.WriteString(l)
		}
		for _, l := range new {
			out.WriteString(l)
		}
		pos = at + len(old)
	}
	for _, l := range lines[pos:] {
		out.WriteString(l)
	}
	return []byte(out.String()), nil
}

func equalLines(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Patched is one file a patch changed.
type Patched struct {
	Path string `json:"path"`
	// Action is modified, created, deleted or renamed (from From).
	Action string `json:"action"`
	From   string `json:"from,omitempty"`
	Hunks  int    `json:"hunks"`
}

// planned is a file patch checked against the current content.
type planned struct {
	fp      filePatch
	src     string // the path read ("" for a new file)
	sum     string // its SHA-256 when read
	before  []byte
	after   []byte
	created bool
	deleted bool
}

// ApplyPatch applies a unified diff (one or more files; new files and
// deletions through /dev/null headers; git's a/ b/ prefixes understood):
// every hunk of every file is checked against the current contents
// first, and nothing is written unless all apply. Each file is written
// through the core, guarded by the SHA-256 it had when checked, and a
// failure while writing puts back what was already written.
func (f *FS) ApplyPatch(ctx context.Context, diff string, max int) ([]Patched, error) {
	fps, err := parsePatch(diff)
	if err != nil {
		return nil, errorf(CodeInvalidArgument, "", "the patch: %v", err)
	}
	stripGit(fps)
	// The token's grant first, for every path, before anything is read.
	for _, fp := range fps {
		for _, p := range []string{fp.old, fp.new} {
			if p == "" {
				continue
			}
			clean, cerr := shedfs.CleanViewPath(p)
			if cerr != nil {
				return nil, pathError(p, cerr)
			}
			access, op := acl.AccessWrite, acl.OpWrite
			if fp.new == "" {
				access, op = acl.AccessDelete, acl.OpUnlink
			}
			if ferr := f.allow(access, clean, op, f.v.RootZone()); ferr != nil {
				return nil, ferr
			}
		}
	}
	var plan []planned
	seen := map[string]bool{}
	for _, fp := range fps {
		pl := planned{fp: fp}
		if seen[nameOf(fp)] {
			return nil, errorf(CodeInvalidArgument, nameOf(fp), "the patch changes this file twice: make one diff of it")
		}
		seen[nameOf(fp)] = true
		if fp.old == "" {
			if _, err := f.Stat(fp.new); err == nil {
				return nil, errorf(CodeExists, fp.new, "the patch creates this file, which exists already")
			} else if AsError(err).Code != CodeNotFound {
				return nil, err
			}
			pl.created = true
		} else {
			b, p, err := f.ReadAll(ctx, fp.old, max)
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(b)
			pl.src, pl.before, pl.sum = p, b, hex.EncodeToString(sum[:])
			if fp.new != "" && fp.new != fp.old {
				if _, err := f.Stat(fp.new); err == nil {
					return nil, errorf(CodeExists, fp.new, "the patch renames %s to this path, which exists already", fp.old)
				}
			}
		}
		after, err := applyHunks(fp, pl.before)
		if err != nil {
			return nil, errorf(CodeConflict, nameOf(fp), "%v; nothing was written", err)
		}
		if fp.new == "" {
			if len(after) != 0 {
				return nil, errorf(CodeConflict, fp.old, "the patch deletes this file but does not remove all of its content; nothing was written")
			}
			pl.deleted = true
		}
		if len(after) > max {
			return nil, errorf(CodeFileTooLarge, nameOf(fp), "the patched file would have %d bytes, more than the %d one call writes", len(after), max)
		}
		pl.after = after
		plan = append(plan, pl)
	}
	// Every hunk applies: write.
	var done []planned
	var out []Patched
	for _, pl := range plan {
		res, err := f.commitPlanned(ctx, pl)
		if err != nil {
			f.undoPatch(ctx, done)
			return nil, err
		}
		done = append(done, pl)
		out = append(out, res)
	}
	return out, nil
}

func (f *FS) commitPlanned(ctx context.Context, pl planned) (Patched, error) {
	fp := pl.fp
	res := Patched{Path: nameOf(fp), Hunks: len(fp.hunks)}
	switch {
	case pl.deleted:
		res.Action = "deleted"
		if err := f.expect(ctx, pl.src, pl.sum); err != nil {
			return res, err
		}
		return res, f.Delete(pl.src, false)
	case pl.created:
		res.Action = "created"
		if dir := path.Dir(fp.new); dir != "." {
			if _, err := f.Mkdir(dir, true); err != nil {
				return res, err
			}
		}
		_, err := f.Write(ctx, fp.new, pl.after, CreateOnly, "")
		return res, err
	case fp.old != fp.new:
		res.Action, res.From = "renamed", fp.old
		if err := f.expect(ctx, pl.src, pl.sum); err != nil {
			return res, err
		}
		if _, err := f.Write(ctx, fp.new, pl.after, CreateOnly, ""); err != nil {
			return res, err
		}
		if err := f.Delete(pl.src, false); err != nil {
			f.Delete(fp.new, false)
			return res, err
		}
		return res, nil
	default:
		res.Action = "modified"
		_, err := f.Write(ctx, pl.src, pl.after, Overwrite, pl.sum)
		return res, err
	}
}

// undoPatch puts back the files a patch already wrote when a later file
// failed: what it made goes (to the trash), what it changed or deleted
// gets its content back.
func (f *FS) undoPatch(ctx context.Context, done []planned) {
	for i := len(done) - 1; i >= 0; i-- {
		pl := done[i]
		switch {
		case pl.created:
			f.Delete(pl.fp.new, false)
		case pl.deleted:
			f.Write(ctx, pl.src, pl.before, CreateOnly, "")
		case pl.fp.old != pl.fp.new:
			f.Write(ctx, pl.src, pl.before, CreateOnly, "")
			f.Delete(pl.fp.new, false)
		default:
			f.Write(ctx, pl.src, pl.before, Overwrite, "")
		}
	}
}
