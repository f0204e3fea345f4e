package agentfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"
)

// sniffLen is how much of a file MIME sniffing reads, as
// http.DetectContentType considers.
const sniffLen = 512

// FileType is what a file's bytes and name say it is.
type FileType struct {
	Path string `json:"path"`
	Size uint64 `json:"size"`
	// MIME is the best guess: the sniffed type, unless sniffing only
	// says "some text" or "some bytes" and the extension says more.
	MIME string `json:"mime"`
	// Sniffed is what the first 512 bytes say (http.DetectContentType);
	// ByExtension what the name's extension says, if anything.
	Sniffed     string `json:"sniffed"`
	ByExtension string `json:"by_extension,omitempty"`
	// Text says the first bytes read as UTF-8 text.
	Text bool `json:"text"`
}

// FileType answers the MIME type of file p, from its first bytes (read
// through the core) and its extension.
func (f *FS) FileType(ctx context.Context, p string) (*FileType, error) {
	c, err := f.Read(ctx, p, 0, sniffLen, true)
	if err != nil {
		return nil, err
	}
	ft := &FileType{Path: c.Path, Size: c.Size, Sniffed: http.DetectContentType(c.Data), Text: looksText(c.Data)}
	ft.ByExtension = mime.TypeByExtension(strings.ToLower(path.Ext(c.Path)))
	ft.MIME = ft.Sniffed
	generic := strings.HasPrefix(ft.Sniffed, "text/plain") || ft.Sniffed == "application/octet-stream"
	if generic && ft.ByExtension != "" {
		ft.MIME = ft.ByExtension
	}
	return ft, nil
}

// Hexdump is a piece of a file as hexdump -C shows it.
type Hexdump struct {
	Path   string `json:"path"`
	Size   uint64 `json:"size"`
	Offset int64  `json:"offset"`
	Bytes  int    `json:"bytes"`
	EOF    bool   `json:"eof"`
	// NextOffset, when the piece does not reach the end, is where the
	// next dump starts.
	NextOffset int64  `json:"next_offset,omitempty"`
	Dump       string `json:"dump"`
}

// Hexdump answers at most max bytes of file p from off, as hexdump -C
// prints them (offsets are the file's).
func (f *FS) Hexdump(ctx context.Context, p string, off int64, max int) (*Hexdump, error) {
	c, err := f.Read(ctx, p, off, max, true)
	if err != nil {
		return nil, err
	}
	return &Hexdump{Path: c.Path, Size: c.Size, Offset: off, Bytes: c.Bytes, EOF: c.EOF, NextOffset: c.NextOffset, Dump: dump(c.Data, off)}, nil
}

func dump(b []byte, off int64) string {
	var out strings.Builder
	for i := 0; i < len(b); i += 16 {
		line := b[i:min(i+16, len(b))]
		fmt.Fprintf(&out, "%08x  ", off+int64(i))
		for j := 0; j < 16; j++ {
			if j < len(line) {
				fmt.Fprintf(&out, "%02x ", line[j])
			} else {
				out.WriteString("   ")
			}
			if j == 7 {
				out.WriteByte(' ')
			}
		}
		out.WriteString(" |")
		for _, c := range line {
			if c < 0x20 || c > 0x7e {
				c = '.'
			}
			out.WriteByte(c)
		}
		out.WriteString("|\n")
	}
	return out.String()
}

// Converted is what a conversion of line endings did.
type Converted struct {
	Info
	// Endings is the style now; Changed how many line ends changed
	// (0: the file was left as it was).
	Endings string `json:"endings"`
	Changed int    `json:"changed"`
}

// LineEndings converts text file p's line endings to "lf" or "crlf",
// writing it through the core (as an overwrite: the old content is kept
// in the trash) only when something changes.
func (f *FS) LineEndings(ctx context.Context, p, to string, max int) (*Converted, error) {
	if to != "lf" && to != "crlf" {
		return nil, errorf(CodeInvalidArgument, p, "convert to lf or crlf, not %q", to)
	}
	b, fp, err := f.ReadAll(ctx, p, max)
	if err != nil {
		return nil, err
	}
	if !looksText(b) {
		return nil, errorf(CodeInvalidArgument, fp, "not a text file (a NUL byte, or not UTF-8): its line endings are not converted")
	}
	crlf := bytes.Count(b, []byte("\r\n"))
	lf := bytes.Count(b, []byte("\n")) - crlf
	out, changed := b, 0
	switch {
	case to == "lf" && crlf > 0:
		out, changed = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), crlf
	case to == "crlf" && lf > 0:
		out = bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
		changed = lf
	}
	if changed == 0 {
		in, err := f.Stat(fp)
		if err != nil {
			return nil, err
		}
		return &Converted{Info: in, Endings: to}, nil
	}
	sum := sha256.Sum256(b)
	in, err := f.Write(ctx, fp, out, Overwrite, hex.EncodeToString(sum[:]))
	if err != nil {
		return nil, err
	}
	return &Converted{Info: in, Endings: to, Changed: changed}, nil
}
