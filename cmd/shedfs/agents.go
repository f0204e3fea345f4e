package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/mcpdoor"
)

// agentFlags are serve's flags for the doors of agents without a shell.
func agentFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mcp", Usage: "serve the MCP server (Streamable HTTP, bearer tokens of `shedfs token create --door mcp`) at this address, e.g. 127.0.0.1:8468"},
	}
}

// startAgents listens for the agent doors that the flags ask for.
func (s *serving) startAgents(c *cli.Context) error {
	addr := c.String("mcp")
	if addr == "" {
		return nil
	}
	srv := mcpdoor.New(mcpdoor.Options{Core: s.core, Logger: s.log, Version: version, Who: mcpdoor.PrincipalOfRequest})
	authn := func(token string) (mcpdoor.Principal, time.Time, error) {
		b, err := s.d.Authenticate(token, mcpdoor.Door)
		if err != nil {
			return mcpdoor.Principal{}, time.Time{}, err
		}
		g := b.Grant
		return mcpdoor.Principal{User: b.User, Session: b.Session, Grant: &g, TokenID: b.TokenID}, b.Expires, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(authn))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--mcp %s: %w", addr, err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.agents = hs
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("MCP server", "err", err)
		}
	}()
	s.log.Info("MCP server listening", "url", "http://"+ln.Addr().String()+"/mcp")
	return nil
}

// stopAgents ends the agent doors, letting calls under way finish.
func (s *serving) stopAgents() {
	if s.agents == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.agents.Shutdown(ctx); err != nil {
		s.log.Warn("MCP server", "err", err)
	}
}
