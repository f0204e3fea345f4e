package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/fsapi"
	"github.com/shedfs/shedfs/mcpdoor"
)

// agentFlags are serve's flags for the doors of agents without a shell.
func agentFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mcp", Usage: "serve the MCP server (Streamable HTTP at /mcp, bearer tokens of `shedfs token create`) at this address (a port alone: on loopback), e.g. 8468"},
		&cli.StringFlag{Name: "api", Usage: "serve the file API (OpenWOP host.fs at /v1/fs/, bearer tokens of `shedfs token create`) at this address (a port alone: on loopback), e.g. 8469"},
	}
}

// startAgents listens for the agent doors that the flags ask for: each
// on its own address, so that each can be put behind its own proxy.
func (s *serving) startAgents(c *cli.Context) error {
	if addr := c.String("mcp"); addr != "" {
		srv := mcpdoor.New(mcpdoor.Options{Core: s.core, Logger: s.log, Version: version, Who: mcpdoor.PrincipalOfRequest, Admin: s.mcpAdmin(), Metrics: s.agentMetrics})
		authn := func(token string) (mcpdoor.Principal, time.Time, error) {
			b, err := s.d.Authenticate(token, mcpdoor.Door)
			if err != nil {
				return mcpdoor.Principal{}, time.Time{}, err
			}
			g := b.Grant
			return mcpdoor.Principal{User: b.User, Session: b.Session, Grant: &g, TokenID: b.TokenID, TokenReason: b.Reason}, b.Expires, nil
		}
		mux := http.NewServeMux()
		mux.Handle("/mcp", srv.HTTPHandler(authn))
		if err := s.listenAgent("--mcp", addr, mux, "MCP server", "/mcp"); err != nil {
			return err
		}
	}
	if addr := c.String("api"); addr != "" {
		api := fsapi.New(fsapi.Options{Core: s.core, Logger: s.log, Metrics: s.agentMetrics, Authenticate: func(token string) (fsapi.Principal, error) {
			b, err := s.d.Authenticate(token, fsapi.Door)
			if err != nil {
				return fsapi.Principal{}, err
			}
			g := b.Grant
			return fsapi.Principal{User: b.User, Session: b.Session, Grant: &g, TokenID: b.TokenID, TokenReason: b.Reason}, nil
		}})
		if err := s.listenAgent("--api", addr, api.Handler(), "file API", "/v1/fs/"); err != nil {
			return err
		}
	}
	return nil
}

// mcpAdmin is the daemon's admin operations, which the MCP tools that are
// not about files' bytes call (quota, trash, links...).
func (s *serving) mcpAdmin() mcpdoor.Admin {
	a, ok := s.d.Admin().(mcpdoor.Admin)
	if !ok {
		return nil
	}
	return a
}

// listenAgent serves h at addr until stopAgents.
func (s *serving) listenAgent(flag, addr string, h http.Handler, what, path string) error {
	addr, err := agentAddr(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.agents = append(s.agents, hs)
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(what, "err", err)
		}
	}()
	s.log.Info(what+" listening", "url", "http://"+ln.Addr().String()+path)
	return nil
}

// stopAgents ends the agent doors, letting calls under way finish.
func (s *serving) stopAgents() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, hs := range s.agents {
		if err := hs.Shutdown(ctx); err != nil {
			s.log.Warn("agent door", "err", err)
		}
	}
	s.agents = nil
}

// agentAddr is where an agent door listens: a port alone ("8468" or
// ":8468") is on loopback, so that a door is never exposed by omission;
// another host must be named ("0.0.0.0:8468", behind a TLS proxy).
func agentAddr(addr string) (string, error) {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("%q: give HOST:PORT or PORT (e.g. 127.0.0.1:8468)", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}
