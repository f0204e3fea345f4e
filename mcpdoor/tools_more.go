package mcpdoor

import (
	"context"

	"github.com/shedfs/shedfs/agentfs"
)

type globIn struct {
	Path    string `json:"path,omitempty" jsonschema:"the directory to search below (default: the root)"`
	Pattern string `json:"pattern" jsonschema:"a name pattern: *.md matches names at any depth; a pattern with / (src/*.go) matches the path below the directory; *, ? and [a-z] as in a shell"`
	Limit   int    `json:"limit,omitempty" jsonschema:"the most paths to answer (default and maximum: the server's bound); the answer says truncated when cut"`
}

type grepIn struct {
	Path       string `json:"path,omitempty" jsonschema:"a file, or a directory to search below (default: the root)"`
	Pattern    string `json:"pattern" jsonschema:"a regular expression (RE2 syntax), or with fixed a plain string"`
	Fixed      bool   `json:"fixed,omitempty" jsonschema:"match the pattern as a plain string"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match regardless of case"`
	Glob       string `json:"glob,omitempty" jsonschema:"search only files whose names match this pattern, such as *.go"`
	MaxMatches int    `json:"max_matches,omitempty" jsonschema:"the most matching lines to answer (default and maximum: the server's bound)"`
}

type hexIn struct {
	Path   string `json:"path" jsonschema:"the file to dump"`
	Offset int64  `json:"offset,omitempty" jsonschema:"the byte to start at (default 0)"`
	Length int    `json:"length,omitempty" jsonschema:"the most bytes to dump (default and maximum 4096)"`
}

type endingsIn struct {
	Path string `json:"path" jsonschema:"the text file to convert"`
	To   string `json:"to" jsonschema:"lf (Unix) or crlf (Windows)"`
}

// maxHexdump is the most bytes one hexdump answers: four times as many
// characters come back.
const maxHexdump = 4096

func (s *Server) addSearchTools() {
	lim := s.opts.Limits
	tool(s, "search", "Find files by name",
		"Find the files and directories below a directory whose names match a pattern (*.md, report-??.csv, src/*.go). The answer is cut at a bound and says truncated when it was. To search inside files, use grep.",
		true, false, func(ctx context.Context, f *agentfs.FS, in globIn) (*agentfs.Found, error) {
			limit := in.Limit
			if limit <= 0 || limit > lim.MaxList {
				limit = lim.MaxList
			}
			return f.Glob(in.Path, in.Pattern, limit)
		})
	tool(s, "grep", "Search text in files",
		"Search the text files in a file or below a directory for lines matching a regular expression (or a fixed string); binary files are skipped. Answers lines as path:line:text. Bounded in matches and in bytes read per file and in all: the answer says truncated, and lists the files read only in part.",
		true, false, func(ctx context.Context, f *agentfs.FS, in grepIn) (*agentfs.Grepped, error) {
			n := in.MaxMatches
			if n <= 0 || n > lim.MaxGrepMatches {
				n = lim.MaxGrepMatches
			}
			return f.Grep(ctx, in.Path, agentfs.GrepOptions{Pattern: in.Pattern, Fixed: in.Fixed, IgnoreCase: in.IgnoreCase, Glob: in.Glob,
				MaxMatches: n, MaxFileBytes: lim.MaxGrepFile, MaxTotalBytes: lim.MaxGrepTotal})
		})
	tool(s, "file_type", "Tell a file's type",
		"The MIME type of a file, from its first bytes (sniffed) and its extension, and whether it reads as text.",
		true, false, func(ctx context.Context, f *agentfs.FS, in pathIn) (*agentfs.FileType, error) {
			return f.FileType(ctx, in.Path)
		})
	tool(s, "hexdump", "Dump bytes in hex",
		"A piece of a file as hexdump -C shows it (offset, hex bytes, printable characters), at most 4096 bytes from offset; next_offset says where to go on.",
		true, false, func(ctx context.Context, f *agentfs.FS, in hexIn) (*agentfs.Hexdump, error) {
			n := in.Length
			if n <= 0 || n > maxHexdump {
				n = maxHexdump
			}
			return f.Hexdump(ctx, in.Path, in.Offset, n)
		})
	tool(s, "line_endings", "Convert line endings",
		"Convert a text file's line endings to lf or crlf (the old content is kept in the trash). A file already in that style is left as it is (changed 0).",
		false, false, func(ctx context.Context, f *agentfs.FS, in endingsIn) (*agentfs.Converted, error) {
			return f.LineEndings(ctx, in.Path, in.To, lim.MaxWrite)
		})
}

type patchIn struct {
	Patch string `json:"patch" jsonschema:"a unified diff (diff -u or git diff) of one or more files, paths relative to the view root (git's a/ and b/ prefixes are understood); --- /dev/null makes a new file, +++ /dev/null deletes one"`
}

type patchOut struct {
	Files []agentfs.Patched `json:"files"`
}

func (s *Server) addPatchTools() {
	lim := s.opts.Limits
	tool(s, "apply_patch", "Apply a unified diff",
		"Apply a unified diff to one or more files: every hunk is checked against the files' current content first, and nothing is written unless all of them apply (CONFLICT says which hunk does not: read the file again and make the diff against it). Changed files keep their old content in the trash.",
		false, true, func(ctx context.Context, f *agentfs.FS, in patchIn) (patchOut, error) {
			files, err := f.ApplyPatch(ctx, in.Patch, lim.MaxWrite)
			return patchOut{Files: files}, err
		})
}

type zipIn struct {
	Paths []string `json:"paths" jsonschema:"the files and directories to pack (directories with everything in them)"`
	To    string   `json:"to" jsonschema:"the new archive, ending in .zip, such as output/results.zip"`
}

type unzipIn struct {
	Path string `json:"path" jsonschema:"the .zip archive to unpack"`
	To   string `json:"to" jsonschema:"the directory to unpack into (made if missing); files that exist there already make the call fail, writing nothing"`
}

type zipinfoIn struct {
	Path  string `json:"path" jsonschema:"the .zip archive to list"`
	Limit int    `json:"limit,omitempty" jsonschema:"the most entries to answer (default and maximum: the server's bound); count and bytes are the whole archive's"`
}

func (s *Server) addArchiveTools() {
	lim := s.opts.Limits
	tool(s, "zip", "Pack files into a zip",
		"Pack files and directories into a new .zip archive in the view (names in it are the paths from the sources' parent directory; symlinks are skipped and listed). Bounded in entries and bytes.",
		false, false, func(ctx context.Context, f *agentfs.FS, in zipIn) (*agentfs.Zipped, error) {
			return f.Zip(ctx, in.Paths, in.To, lim.Archive)
		})
	tool(s, "unzip", "Unpack a zip",
		"Unpack a .zip archive into a directory. The archive is checked whole first, and nothing is written if any entry is absolute, climbs out with .., is a symlink, or exists already, or if it would unpack past the bounds, your quota or a zip bomb's compression ratio. Every file is charged and scanned like any write.",
		false, false, func(ctx context.Context, f *agentfs.FS, in unzipIn) (*agentfs.Unzipped, error) {
			return f.Unzip(ctx, in.Path, in.To, lim.Archive)
		})
	tool(s, "zipinfo", "List a zip's entries",
		"The entries of a .zip archive (name, size, compressed size, date, mode; refused names the rule unzip would refuse an entry by), cut at a bound.",
		true, false, func(ctx context.Context, f *agentfs.FS, in zipinfoIn) (*agentfs.ZipListing, error) {
			n := in.Limit
			if n <= 0 || n > lim.MaxList {
				n = lim.MaxList
			}
			return f.ZipInfo(ctx, in.Path, n)
		})
}
