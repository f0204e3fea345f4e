package main

import (
	"errors"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/vfs"
)

func mountCommand() *cli.Command {
	return &cli.Command{
		Name:      "mount",
		Usage:     "mount one user's view in the foreground",
		ArgsUsage: "MOUNTPOINT",
		Flags: append([]cli.Flag{
			storeFlag(), initFlag(),
			&cli.StringFlag{Name: "user", Usage: "the user whose view this is", Required: true},
			&cli.StringFlag{Name: "session", Usage: "mount the view of this open session of the user instead (see session open)"},
			&cli.IntFlag{Name: "uid", Value: -1, Usage: "present every entry as owned by this uid"},
			&cli.IntFlag{Name: "gid", Value: -1, Usage: "present every entry as owned by this gid"},
			&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request"},
		}, append(fsFlags(), append(auditFlags(), contentFlags()...)...)...),
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
	s, err := openServing(c, log, daemon.Config{})
	if err != nil {
		return err
	}
	user := c.String("user")
	if err := daemon.EnsureUser(s.st, user); err != nil {
		s.close()
		return err
	}
	// Signals are caught before the mount, so that none can kill the
	// process between mount and handler and leave a dead mount behind.
	ctx, stopSignals := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	if err := s.startDoors(c); err != nil {
		s.stop()
		return err
	}
	var done <-chan struct{}
	if id := c.String("session"); id != "" {
		done, err = s.d.MountSession(user, id, mnt)
	} else {
		done, err = s.d.Mount(user, mnt, s.view)
	}
	if err != nil {
		s.stop()
		return err
	}
	// The admin API lets user, group and quota commands work while the
	// store is held by this view; without it the view still works.
	if err := s.d.StartAdmin(); err != nil {
		log.Warn("admin API unavailable; admin commands will fail while this view is mounted", "err", err)
	}
	log.Info("view mounted", "user", user, "mountpoint", mnt, "store", s.st.Location())

	select {
	case <-ctx.Done():
		log.Info("unmounting", "mountpoint", mnt)
	case <-done:
		log.Info("view was unmounted", "mountpoint", mnt)
	}
	stopSignals()
	if err := s.stop(); err != nil {
		return err
	}
	log.Info("view unmounted", "mountpoint", mnt)
	return nil
}

// forcedOwner reads --uid and --gid: both or neither.
func forcedOwner(c *cli.Context) (vfs.ViewOptions, error) {
	uid, gid := c.Int("uid"), c.Int("gid")
	if (uid < 0) != (gid < 0) {
		return vfs.ViewOptions{}, errors.New("--uid and --gid go together")
	}
	if uid < 0 {
		return vfs.ViewOptions{}, nil
	}
	if uid > 1<<31 || gid > 1<<31 {
		return vfs.ViewOptions{}, fmt.Errorf("--uid %d / --gid %d out of range", uid, gid)
	}
	return vfs.ViewOptions{ForceOwner: true, Uid: uint32(uid), Gid: uint32(gid)}, nil
}
