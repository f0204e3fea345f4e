package agentfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"path"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/vfs"
)

// chunk is how much one write through the core carries, as a kernel's
// FUSE write would.
const chunk = 1 << 20

// Content is a piece of a file, as a read answers it.
type Content struct {
	Path string `json:"path"`
	// Size is the file's whole size; Offset and Bytes the piece's.
	Size   uint64 `json:"size"`
	Offset int64  `json:"offset"`
	Bytes  int    `json:"bytes"`
	// EOF says the piece reaches the end; NextOffset, when it does not,
	// is where the next read starts.
	EOF        bool  `json:"eof"`
	NextOffset int64 `json:"next_offset,omitempty"`
	// Encoding is "text" (Text holds UTF-8) or "base64" (Base64 holds
	// the bytes of a binary piece).
	Encoding string `json:"encoding"`
	Text     string `json:"text,omitempty"`
	Base64   string `json:"base64,omitempty"`
	// Data is the piece's bytes, for a caller that sends them raw.
	Data []byte `json:"-"`
}

// looksText reports whether b reads as text: valid UTF-8 without NUL
// (a piece cut inside a character counts as text when the rest is).
func looksText(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	if utf8.Valid(b) {
		return true
	}
	for i := 1; i <= 3 && i <= len(b); i++ {
		if utf8.Valid(b[:len(b)-i]) {
			return true
		}
	}
	return false
}

// openRead opens regular file p for reading, with a symlink at its end
// followed.
func (f *FS) openRead(ctx context.Context, p string) (entry, *vfs.Handle, *Error) {
	e, ferr := f.reach(p, acl.AccessRead, acl.OpRead, true)
	if ferr != nil {
		return entry{}, nil, ferr
	}
	if e.groups || e.rec.IsDir() {
		return entry{}, nil, errorf(CodeIsADirectory, e.p, "a directory: list it")
	}
	if !e.rec.IsRegular() {
		return entry{}, nil, errorf(CodeInvalidArgument, e.p, "not a regular file")
	}
	h, _, errno := f.v.Open(ctx, e.at, syscall.O_RDONLY)
	if errno != 0 {
		return entry{}, nil, f.fail(errno, e.p)
	}
	h.Bind(paths(e.p))
	return e, h, nil
}

// Read answers at most max bytes of file p from off, as text when they
// read as text (unless raw) and base64 otherwise.
func (f *FS) Read(ctx context.Context, p string, off int64, max int, raw bool) (*Content, error) {
	if off < 0 || max < 1 {
		return nil, errorf(CodeInvalidArgument, p, "offset must be 0 or more and the length at least 1")
	}
	e, h, ferr := f.openRead(ctx, p)
	if ferr != nil {
		return nil, ferr
	}
	defer h.Release()
	rec, errno := f.v.Load(e.at)
	if errno != 0 {
		return nil, f.fail(errno, e.p)
	}
	size := rec.Size
	buf := make([]byte, min(uint64(max), sizeLeft(size, off)))
	n := 0
	for n < len(buf) {
		got, errno := h.Read(buf[n:], off+int64(n))
		if errno != 0 {
			return nil, f.fail(errno, e.p)
		}
		if got == 0 {
			break
		}
		n += got
	}
	buf = buf[:n]
	c := &Content{Path: e.p, Size: size, Offset: off, Bytes: n, Data: buf}
	c.EOF = uint64(off)+uint64(n) >= size
	if !c.EOF {
		c.NextOffset = off + int64(n)
	}
	if !raw && looksText(buf) {
		c.Encoding, c.Text = "text", string(buf)
	} else {
		c.Encoding, c.Base64 = "base64", base64.StdEncoding.EncodeToString(buf)
	}
	return c, nil
}

func sizeLeft(size uint64, off int64) uint64 {
	if uint64(off) >= size {
		return 0
	}
	return size - uint64(off)
}

// ReadAll reads the whole of file p, refusing one larger than max
// (FILE_TOO_LARGE: read it in pieces instead).
func (f *FS) ReadAll(ctx context.Context, p string, max int) ([]byte, string, error) {
	c, err := f.Read(ctx, p, 0, max+1, true)
	if err != nil {
		return nil, "", err
	}
	if c.Bytes > max {
		return nil, "", errorf(CodeFileTooLarge, c.Path, "%d bytes, more than the %d this call takes whole: read it in pieces", c.Size, max)
	}
	return c.Data, c.Path, nil
}

// WriteMode is how a write meets an existing file.
type WriteMode int

const (
	// Overwrite replaces an existing file's content (its old content is
	// kept as a version in the trash) or makes a new file.
	Overwrite WriteMode = iota
	// CreateOnly makes a new file; an existing one is ALREADY_EXISTS.
	CreateOnly
	// Append adds to the end of an existing file, or makes a new one.
	Append
)

// Write puts data into file p as mode says, through a handle of the core:
// admitted, charged and scanned like a write in a view, and seen at once
// by every view's kernel. expect, when not "", is the SHA-256 the file's
// content must have now (CONFLICT otherwise): a read-modify-write of a
// file someone else changed meanwhile fails instead of losing the change.
func (f *FS) Write(ctx context.Context, p string, data []byte, mode WriteMode, expect string) (Info, error) {
	dir, name, ferr := f.parent(p)
	if ferr != nil {
		return Info{}, ferr
	}
	fp := path.Join(dir.p, name)
	if ferr := f.allow(acl.AccessWrite, fp, acl.OpWrite, dir.at.Zone); ferr != nil {
		return Info{}, ferr
	}
	if dir.groups {
		return Info{}, f.fail(f.v.RefuseGroups(acl.OpCreate, name), fp)
	}
	var h *vfs.Handle
	var off int64
	var made *shedfs.Inode // a file this write made, taken back if it fails
	ex, ferr := f.child(dir, name)
	switch {
	case ferr == nil:
		if ex.rec.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			// Write where the link leads, within the view.
			if ex, ferr = f.walk(fp, true); ferr != nil {
				return Info{}, ferr
			}
			if ferr := f.allow(acl.AccessWrite, ex.p, acl.OpWrite, ex.at.Zone); ferr != nil {
				return Info{}, ferr
			}
		}
		if ex.groups || ex.rec.IsDir() {
			return Info{}, errorf(CodeIsADirectory, ex.p, "a directory: give a file's path")
		}
		if !ex.rec.IsRegular() {
			return Info{}, errorf(CodeInvalidArgument, ex.p, "not a regular file")
		}
		if mode == CreateOnly {
			return Info{}, errorf(CodeExists, ex.p, "already exists: overwrite it, or choose another name")
		}
		if expect != "" {
			if ferr := f.expect(ctx, ex.p, expect); ferr != nil {
				return Info{}, ferr
			}
		}
		flags := uint32(syscall.O_WRONLY)
		if mode == Overwrite {
			flags |= syscall.O_TRUNC
		} else {
			flags |= syscall.O_APPEND
		}
		var errno syscall.Errno
		if h, _, errno = f.v.Open(ctx, ex.at, flags); errno != 0 {
			return Info{}, f.fail(errno, ex.p)
		}
		h.Bind(paths(ex.p))
		fp = ex.p
	case ferr.Code == CodeNotFound:
		if expect != "" {
			return Info{}, errorf(CodeConflict, fp, "the file does not exist (any more)")
		}
		rec, errno := f.v.Create(f.caller, dir.at, name, 0o644)
		if errno != 0 {
			return Info{}, f.fail(errno, fp)
		}
		if h, _, errno = f.v.OpenNew(dir.at, name, rec, syscall.O_WRONLY); errno != 0 {
			return Info{}, f.fail(errno, fp)
		}
		h.Bind(paths(fp))
		made = rec
	default:
		return Info{}, ferr
	}
	werr := f.writeAll(h, data, off, fp)
	if errno := h.Flush(); errno != 0 && werr == nil {
		werr = f.fail(errno, fp)
	}
	h.Release()
	if werr != nil {
		if made != nil {
			// Bad input loses nothing and leaves nothing: a refused
			// write of a new file leaves no empty one behind.
			f.v.Uncreate(dir.at, name, made)
		}
		return Info{}, werr
	}
	return f.Stat(fp)
}

func (f *FS) writeAll(h *vfs.Handle, data []byte, off int64, p string) *Error {
	for len(data) > 0 {
		n := min(len(data), chunk)
		got, _, errno := h.Write(data[:n], off)
		if errno != 0 {
			return f.fail(errno, p)
		}
		data, off = data[got:], off+int64(got)
	}
	return nil
}

// expect checks that file p's content has the SHA-256 want.
func (f *FS) expect(ctx context.Context, p, want string) *Error {
	b, _, err := f.ReadAll(ctx, p, 1<<30)
	if err != nil {
		return AsError(err)
	}
	sum := sha256.Sum256(b)
	if !strings.EqualFold(hex.EncodeToString(sum[:]), want) {
		return errorf(CodeConflict, p, "the file changed since it was read (its SHA-256 is not %s): read it again", want)
	}
	return nil
}

// Replace changes the one occurrence of old in text file p into new (with
// all, every occurrence), as an editor's search and replace: old not
// found, or found more than once without all, is an error saying so.
func (f *FS) Replace(ctx context.Context, p, old, new string, all bool, max int) (Info, int, error) {
	if old == "" {
		return Info{}, 0, errorf(CodeInvalidArgument, p, "give the text to replace")
	}
	b, fp, err := f.ReadAll(ctx, p, max)
	if err != nil {
		return Info{}, 0, err
	}
	n := bytes.Count(b, []byte(old))
	switch {
	case n == 0:
		return Info{}, 0, errorf(CodeInvalidArgument, fp, "the text to replace is not in the file (it must match exactly, whitespace included)")
	case n > 1 && !all:
		return Info{}, 0, errorf(CodeInvalidArgument, fp, "the text to replace is in the file %d times: give more of its context to make it unique, or ask to replace all", n)
	}
	sum := sha256.Sum256(b)
	out := bytes.ReplaceAll(b, []byte(old), []byte(new))
	in, err := f.Write(ctx, fp, out, Overwrite, hex.EncodeToString(sum[:]))
	return in, n, err
}

// Insert puts text into text file p before line (1 is the first line;
// 0 or one past the last appends).
func (f *FS) Insert(ctx context.Context, p string, line int, text string, max int) (Info, error) {
	if line < 0 {
		return Info{}, errorf(CodeInvalidArgument, p, "line must be 0 (the end) or more")
	}
	b, fp, err := f.ReadAll(ctx, p, max)
	if err != nil {
		return Info{}, err
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if line > len(lines)+1 {
		return Info{}, errorf(CodeInvalidArgument, fp, "the file has %d lines: insert before line 1 to %d, or 0 for the end", len(lines), len(lines)+1)
	}
	if line == 0 {
		line = len(lines) + 1
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	var out bytes.Buffer
	for i, l := range lines {
		if i == line-1 {
			out.WriteString(text)
		}
		out.Write(l)
		if i == len(lines)-1 && !bytes.HasSuffix(l, []byte("\n")) && line == len(lines)+1 {
			out.WriteByte('\n')
		}
	}
	if line == len(lines)+1 {
		out.WriteString(text)
	}
	sum := sha256.Sum256(b)
	return f.Write(ctx, fp, out.Bytes(), Overwrite, hex.EncodeToString(sum[:]))
}

// Copy copies file src to dst (a new file, or with replace an existing
// one), charged to dst's holder: the way across zones, where a move is
// refused. Directories are copied with what is in them.
func (f *FS) Copy(ctx context.Context, src, dst string, replace bool, max int) (Info, error) {
	e, ferr := f.reach(src, acl.AccessRead, acl.OpRead, true)
	if ferr != nil {
		return Info{}, ferr
	}
	if e.groups || e.rec.IsDir() {
		if _, err := f.Mkdir(dst, false); err != nil {
			return Info{}, err
		}
		names, ferr := f.names(e)
		if ferr != nil {
			return Info{}, ferr
		}
		for _, n := range names {
			if _, err := f.Copy(ctx, path.Join(e.p, n), path.Join(dst, n), replace, max); err != nil {
				return Info{}, err
			}
		}
		return f.Stat(dst)
	}
	mode := CreateOnly
	if replace {
		mode = Overwrite
	}
	data, _, err := f.ReadAll(ctx, e.p, max)
	if err != nil {
		return Info{}, err
	}
	return f.Write(ctx, dst, data, mode, "")
}

// Hash is the SHA-256 of file p, read through the core.
func (f *FS) Hash(ctx context.Context, p string) (string, error) {
	_, h, ferr := f.openRead(ctx, p)
	if ferr != nil {
		return "", ferr
	}
	defer h.Release()
	sum := sha256.New()
	buf := make([]byte, chunk)
	for off := int64(0); ; {
		n, errno := h.Read(buf, off)
		if errno != 0 {
			return "", f.fail(errno, p)
		}
		if n == 0 {
			break
		}
		sum.Write(buf[:n])
		off += int64(n)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}
