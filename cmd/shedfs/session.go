package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func sessionCommand() *cli.Command {
	return &cli.Command{
		Name:  "session",
		Usage: "open, list and close sessions: one bounded scratch workspace per agent run (admin)",
		Subcommands: []*cli.Command{
			{
				Name:  "open",
				Usage: "open a session of a user; a serving daemon mounts its view at <mount-root>/USER@ID",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "user", Usage: "the user the session belongs to", Required: true},
					&cli.StringFlag{Name: "id", Usage: "the session's id (a random one if not given; same rules as user names)"},
					&cli.StringFlag{Name: "ttl", Usage: "close the session after this long (90s, 2h, 7d)"},
					&cli.StringFlag{Name: "quota", Usage: "byte limit of the scratch tree, on top of the user's quota (10GiB)"},
					&cli.StringFlag{Name: "inodes", Usage: "inode limit of the scratch tree (100k)"},
					&cli.StringFlag{Name: "from", Usage: "start the scratch as a copy-on-write copy of this snapshot of the user (a fork)"},
					&cli.StringFlag{Name: "fork", Usage: "start the scratch as a copy-on-write copy of this open session of the user, as it is now"},
					&cli.StringFlag{Name: "base", Usage: "start the scratch as a copy of this host directory (absolute; cloned where the host filesystem can, nothing followed out of it)"},
					&cli.StringFlag{Name: "checkpoint-every", Usage: "snapshot the scratch this often while files change (10s or more: 5m, 1h)"},
					&cli.IntFlag{Name: "checkpoint-keep", Usage: "keep the last N automatic checkpoints (default 5)"},
				},
				Action: runSessionOpen,
			},
			{
				Name:      "close",
				Usage:     "close a session: unmount its view, move its scratch tree to the trash (or keep it in home/sessions/ID)",
				ArgsUsage: "ID",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "user", Usage: "the user the session belongs to", Required: true},
					&cli.BoolFlag{Name: "keep", Usage: "move the scratch tree into the user's home/sessions/ID instead of the trash"},
					&cli.BoolFlag{Name: "force", Usage: "close even while files are open (the view is detached lazily)"},
				},
				Action: runSessionClose,
			},
			{
				Name:      "diff",
				Usage:     "what a session changed since it started (against its fork's start; all of it for a session that started empty)",
				ArgsUsage: "ID",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "user", Usage: "the user the session belongs to", Required: true},
					&cli.BoolFlag{Name: "patch", Usage: "a unified diff of the changed text files (binary files named only)"},
				},
				Action: runSessionDiff,
			},
			{
				Name:      "apply",
				Usage:     "copy what a session changed into a directory of the user's view (through its rules; what it replaces or removes goes to the trash)",
				ArgsUsage: "ID",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "user", Usage: "the user the session belongs to", Required: true},
					&cli.StringFlag{Name: "to", Usage: "the directory of the user's view to apply the changes to, relative to the view root", Required: true},
					&cli.BoolFlag{Name: "dry-run", Usage: "only say what would change"},
				},
				Action: runSessionApply,
			},
			{
				Name:  "list",
				Usage: "open sessions with usage, limits, expiry and view",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "user", Usage: "only this user's sessions"},
				},
				Action: runSessionList,
			},
		},
	}
}

func runSessionOpen(c *cli.Context) error {
	if err := nargs(c, "no arguments", 0); err != nil {
		return err
	}
	req := daemon.SessionOpenRequest{User: c.String("user"), ID: c.String("id"), From: c.String("from"), Fork: c.String("fork"), Base: c.String("base"), CheckpointKeep: c.Int("checkpoint-keep")}
	if s := c.String("checkpoint-every"); s != "" {
		every, err := parseAge(s)
		if err != nil {
			return fmt.Errorf("--checkpoint-every %q: give a duration (5m, 1h)", s)
		}
		req.CheckpointEvery = every.String()
	}
	if s := c.String("ttl"); s != "" {
		ttl, err := parseAge(s)
		if err != nil || ttl <= 0 {
			return fmt.Errorf("--ttl %q: give a positive duration (90s, 2h, 7d)", s)
		}
		req.TTL = ttl.String()
	}
	var err error
	if req.Quota.Bytes, _, err = parseSizeFlag(c, "quota"); err != nil {
		return err
	}
	if req.Quota.Inodes, _, err = parseCountFlag(c, "inodes"); err != nil {
		return err
	}
	return withPart(c, "session", func(ctx context.Context, sa daemon.SessionAdmin) error {
		info, err := sa.OpenSession(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, info)
		}
		where := info.Mountpoint
		if where == "" {
			where = "no view mounted (no daemon serves a mount root)"
		}
		fmt.Fprintf(c.App.Writer, "session %s of %s opened: %s\n", info.ID, info.User, where)
		if f := info.Forked; f != nil {
			src := "snapshot " + info.From
			switch {
			case info.Fork != "":
				src = "session " + info.Fork
			case info.Base != "":
				src = "base " + info.Base
			}
			fmt.Fprintf(c.App.Writer, "forked from %s: %d entries, %s, in %s\n", src, f.Entries, daemon.FormatSize(f.Bytes), f.Took.Round(time.Millisecond))
			for _, p := range f.Open {
				fmt.Fprintf(c.App.Writer, "  %s was open in a view: captured as last flushed\n", p)
			}
		}
		return nil
	})
}

func runSessionClose(c *cli.Context) error {
	if err := nargs(c, "one session ID", 1); err != nil {
		return err
	}
	req := daemon.SessionCloseRequest{User: c.String("user"), ID: c.Args().First(), Keep: c.Bool("keep"), Force: c.Bool("force")}
	return withPart(c, "session", func(ctx context.Context, sa daemon.SessionAdmin) error {
		info, err := sa.CloseSession(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, info)
		}
		fmt.Fprintf(c.App.Writer, "session %s of %s closed; its files are in %s\n", info.ID, info.User, info.Kept)
		return nil
	})
}

func runSessionList(c *cli.Context) error {
	if err := nargs(c, "no arguments", 0); err != nil {
		return err
	}
	return withPart(c, "session", func(ctx context.Context, sa daemon.SessionAdmin) error {
		list, err := sa.ListSessions(ctx, c.String("user"))
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, list)
		}
		tw := table(c.App.Writer)
		fmt.Fprintln(tw, "USER\tID\tUSED\tQUOTA\tINODES\tINODE LIMIT\tEXPIRES\tVIEW")
		for _, s := range list {
			expires := "-"
			if s.Expires != nil {
				expires = s.Expires.Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.User, s.ID, daemon.FormatSize(s.Usage.Bytes),
				sizeOrNone(s.Quota.Bytes), s.Usage.Inodes, countOrNone(s.Quota.Inodes), expires, orDash(s.Mountpoint))
		}
		return tw.Flush()
	})
}

func runSessionDiff(c *cli.Context) error {
	if err := nargs(c, "one session ID", 1); err != nil {
		return err
	}
	if c.Bool("json") && c.Bool("patch") {
		return fmt.Errorf("session diff: give --json or --patch, not both")
	}
	return withPart(c, "session diff", func(ctx context.Context, sd daemon.SessionDiffer) error {
		patch := ""
		if c.Bool("patch") {
			patch = "true"
		}
		d, err := sd.DiffSession(ctx, c.String("user"), c.Args().First(), patch)
		if err != nil {
			return err
		}
		switch {
		case c.Bool("json"):
			return printJSON(c.App.Writer, d)
		case c.Bool("patch"):
			fmt.Fprint(c.App.Writer, d.Patch)
		default:
			printDiff(c.App.Writer, &d.SnapshotDiff)
		}
		return nil
	})
}

func runSessionApply(c *cli.Context) error {
	if err := nargs(c, "one session ID", 1); err != nil {
		return err
	}
	req := daemon.SessionApplyRequest{User: c.String("user"), ID: c.Args().First(), To: c.String("to"), DryRun: c.Bool("dry-run")}
	return withPart(c, "session apply", func(ctx context.Context, sd daemon.SessionDiffer) error {
		r, err := sd.ApplySession(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, r)
		}
		w := c.App.Writer
		for _, l := range []struct {
			verb  string
			paths []string
		}{{"create", r.Created}, {"replace", r.Replaced}, {"remove", r.Removed}, {"rename", r.Renamed}, {"chmod", r.Modes}} {
			for _, p := range l.paths {
				fmt.Fprintf(w, "%s %s\n", l.verb, cell(p))
			}
		}
		return nil
	})
}
