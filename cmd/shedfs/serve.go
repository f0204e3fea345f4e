package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

// stopTimeout bounds how long a stop waits for views to finish serving and
// for admin requests in flight: serve's --stop-timeout, mount's always.
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
			&cli.BoolFlag{Name: "takeover", Usage: "take over the views of the daemon serving this store (through its admin socket's takeover socket) without unmounting them: for an upgrade, start the new binary with the same flags and --takeover"},
			&cli.DurationFlag{Name: "stop-timeout", Value: stopTimeout, Usage: "at SIGTERM or SIGINT, how long to wait for views still in use (saying which, and by which processes) before detaching them lazily and exiting"},
		}, append(append(csiFlags(), fsFlags()...), append(auditFlags(), append(contentFlags(), configFlags()...)...)...)...),
		// The config file is read before the action, so that a required
		// flag it sets counts as set (config.go).
		Before: applyConfig,
		Action: runServe,
	}
}

func runServe(c *cli.Context) error {
	if c.NArg() != 0 {
		return errors.New("serve: takes no arguments (views go under --mount-root)")
	}
	if c.Bool("print-config") {
		return printConfig(c, c.App.Writer)
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	if err := daemon.CheckFuse(); err != nil {
		return err
	}
	if c.Duration("stop-timeout") <= 0 {
		return errors.New("--stop-timeout must be positive")
	}
	// From the first moment: a restart during the start parks the views
	// once they are served (unhandled, the signal would end the process).
	restart := make(chan os.Signal, 1)
	signal.Notify(restart, parkSignal)
	defer signal.Stop(restart)
	// A takeover's views come first: the old daemon closes the store
	// before it hands them over.
	tk, err := receiveTakeover(c, log)
	if err != nil {
		return err
	}
	s, err := openServing(c, log, daemon.Config{MountRoot: c.String("mount-root")})
	if err != nil {
		return err
	}
	s.stopTimeout = c.Duration("stop-timeout")
	if tk != nil {
		if err := tk.adopt(s); err != nil {
			s.close()
			return err
		}
	}
	ctx, stopSignals := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	if err := s.startDoors(c); err != nil {
		s.stop()
		return err
	}
	if err := s.d.Start(ctx); err != nil {
		s.close()
		return err
	}
	driver, err := startCSI(c, s, log)
	if err != nil {
		s.stop()
		return err
	}
	stopOffer, err := s.offerTakeover(func() { stopCSI(driver) })
	if err != nil {
		stopCSI(driver)
		s.stop()
		return err
	}
	defer stopOffer()
	defer s.upgradeOnSignal()()
	views := len(s.d.Views())
	log.Info("serving", "store", s.st.Location(), "mount_root", c.String("mount-root"), "views", views)
	// Every view is mounted: a Type=notify unit is started now.
	if err := daemon.Notify(fmt.Sprintf("READY=1\nSTATUS=serving %d views", views)); err != nil {
		log.Warn("systemd readiness not sent", "err", err)
	}
	select {
	case <-ctx.Done():
	case <-restart:
		stopOffer()
		if parked, err := s.park(func() { stopCSI(driver) }); parked || err != nil {
			return err
		}
	}
	stopSignals()
	if err := daemon.Notify("STOPPING=1\nSTATUS=stopping: unmounting every view"); err != nil {
		log.Warn("systemd stop not sent", "err", err)
	}
	stopCSI(driver)
	log.Info("stopping: unmounting every view once nothing uses it", "stop_timeout", s.stopTimeout.String())
	if err := s.stop(); err != nil {
		return err
	}
	log.Info("stopped cleanly")
	return nil
}
