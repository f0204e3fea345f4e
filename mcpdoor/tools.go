package mcpdoor

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/shedfs/shedfs/agentfs"
)

// The tools' inputs: each field's description is what a model reads.

type pathIn struct {
	Path string `json:"path" jsonschema:"a path relative to the view root, such as output/report.md; \"\" or \".\" is the root"`
}

type listIn struct {
	Path  string `json:"path,omitempty" jsonschema:"the directory, relative to the view root (default: the root)"`
	Depth int    `json:"depth,omitempty" jsonschema:"how many levels to list: 1 (default) is the directory's own entries"`
	Limit int    `json:"limit,omitempty" jsonschema:"the most entries to answer (default and maximum: the server's bound); the answer says truncated when cut"`
}

type mkdirIn struct {
	Path    string `json:"path" jsonschema:"the directory to make, relative to the view root"`
	Parents bool   `json:"parents,omitempty" jsonschema:"also make missing directories above it, and answer an existing directory without error (mkdir -p)"`
}

type deleteIn struct {
	Path      string `json:"path" jsonschema:"what to delete, relative to the view root; it goes to the trash, from which it can be restored"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"delete a directory with everything in it; without it only an empty directory is deleted"`
}

type moveIn struct {
	From    string `json:"from" jsonschema:"the entry to move or rename"`
	To      string `json:"to" jsonschema:"its new path; the directory it goes into must exist"`
	Replace bool   `json:"replace,omitempty" jsonschema:"replace an existing entry at to (it goes to the trash); without it an existing one is ALREADY_EXISTS"`
}

type movedOut struct {
	agentfs.Info
	// CopiedAcrossZones says the move crossed zones, which a rename cannot:
	// the entry was copied (charged to the destination's quota) and the
	// source deleted to the trash.
	CopiedAcrossZones bool `json:"copied_across_zones,omitempty"`
}

type okOut struct {
	OK   bool   `json:"ok"`
	Path string `json:"path"`
}

func (s *Server) addTools() {
	s.addContentTools()
	s.addOwnershipTools()
	s.addSearchTools()
	s.addPatchTools()
	s.addArchiveTools()
	s.addAdminTools()
	s.addPageTool()
	lim := s.opts.Limits
	tool(s, "stat", "Describe a file or directory",
		"What a path is: type, size, mode, mtime, owner and ownership mode (who else may change it), zone, a symlink's target, who holds an edit lock on it, and for a file its scan state and its sha256 when already known (a stat never computes one; lock_open does).",
		true, false, func(ctx context.Context, f *agentfs.FS, in pathIn) (agentfs.Info, error) {
			return f.Stat(in.Path)
		})
	tool(s, "list", "List a directory",
		"The entries of a directory, in name order, optionally several levels deep (depth). The answer is cut at a bound and says truncated when it was.",
		true, false, func(ctx context.Context, f *agentfs.FS, in listIn) (*agentfs.Listing, error) {
			limit := in.Limit
			if limit <= 0 || limit > lim.MaxList {
				limit = lim.MaxList
			}
			return f.List(in.Path, in.Depth, limit)
		})
	tool(s, "mkdir", "Make a directory",
		"Make a directory (with parents: the missing ones above it too).",
		false, false, func(ctx context.Context, f *agentfs.FS, in mkdirIn) (agentfs.Info, error) {
			return f.Mkdir(in.Path, in.Parents)
		})
	tool(s, "delete", "Delete to the trash",
		"Delete a file, symlink or directory: it goes to the trash and can be restored. A directory needs recursive unless it is empty.",
		false, true, func(ctx context.Context, f *agentfs.FS, in deleteIn) (okOut, error) {
			if err := f.Delete(in.Path, in.Recursive); err != nil {
				return okOut{}, err
			}
			return okOut{OK: true, Path: in.Path}, nil
		})
	tool(s, "move", "Move or rename",
		"Move or rename an entry. Within a zone (your files, output/, share/, a group...) it is a rename; across zones it becomes a copy followed by a delete of the source (to the trash), and the answer says copied_across_zones.",
		false, true, func(ctx context.Context, f *agentfs.FS, in moveIn) (movedOut, error) {
			in2, err := f.Move(in.From, in.To, in.Replace)
			if e := agentfs.AsError(err); err != nil && e.Rule == "cross_zone" {
				if in2, err = f.Copy(ctx, in.From, in.To, in.Replace, lim.MaxWrite); err != nil {
					return movedOut{}, err
				}
				if err := f.Delete(in.From, true); err != nil {
					return movedOut{}, err
				}
				return movedOut{Info: in2, CopiedAcrossZones: true}, nil
			}
			return movedOut{Info: in2}, err
		})
}

type readIn struct {
	Path   string `json:"path" jsonschema:"the file to read, relative to the view root"`
	Offset int64  `json:"offset,omitempty" jsonschema:"the byte to start at (default 0); a read that does not reach the end answers next_offset"`
	Length int    `json:"length,omitempty" jsonschema:"the most bytes to answer (default and maximum: the server's bound)"`
	Base64 bool   `json:"base64,omitempty" jsonschema:"answer the bytes as base64 even when they read as text"`
}

type writeIn struct {
	Path string `json:"path" jsonschema:"the file to write, relative to the view root; its directory must exist"`
	// Exactly one of Text and Base64.
	Text   string `json:"text,omitempty" jsonschema:"the new content, as text"`
	Base64 string `json:"base64,omitempty" jsonschema:"the new content, as base64 bytes (instead of text)"`
	Mode   string `json:"mode,omitempty" jsonschema:"overwrite (default: replace the content, the old one is kept in the trash), create (fail if the file exists) or append"`
	// ExpectSHA256 guards a read-modify-write.
	ExpectSHA256 string `json:"expect_sha256,omitempty" jsonschema:"the SHA-256 the file must have now (from stat or lock_open); the write fails with CONFLICT if someone changed it since"`
}

type replaceIn struct {
	Path string `json:"path" jsonschema:"the text file to edit"`
	Old  string `json:"old" jsonschema:"the exact text to replace (whitespace included); it must appear once unless all is set"`
	New  string `json:"new" jsonschema:"the text to put in its place"`
	All  bool   `json:"all,omitempty" jsonschema:"replace every occurrence"`
}

type insertIn struct {
	Path string `json:"path" jsonschema:"the text file to edit"`
	Line int    `json:"line" jsonschema:"insert before this line (1 is the first); 0 appends at the end"`
	Text string `json:"text" jsonschema:"the lines to insert"`
}

type copyIn struct {
	From    string `json:"from" jsonschema:"the file or directory to copy"`
	To      string `json:"to" jsonschema:"the new path (in any zone you may write)"`
	Replace bool   `json:"replace,omitempty" jsonschema:"replace existing files at to"`
}

type lockIn struct {
	Path    string `json:"path" jsonschema:"the file to edit-lock"`
	Minutes int    `json:"minutes,omitempty" jsonschema:"how long the lock lasts (default 30; take it again to renew)"`
}

type saveIn struct {
	Path   string `json:"path" jsonschema:"the file whose edit lock you hold"`
	Text   string `json:"text,omitempty" jsonschema:"the new content, as text"`
	Base64 string `json:"base64,omitempty" jsonschema:"the new content, as base64 bytes (instead of text)"`
}

type replacedOut struct {
	agentfs.Info
	Replaced int `json:"replaced"`
}

// content decodes a tool's text or base64 argument, bounded.
func content(p, text, b64 string, max int) ([]byte, error) {
	if text != "" && b64 != "" {
		return nil, &agentfs.Error{Code: agentfs.CodeInvalidArgument, Path: p, Message: "give text or base64, not both"}
	}
	data := []byte(text)
	if b64 != "" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return nil, &agentfs.Error{Code: agentfs.CodeInvalidArgument, Path: p, Message: "base64: " + err.Error()}
		}
	}
	if len(data) > max {
		return nil, &agentfs.Error{Code: agentfs.CodeFileTooLarge, Path: p, Message: fmt.Sprintf("%d bytes, more than the %d one call takes: write the first part, then append the rest", len(data), max)}
	}
	return data, nil
}

func (s *Server) addContentTools() {
	lim := s.opts.Limits
	tool(s, "read", "Read a file",
		"Read a file's content from offset, at most length bytes (bounded by the server): text as text, other bytes as base64. When the answer does not reach the end, it says next_offset: read again from there.",
		true, false, func(ctx context.Context, f *agentfs.FS, in readIn) (*agentfs.Content, error) {
			n := in.Length
			if n <= 0 || n > lim.MaxRead {
				n = lim.MaxRead
			}
			return f.Read(ctx, in.Path, in.Offset, n, in.Base64)
		})
	tool(s, "write", "Write a file",
		"Write a whole file (text or base64): overwrite (the old content goes to the trash), create only, or append. Charged to the zone's quota like any write.",
		false, true, func(ctx context.Context, f *agentfs.FS, in writeIn) (agentfs.Info, error) {
			data, err := content(in.Path, in.Text, in.Base64, lim.MaxWrite)
			if err != nil {
				return agentfs.Info{}, err
			}
			mode := agentfs.Overwrite
			switch in.Mode {
			case "", "overwrite":
			case "create":
				mode = agentfs.CreateOnly
			case "append":
				mode = agentfs.Append
			default:
				return agentfs.Info{}, &agentfs.Error{Code: agentfs.CodeInvalidArgument, Path: in.Path, Message: "mode: overwrite, create or append"}
			}
			return f.Write(ctx, in.Path, data, mode, in.ExpectSHA256)
		})
	tool(s, "replace", "Replace text in a file",
		"Replace a unique snippet of a text file with new text (or every occurrence with all). Fails, changing nothing, when the snippet is missing or not unique.",
		false, false, func(ctx context.Context, f *agentfs.FS, in replaceIn) (replacedOut, error) {
			info, n, err := f.Replace(ctx, in.Path, in.Old, in.New, in.All, lim.MaxWrite)
			return replacedOut{Info: info, Replaced: n}, err
		})
	tool(s, "insert", "Insert lines into a file",
		"Insert text before a line of a text file (1 is the first line; 0 appends).",
		false, false, func(ctx context.Context, f *agentfs.FS, in insertIn) (agentfs.Info, error) {
			return f.Insert(ctx, in.Path, in.Line, in.Text, lim.MaxWrite)
		})
	tool(s, "copy", "Copy a file or directory",
		"Copy a file or a directory with what is in it, into any zone you may write (the way across zones, where move is refused).",
		false, false, func(ctx context.Context, f *agentfs.FS, in copyIn) (agentfs.Info, error) {
			return f.Copy(ctx, in.From, in.To, in.Replace, lim.MaxWrite)
		})
	tool(s, "lock_open", "Take an edit lock and read",
		"Take an edit lock on a file and read it: until you lock_save or lock_cancel (or it expires), nobody else can change, move or delete the file, through any door. Renew it by taking it again.",
		false, false, func(ctx context.Context, f *agentfs.FS, in lockIn) (*agentfs.Locked, error) {
			return f.LockOpen(ctx, in.Path, time.Duration(in.Minutes)*time.Minute, lim.MaxRead)
		})
	tool(s, "lock_save", "Save and release an edit lock",
		"Write the new content of a file whose edit lock you hold, and release the lock.",
		false, true, func(ctx context.Context, f *agentfs.FS, in saveIn) (agentfs.Info, error) {
			data, err := content(in.Path, in.Text, in.Base64, lim.MaxWrite)
			if err != nil {
				return agentfs.Info{}, err
			}
			return f.LockSave(ctx, in.Path, data)
		})
	tool(s, "lock_cancel", "Release an edit lock",
		"Release your edit lock of a file without changing it.",
		false, false, func(ctx context.Context, f *agentfs.FS, in pathIn) (okOut, error) {
			return okOut{OK: true, Path: in.Path}, f.LockCancel(in.Path)
		})
	tool(s, "force_unlock", "Release another holder's edit lock",
		"Release an edit lock someone else holds on a file you own (the owner's override).",
		false, false, func(ctx context.Context, f *agentfs.FS, in pathIn) (okOut, error) {
			return okOut{OK: true, Path: in.Path}, f.ForceUnlock(in.Path)
		})
}

type setModeIn struct {
	Path string `json:"path" jsonschema:"a file or directory in share/ or a group"`
	Mode string `json:"mode" jsonschema:"owner (only its owner may change it), owner_ro (nobody may, its owner included, until set back) or group (any member may)"`
}

type chownIn struct {
	Path  string `json:"path" jsonschema:"a file or directory you own in share/ or a group"`
	Owner string `json:"owner" jsonschema:"the user to give it to: a member of the group (anyone, in share/)"`
}

func (s *Server) addOwnershipTools() {
	tool(s, "set_mode", "Set who may change an entry",
		"Set the ownership mode of a file or directory in share/ or a group: owner, owner_ro or group. Only its owner may.",
		false, false, func(ctx context.Context, f *agentfs.FS, in setModeIn) (agentfs.Info, error) {
			return f.SetMode(in.Path, in.Mode)
		})
	tool(s, "chown", "Give an entry to another user",
		"Give a file or directory you own in share/ or a group to another user who can see it.",
		false, false, func(ctx context.Context, f *agentfs.FS, in chownIn) (agentfs.Info, error) {
			return f.Chown(in.Path, in.Owner)
		})
}
