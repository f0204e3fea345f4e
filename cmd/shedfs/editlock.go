package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func lockCommand() *cli.Command {
	return &cli.Command{
		Name:  "lock",
		Usage: "edit locks (taken by the agent doors' lock_open; every door honours them until they expire)",
		Subcommands: []*cli.Command{
			{
				Name:   "list",
				Usage:  "the live edit locks",
				Flags:  []cli.Flag{storeFlag(), jsonFlag(), &cli.StringFlag{Name: "user", Usage: "only locks held by this user (or its sessions)"}},
				Action: runLockList,
			},
			{
				Name:      "release",
				Usage:     "release the edit lock of a file, whoever holds it",
				ArgsUsage: "PATH (relative to the view root of --user)",
				Flags:     []cli.Flag{storeFlag(), &cli.StringFlag{Name: "user", Usage: "the user whose view PATH is in", Required: true}},
				Action:    runLockRelease,
			},
		},
	}
}

func runLockList(c *cli.Context) error {
	if c.NArg() != 0 {
		return errors.New("lock list: takes no arguments (--user filters)")
	}
	return withPart(c, "edit lock", func(ctx context.Context, ea daemon.EditLockAdmin) error {
		ls, err := ea.ListEditLocks(ctx, c.String("user"))
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, ls)
		}
		tw := table(c.App.Writer)
		fmt.Fprintln(tw, "PATH\tUSER\tSESSION\tDOOR\tTAKEN\tEXPIRES")
		for _, l := range ls {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(l.Path), l.User, orDash(l.Session), orDash(l.Door),
				l.Taken.Local().Format(time.DateTime), l.Expires.Local().Format(time.DateTime))
		}
		return tw.Flush()
	})
}

func runLockRelease(c *cli.Context) error {
	if err := nargs(c, "one PATH", 1); err != nil {
		return err
	}
	return withPart(c, "edit lock", func(ctx context.Context, ea daemon.EditLockAdmin) error {
		l, err := ea.ReleaseEditLock(ctx, daemon.EditLockReleaseRequest{User: c.String("user"), Path: c.Args().First()})
		if err != nil {
			return err
		}
		who := l.User
		if l.Session != "" {
			who += " (session " + l.Session + ")"
		}
		fmt.Fprintf(c.App.Writer, "released the edit lock of %s held by %s\n", c.Args().First(), who)
		return nil
	})
}
