package main

import (
	"context"
	"errors"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

// stopTimeout bounds how long a stop waits for views to finish serving and
// for admin requests in flight.
const stopTimeout = 30 * time.Second

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "mount a view per user under the mount root and serve the admin API until SIGTERM",
		Flags: append([]cli.Flag{
			storeFlag(),
			&cli.StringFlag{Name: "mount-root", Usage: "directory (made mode 0700) holding one view per user", Required: true},
			&cli.IntFlag{Name: "uid", Value: -1, Usage: "present entries as owned by this uid in views of users without an owner of their own"},
			&cli.IntFlag{Name: "gid", Value: -1, Usage: "present entries as owned by this gid in views of users without an owner of their own"},
			&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request"},
		}, append(fsFlags(), auditFlags()...)...),
		Action: runServe,
	}
}

func runServe(c *cli.Context) error {
	if c.NArg() != 0 {
		return errors.New("serve: takes no arguments (views go under --mount-root)")
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	if err := daemon.CheckFuse(); err != nil {
		return err
	}
	viewOpts, err := forcedOwner(c)
	if err != nil {
		return err
	}
	viewOpts.Debug = c.Bool("debug")
	fsOpts, err := fsOptions(c)
	if err != nil {
		return err
	}
	var reg *prometheus.Registry
	if c.String("metrics") != "" {
		if reg, err = daemon.NewRegistry(&fsOpts); err != nil {
			return err
		}
	}
	st, err := daemon.OpenStore(c.String("store"), daemon.OpenOptions{Create: true, Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	rec, err := startAudit(c, st.Meta, log)
	if err != nil {
		return err
	}
	if rec != nil {
		// Closed after the views stop, before the store closes.
		defer rec.Close()
		fsOpts.Recorder = rec
		if reg != nil {
			if err := daemon.RegisterAuditMetrics(reg, rec); err != nil {
				return err
			}
		}
	}
	d, err := daemon.New(daemon.Config{
		Store:       st,
		MountRoot:   c.String("mount-root"),
		DefaultView: viewOpts,
		FS:          fsOpts,
		Logger:      log,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if reg != nil {
		ms, err := d.ServeMetrics(c.String("metrics"), reg, c.Int("metrics-max-holders"), c.Bool("pprof"))
		if err != nil {
			d.Stop(context.Background())
			return err
		}
		defer ms.Shutdown(context.Background())
	}
	if err := d.Start(ctx); err != nil {
		return err
	}
	log.Info("serving", "store", st.Dir, "mount_root", c.String("mount-root"), "views", len(d.Views()))
	<-ctx.Done()
	stop()
	log.Info("stopping: unmounting every view")
	sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := d.Stop(sctx); err != nil {
		return err
	}
	if rec != nil {
		if err := rec.Close(); err != nil {
			log.Error("audit trail: last records not written", "err", err)
		}
	}
	if err := st.Close(); err != nil {
		return err
	}
	log.Info("stopped cleanly")
	return nil
}
