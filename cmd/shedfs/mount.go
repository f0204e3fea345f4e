package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/fusefs"
)

func mountCommand() *cli.Command {
	return &cli.Command{
		Name:      "mount",
		Usage:     "mount one user's view in the foreground",
		ArgsUsage: "MOUNTPOINT",
		Flags: append([]cli.Flag{
			storeFlag(),
			&cli.StringFlag{Name: "user", Usage: "the user whose view this is", Required: true},
			&cli.IntFlag{Name: "uid", Value: -1, Usage: "present every entry as owned by this uid"},
			&cli.IntFlag{Name: "gid", Value: -1, Usage: "present every entry as owned by this gid"},
			&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request"},
		}, append(fsFlags(), auditFlags()...)...),
		Action: runMount,
	}
}

func runMount(c *cli.Context) error {
	if c.NArg() != 1 {
		return errors.New("mount: give exactly one MOUNTPOINT")
	}
	mnt := c.Args().First()
	log, err := logger(c)
	if err != nil {
		return err
	}
	if err := daemon.CheckFuse(); err != nil {
		return err
	}
	if err := daemon.CheckMountpoint(mnt); err != nil {
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
	if err := daemon.EnsureUser(st, c.String("user")); err != nil {
		return err
	}
	d, err := daemon.New(daemon.Config{Store: st, Logger: log, FS: fsOpts})
	if err != nil {
		return err
	}
	// Signals are caught before the mount, so that none can kill the
	// process between mount and handler and leave a dead mount behind.
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
	done, err := d.Mount(c.String("user"), mnt, viewOpts)
	if err != nil {
		d.Stop(context.Background())
		return err
	}
	// The admin API lets user, group and quota commands work while the
	// store is held by this view; without it the view still works.
	if err := d.StartAdmin(); err != nil {
		log.Warn("admin API unavailable; admin commands will fail while this view is mounted", "err", err)
	}
	log.Info("view mounted", "user", c.String("user"), "mountpoint", mnt, "store", st.Dir)

	select {
	case <-ctx.Done():
		log.Info("unmounting", "mountpoint", mnt)
	case <-done:
		log.Info("view was unmounted", "mountpoint", mnt)
	}
	stop()
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
	log.Info("view unmounted", "mountpoint", mnt)
	return nil
}

// forcedOwner reads --uid and --gid: both or neither.
func forcedOwner(c *cli.Context) (fusefs.ViewOptions, error) {
	uid, gid := c.Int("uid"), c.Int("gid")
	if (uid < 0) != (gid < 0) {
		return fusefs.ViewOptions{}, errors.New("--uid and --gid go together")
	}
	if uid < 0 {
		return fusefs.ViewOptions{}, nil
	}
	if uid > 1<<31 || gid > 1<<31 {
		return fusefs.ViewOptions{}, fmt.Errorf("--uid %d / --gid %d out of range", uid, gid)
	}
	return fusefs.ViewOptions{ForceOwner: true, Uid: uint32(uid), Gid: uint32(gid)}, nil
}
