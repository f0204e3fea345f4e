package mcpdoor

import (
	"context"

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

type okOut struct {
	OK   bool   `json:"ok"`
	Path string `json:"path"`
}

func (s *Server) addTools() {
	lim := s.opts.Limits
	tool(s, "stat", "Describe a file or directory",
		"What a path is: type, size, mode, mtime, owner and ownership mode (who else may change it), zone, a symlink's target, and who holds an edit lock on it.",
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
		"Move or rename an entry within its zone (your files, output/, share/, a group...). Across zones a move is refused: copy, then delete.",
		false, true, func(ctx context.Context, f *agentfs.FS, in moveIn) (agentfs.Info, error) {
			return f.Move(in.From, in.To, in.Replace)
		})
}
