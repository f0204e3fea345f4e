// Package mcpdoor is shedfs's Model Context Protocol server: the tools an
// agent without a shell uses on its view of the store (read, write, list,
// move, delete, edit locks...), over stdio (`shedfs mcp`, what a desktop
// client or an agent runner launches) or Streamable HTTP (`serve --mcp`,
// each request bound to a user by a bearer token). Built on the official
// Go SDK.
//
// It holds no rule: every tool is a call of agentfs, whose every step is
// a call of the core's view, so a tool is refused, charged, kept in the
// trash and audited as the same change in a FUSE view would be, with the
// door recorded as "mcp". Its own work is the tools' shapes: schemas and
// descriptions a model reads, bounded answers, and typed errors.
package mcpdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/agentfs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// Door is the name of this door in the audit trail, metrics and tokens.
const Door = "mcp"

// Limits bound every answer, so that no call floods a model's context or
// the daemon's memory.
type Limits struct {
	// MaxRead is the most bytes one read answers (the rest is read with
	// offset).
	MaxRead int
	// MaxList is the most entries one listing answers.
	MaxList int
	// MaxWrite is the most bytes one write takes.
	MaxWrite int
	// MaxGrepMatches is the most lines a grep answers; MaxGrepFile the
	// most bytes it reads of one file, MaxGrepTotal of all.
	MaxGrepMatches int
	MaxGrepFile    int64
	MaxGrepTotal   int64
	// Archive bounds zip and unzip.
	Archive agentfs.ArchiveLimits
}

// DefaultLimits are the bounds unless set.
var DefaultLimits = Limits{MaxRead: 256 << 10, MaxList: 1000, MaxWrite: 16 << 20,
	MaxGrepMatches: 200, MaxGrepFile: 8 << 20, MaxGrepTotal: 64 << 20, Archive: agentfs.DefaultArchiveLimits}

// orDefaults is l with each bound not set taken from DefaultLimits.
func (l Limits) orDefaults() Limits {
	d := DefaultLimits
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxRead, d.MaxRead)
	set(&l.MaxList, d.MaxList)
	set(&l.MaxWrite, d.MaxWrite)
	set(&l.MaxGrepMatches, d.MaxGrepMatches)
	if l.MaxGrepFile <= 0 {
		l.MaxGrepFile = d.MaxGrepFile
	}
	if l.Archive == (agentfs.ArchiveLimits{}) {
		l.Archive = d.Archive
	}
	if l.MaxGrepTotal <= 0 {
		l.MaxGrepTotal = d.MaxGrepTotal
	}
	return l
}

// Principal is who a call acts as: a user's view, or one session of it,
// narrowed by a token's grant when the call came with one.
type Principal struct {
	User    string
	Session string
	// Grant is nil for the whole view (stdio, run as the user).
	Grant   *acl.Grant
	TokenID string
	// TokenReason is why the token was made, recorded with its id.
	TokenReason string
}

// Options are what a server is built from.
type Options struct {
	Core   *vfs.Core
	Logger *slog.Logger
	Limits Limits
	// Version is the release the server reports.
	Version string
	// Who is the principal of a call: fixed for stdio, the bearer's for
	// HTTP.
	Who func(ctx context.Context, req *mcp.CallToolRequest) (Principal, error)
	// Admin, when set, carries the tools that are not about files'
	// bytes (quota, groups, trash, restore, links): the daemon's own
	// admin operations. Without it those tools are not offered, and
	// save_result_page answers no link.
	Admin Admin
	// Metrics, when set, count every tool call.
	Metrics *agentfs.Metrics
	// Uid and Gid are what new entries record as their owner's numbers
	// when the user has none of its own.
	Uid, Gid uint32
}

// Server is the tools on one core.
type Server struct {
	opts Options
	log  *slog.Logger
	mcp  *mcp.Server
}

// New returns the MCP server with every tool.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Limits = opts.Limits.orDefaults()
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{opts: opts, log: opts.Logger}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "shedfs", Title: "shedfs: a sandboxed view of a shared file store", Version: opts.Version},
		&mcp.ServerOptions{Instructions: instructions})
	s.addTools()
	return s
}

// MCP is the SDK server, to run on a transport.
func (s *Server) MCP() *mcp.Server { return s.mcp }

const instructions = `You work in a view of a shared file store. Paths are relative to the view root, never absolute and never with "..": ` +
	`your own files are at the root, output/ is for results you publish, uploads/ holds what was given to you (read-only), ` +
	`share/ is shared with everyone, groups/NAME with a group's members. Deleted files go to the trash and can be restored. ` +
	`Errors are JSON {"error":{"code":...,"message":...}}: PATH_ESCAPE, NOT_FOUND, PERMISSION_DENIED (with the rule), FILE_LOCKED, ` +
	`QUOTA_EXCEEDED, FILE_TOO_LARGE, NO_SPACE, ALREADY_EXISTS, NOT_A_DIRECTORY, IS_A_DIRECTORY, DIRECTORY_NOT_EMPTY, CONFLICT, INVALID_ARGUMENT. ` +
	`Large files are read in pieces: a read says when there is more and from which offset.`

// fsFor is the view a call acts in.
func (s *Server) fsFor(ctx context.Context, req *mcp.CallToolRequest) (*agentfs.FS, error) {
	who, err := s.opts.Who(ctx, req)
	if err != nil {
		return nil, err
	}
	core := s.opts.Core
	var sess *metadata.Session
	if who.Session != "" {
		if sess, err = core.Store().GetSession(who.User, who.Session); err != nil {
			return nil, &agentfs.Error{Code: agentfs.CodeNotFound, Message: fmt.Sprintf("session %s of %s is closed", who.Session, who.User)}
		}
	}
	v, err := core.NewView(Door, who.User, sess, vfs.ViewOptions{})
	if err != nil {
		return nil, &agentfs.Error{Code: agentfs.CodeNotFound, Message: fmt.Sprintf("the view of %s: %v", who.User, err)}
	}
	v.SetToken(who.TokenID, who.TokenReason)
	uid, gid := s.opts.Uid, s.opts.Gid
	if u, err := core.Store().GetUser(who.User); err == nil && u.Uid != 0 {
		uid, gid = u.Uid, u.Gid
	}
	return agentfs.New(v, vfs.Caller{Uid: uid, Gid: gid}, who.Grant), nil
}

// toolError is an error answered as JSON, {"error": {...}}, which a model
// reads and a program parses.
type toolError struct{ e *agentfs.Error }

func (t toolError) Error() string {
	b, err := json.Marshal(map[string]*agentfs.Error{"error": t.e})
	if err != nil {
		return t.e.Error()
	}
	return string(b)
}

// Unwrap lets the typed error be found (metrics' outcome).
func (t toolError) Unwrap() error { return t.e }

// answer turns a tool's failure into its typed answer.
func answer(err error) error {
	if err == nil {
		return nil
	}
	var e *agentfs.Error
	if !errors.As(err, &e) {
		e = agentfs.AsError(err)
	}
	return toolError{e}
}

// tool adds a tool whose handler acts in the caller's view.
func tool[In, Out any](s *Server, name, title, desc string, readOnly, destructive bool, h func(ctx context.Context, f *agentfs.FS, in In) (Out, error)) {
	t := &mcp.Tool{
		Name: name, Title: title, Description: desc,
		Annotations: &mcp.ToolAnnotations{Title: title, ReadOnlyHint: readOnly, DestructiveHint: &destructive},
	}
	mcp.AddTool(s.mcp, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (_ *mcp.CallToolResult, _ Out, err error) {
		var zero Out
		start := time.Now()
		defer func() { s.opts.Metrics.Observe(Door, name, agentfs.Outcome(err), time.Since(start)) }()
		f, err := s.fsFor(ctx, req)
		if err != nil {
			return nil, zero, answer(err)
		}
		// The view lives for this call: whatever a failed step left
		// open is released with it.
		defer f.View().Close()
		out, err := h(ctx, f, in)
		if err != nil {
			return nil, zero, answer(err)
		}
		return nil, out, nil
	})
}
