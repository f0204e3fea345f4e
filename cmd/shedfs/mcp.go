package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/mcpdoor"
)

// mcpSocketPath is where the daemon's admin socket serves the MCP server
// that shedfs mcp speaks to.
const mcpSocketPath = "/v1/mcp"

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "speak MCP on stdin and stdout as a user (what a desktop client or an agent runner launches)",
		Description: "Acts in the user's view (or a session's) of the store with the same rules, quotas, trash and audit as a mounted view.\n" +
			"With a daemon serving the store, it speaks through the daemon (so every view sees a change at once); without one, it opens the store itself.",
		Flags: append([]cli.Flag{
			storeFlag(),
			&cli.StringFlag{Name: "user", Usage: "the user to act as", Required: true},
			&cli.StringFlag{Name: "session", Usage: "act in this open session of the user"},
		}, auditFlags()...),
		Action: runMCP,
	}
}

func runMCP(c *cli.Context) error {
	user, session := c.String("user"), c.String("session")
	if err := daemon.ValidPrincipalName("user", user); err != nil {
		return err
	}
	if session != "" {
		if err := daemon.ValidPrincipalName("session id", session); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	loc, err := location(c)
	if err != nil {
		return err
	}
	if _, err := daemon.DialSocket(loc.SocketPath()); err == nil {
		return bridgeMCP(ctx, loc.SocketPath(), user, session)
	} else if !errors.Is(err, daemon.ErrNoDaemon) {
		return err
	}
	log, err := quietLogger(c)
	if err != nil {
		return err
	}
	st, err := daemon.Open(loc, daemon.OpenOptions{Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Meta.GetUser(user); err != nil {
		return fmt.Errorf("no user named %s", user)
	}
	rec, err := startAudit(c, st, log)
	if err != nil {
		return err
	}
	if rec != nil {
		defer rec.Close()
	}
	var recorder shedfs.Recorder // nil, not a nil *audit.Recorder
	if rec != nil {
		recorder = rec
	}
	core := daemon.NewCore(st, recorder, log)
	srv := mcpdoor.New(mcpdoor.Options{Core: core, Logger: log, Version: version, Admin: daemon.NewLocalOn(st, core, log),
		Who: func(context.Context, *mcp.CallToolRequest) (mcpdoor.Principal, error) {
			return mcpdoor.Principal{User: user, Session: session}, nil
		}})
	if err := srv.MCP().Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// headers adds the principal to every request to the daemon.
type headers struct {
	user, session string
	base          http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(mcpdoor.HeaderUser, h.user)
	if h.session != "" {
		r.Header.Set(mcpdoor.HeaderSession, h.session)
	}
	return h.base.RoundTrip(r)
}

// bridgeMCP carries MCP messages between stdio and the daemon's MCP
// server on its admin socket, unchanged: the client on stdin talks to
// the daemon.
func bridgeMCP(ctx context.Context, socket, user, session string) error {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		IdleConnTimeout: time.Minute,
	}
	up, err := (&mcp.StreamableClientTransport{
		Endpoint:   "http://shedfs" + mcpSocketPath,
		HTTPClient: &http.Client{Transport: headers{user: user, session: session, base: tr}},
	}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("mcp: the daemon's MCP server: %w", err)
	}
	defer up.Close()
	down, err := (&mcp.StdioTransport{}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("mcp: stdio: %w", err)
	}
	defer down.Close()
	errc := make(chan error, 2)
	pump := func(from, to mcp.Connection) {
		for {
			msg, err := from.Read(ctx)
			if err != nil {
				errc <- err
				return
			}
			if err := to.Write(ctx, msg); err != nil {
				errc <- err
				return
			}
		}
	}
	go pump(down, up)
	go pump(up, down)
	select {
	case err = <-errc:
	case <-ctx.Done():
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("mcp: %w", err)
}
