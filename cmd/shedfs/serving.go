package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/agentfs"
	"github.com/shedfs/shedfs/audit"
	"github.com/shedfs/shedfs/content"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/fusefs"
	"github.com/shedfs/shedfs/fuseuring"
	"github.com/shedfs/shedfs/mcpdoor"
	"github.com/shedfs/shedfs/vfs"
	"github.com/shedfs/shedfs/web"
)

// serving is what serve and mount share: the open store, the FUSE options
// with their metrics and audit recorder, and the daemon built on them.
type serving struct {
	log  *slog.Logger
	st   *daemon.Store
	view vfs.ViewOptions
	reg  *prometheus.Registry // nil without --metrics
	rec  *audit.Recorder      // nil with --no-audit
	// content is the digest and scan queue, closed after the views and
	// before the audit trail (it records the write-closes).
	content *content.Service
	ms      *daemon.MetricsServer
	// core is what every door of the daemon calls: built here, before
	// the link server and the views, which both take it.
	core *vfs.Core
	d    *daemon.Daemon
	// links is the share-by-link server, nil without --http (link.go).
	links *web.Service
	// stopTimeout bounds the wait for views in use at the stop.
	stopTimeout time.Duration
	// agents serve the agent doors, none without --mcp and --api
	// (agents.go).
	agents []*http.Server
	// agentMetrics count the agent doors' calls, nil without --metrics.
	agentMetrics *agentfs.Metrics
}

// openServing reads the shared flags, opens the store (creating it with
// --init) and builds the core and the daemon on it; cfg gets Store, Core,
// Views, DefaultView, Content and Logger filled in.
// On error everything opened is closed again.
func openServing(c *cli.Context, log *slog.Logger, cfg daemon.Config) (*serving, error) {
	s := &serving{log: log, stopTimeout: stopTimeout}
	var err error
	if s.view, err = forcedOwner(c); err != nil {
		return nil, err
	}
	s.view.Debug = c.Bool("debug")
	fsOpts, err := fsOptions(c)
	if err != nil {
		return nil, err
	}
	if c.String("metrics") != "" {
		if s.reg, err = daemon.NewRegistry(); err != nil {
			return nil, err
		}
		if fsOpts.Metrics, err = fusefs.NewMetrics(s.reg); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		if s.agentMetrics, err = agentfs.NewMetrics(s.reg); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	if cfg.Transport, err = setTransport(c.String("transport"), log, s.reg, fuseuring.Enabled, &fsOpts); err != nil {
		return nil, err
	}
	loc, err := location(c)
	if err != nil {
		return nil, err
	}
	if s.st, err = daemon.Open(loc, daemon.OpenOptions{Create: c.Bool("init"), Logger: log}); err != nil {
		return nil, err
	}
	if s.st.Created {
		log.Info("created a new store", "store", loc.String())
	}
	if s.rec, err = startAudit(c, s.st, log); err != nil {
		s.close()
		return nil, err
	}
	var rec shedfs.Recorder // nil, not a nil *audit.Recorder
	if s.rec != nil {
		rec = s.rec
		if s.reg != nil {
			if err := daemon.RegisterAuditMetrics(s.reg, s.rec); err != nil {
				s.close()
				return nil, err
			}
		}
	}
	if s.content, err = openContent(c, s.st, log, s.reg); err != nil {
		s.close()
		return nil, err
	}
	fsOpts.Content = s.content
	cfg.Content = s.content
	if err := s.content.Start(); err != nil {
		s.close()
		return nil, err
	}
	s.core = daemon.NewCore(s.st, rec, log)
	if err := s.openLinks(c); err != nil {
		s.close()
		return nil, err
	}
	cfg.Store, cfg.Core, cfg.DefaultView, cfg.Logger = s.st, s.core, s.view, log
	// shedfs mcp reaches the daemon's MCP server over the admin socket.
	// Its tools call the daemon's admin operations, so it is made once
	// the daemon is; nothing is served before.
	var local http.Handler
	cfg.Doors = append(cfg.Doors, daemon.Route{Pattern: mcpSocketPath, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local.ServeHTTP(w, r)
	})})
	// The views are the FUSE door onto the daemon's core.
	cfg.Views = func(core *vfs.Core) daemon.Views { return fusefs.New(core, fsOpts) }
	if s.d, err = daemon.New(cfg); err != nil {
		s.close()
		return nil, err
	}
	log.Info("views' transport", "transport", cfg.Transport)
	local = mcpdoor.New(mcpdoor.Options{Core: s.core, Logger: log, Version: version, Who: mcpdoor.PrincipalOfHeader, Admin: s.mcpAdmin(), Metrics: s.agentMetrics}).TrustedHandler()
	return s, nil
}

// startDoors starts the doors the flags ask for beside the views: metrics,
// the link server, the agent doors.
func (s *serving) startDoors(c *cli.Context) error {
	if err := s.startMetrics(c); err != nil {
		return err
	}
	if err := s.startLinks(c); err != nil {
		return err
	}
	return s.startAgents(c)
}

// startMetrics serves /metrics when --metrics asks for it.
func (s *serving) startMetrics(c *cli.Context) error {
	if s.reg == nil {
		return nil
	}
	ms, err := s.d.ServeMetrics(c.String("metrics"), s.reg, c.Int("metrics-max-holders"), c.Bool("pprof"))
	if err != nil {
		return err
	}
	s.ms = ms
	return nil
}

// stop unmounts every view (waiting at most s.stopTimeout for those in
// use, then detaching them) and closes the
// rest in order: metrics, the audit trail (after the views, which feed it)
// and the store last, marking it clean.
func (s *serving) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.stopTimeout)
	defer cancel()
	if err := s.d.Stop(ctx); err != nil {
		return err
	}
	return s.close()
}

// close releases what openServing opened, views aside.
func (s *serving) close() error {
	s.stopAgents()
	s.stopLinks()
	if s.ms != nil {
		s.ms.Shutdown(context.Background())
	}
	if s.content != nil {
		s.content.Close()
	}
	if s.rec != nil {
		if err := s.rec.Close(); err != nil {
			s.log.Error("audit trail: last records not written", "err", err)
		}
	}
	if s.st != nil {
		return s.st.Close()
	}
	return nil
}
