package main

import (
	"errors"
	"os/signal"
	"syscall"
	"time"

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
			storeFlag(), initFlag(),
			&cli.StringFlag{Name: "mount-root", Usage: "directory (made mode 0700) holding one view per user", Required: true},
			&cli.IntFlag{Name: "uid", Value: -1, Usage: "present entries as owned by this uid in views of users without an owner of their own"},
			&cli.IntFlag{Name: "gid", Value: -1, Usage: "present entries as owned by this gid in views of users without an owner of their own"},
			&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request"},
		}, append(fsFlags(), append(auditFlags(), contentFlags()...)...)...),
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
	s, err := openServing(c, log, daemon.Config{MountRoot: c.String("mount-root")})
	if err != nil {
		return err
	}
	ctx, stopSignals := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	if err := s.startMetrics(c); err != nil {
		s.stop()
		return err
	}
	if err := s.startLinks(c); err != nil {
		s.stop()
		return err
	}
	if err := s.startAgents(c); err != nil {
		s.stop()
		return err
	}
	if err := s.d.Start(ctx); err != nil {
		s.close()
		return err
	}
	log.Info("serving", "store", s.st.Location(), "mount_root", c.String("mount-root"), "views", len(s.d.Views()))
	<-ctx.Done()
	stopSignals()
	log.Info("stopping: unmounting every view")
	if err := s.stop(); err != nil {
		return err
	}
	log.Info("stopped cleanly")
	return nil
}
