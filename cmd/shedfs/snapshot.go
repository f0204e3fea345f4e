package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func snapshotCommand() *cli.Command {
	userFlag := &cli.StringFlag{Name: "user", Usage: "the user whose view it is", Required: true}
	return &cli.Command{
		Name:  "snapshot",
		Usage: "instant, read-only snapshots of a subtree of a view (content shared copy-on-write)",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "freeze a subtree of a view, in time proportional to its entries",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(), userFlag,
					&cli.StringFlag{Name: "session", Usage: "freeze the scratch of this session of --user"},
					&cli.StringFlag{Name: "path", Usage: "the subtree, relative to the view (or session) root (default: all of it)"},
					&cli.StringFlag{Name: "ttl", Usage: "delete the snapshot after this long (90s, 2h, 7d)"},
					&cli.IntFlag{Name: "max-snapshots", Usage: "refuse if --user has this many snapshots already (0: no limit)"},
				},
				Action: runSnapshotCreate,
			},
			{
				Name:   "list",
				Usage:  "the snapshots (of --user)",
				Flags:  []cli.Flag{storeFlag(), jsonFlag(), &cli.StringFlag{Name: "user", Usage: "only this user's snapshots"}},
				Action: runSnapshotList,
			},
			{
				Name:      "show",
				Usage:     "one snapshot, with the bytes only it still holds",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{storeFlag(), jsonFlag(), userFlag},
				Action:    runSnapshotShow,
			},
			{
				Name:      "delete",
				Usage:     "delete a snapshot; what only it held is freed",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{storeFlag(), jsonFlag(), userFlag},
				Action:    runSnapshotDelete,
			},
			{
				Name:      "diff",
				Usage:     "what changed from snapshot NAME to snapshot OTHER, or to the view now",
				ArgsUsage: "NAME [OTHER|--now]",
				Flags:     []cli.Flag{storeFlag(), jsonFlag(), userFlag, &cli.BoolFlag{Name: "now", Usage: "against the view now (the default)"}},
				Action:    runSnapshotDiff,
			},
			{
				Name:      "restore",
				Usage:     "put snapshot NAME (or --path of it) back through the view's rules, after an automatic snapshot that undoes it",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{storeFlag(), jsonFlag(), userFlag,
					&cli.StringFlag{Name: "path", Usage: "only this part, relative to the snapshot's root"},
					&cli.BoolFlag{Name: "dry-run", Usage: "say what would change, change nothing"}},
				Action: runSnapshotRestore,
			},
		},
	}
}

func runSnapshotCreate(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	req := daemon.SnapshotCreateRequest{User: c.String("user"), Session: c.String("session"), Path: c.String("path"), Name: c.Args().First(), MaxSnapshots: c.Int("max-snapshots")}
	if s := c.String("ttl"); s != "" {
		ttl, err := parseAge(s)
		if err != nil || ttl <= 0 {
			return fmt.Errorf("--ttl %q: give a positive duration (90s, 2h, 7d)", s)
		}
		req.TTLSeconds = int64(ttl / time.Second)
	}
	return withPart(c, "snapshot", func(ctx context.Context, sa daemon.SnapshotAdmin) error {
		info, err := sa.CreateSnapshot(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, info)
		}
		fmt.Fprintf(c.App.Writer, "snapshot %s of %s:%s: %d entries, %s, in %s\n", info.Name, info.User, info.Path, info.Entries,
			daemon.FormatSize(info.Bytes), info.Took.Round(time.Millisecond))
		for _, p := range info.Open {
			fmt.Fprintf(c.App.Writer, "  %s was open in a view: captured as last flushed\n", p)
		}
		return nil
	})
}

func runSnapshotList(c *cli.Context) error {
	if c.NArg() != 0 {
		return errors.New("snapshot list: takes no arguments (--user filters)")
	}
	return withPart(c, "snapshot", func(ctx context.Context, sa daemon.SnapshotAdmin) error {
		ls, err := sa.ListSnapshots(ctx, c.String("user"))
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, ls)
		}
		tw := table(c.App.Writer)
		fmt.Fprintln(tw, "USER\tNAME\tPATH\tSESSION\tENTRIES\tBYTES\tCREATED\tEXPIRES")
		for _, s := range ls {
			exp := "-"
			if !s.Expires.IsZero() {
				exp = s.Expires.Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.User, s.Name, cell(s.Path), orDash(s.Session), s.Entries,
				daemon.FormatSize(s.Bytes), s.Created.Local().Format(time.DateTime), exp)
		}
		return tw.Flush()
	})
}

func printSnapshot(c *cli.Context, verb string, s *daemon.SnapshotInfo) error {
	if c.Bool("json") {
		return printJSON(c.App.Writer, s)
	}
	fmt.Fprintf(c.App.Writer, "%ssnapshot %s of %s:%s, taken %s: %d entries, %s, %s held only by it\n", verb, s.Name, s.User, s.Path,
		s.Created.Local().Format(time.DateTime), s.Entries, daemon.FormatSize(s.Bytes), daemon.FormatSize(s.OnlyBytes))
	return nil
}

func runSnapshotShow(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	return withPart(c, "snapshot", func(ctx context.Context, sa daemon.SnapshotAdmin) error {
		s, err := sa.ShowSnapshot(ctx, c.String("user"), c.Args().First())
		if err != nil {
			return err
		}
		return printSnapshot(c, "", s)
	})
}

func runSnapshotDelete(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	return withPart(c, "snapshot", func(ctx context.Context, sa daemon.SnapshotAdmin) error {
		s, err := sa.DeleteSnapshot(ctx, c.String("user"), c.Args().First())
		if err != nil {
			return err
		}
		return printSnapshot(c, "deleted ", s)
	})
}

func runSnapshotDiff(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 || (c.NArg() == 2 && c.Bool("now")) {
		return errors.New("snapshot diff: give NAME and OTHER, or NAME [--now]")
	}
	return withPart(c, "snapshot", func(ctx context.Context, sa daemon.SnapshotAdmin) error {
		d, err := sa.DiffSnapshot(ctx, c.String("user"), c.Args().Get(0), c.Args().Get(1))
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, d)
		}
		printDiff(c.App.Writer, d)
		return nil
	})
}

// printDiff writes a diff as A/D/M/R/P lines.
func printDiff(w io.Writer, d *daemon.SnapshotDiff) {
	for _, x := range d.Added {
		fmt.Fprintf(w, "A %s\n", cell(x.Path))
	}
	for _, x := range d.Removed {
		fmt.Fprintf(w, "D %s\n", cell(x.Path))
	}
	for _, x := range d.Modified {
		fmt.Fprintf(w, "M %s (%s -> %s)\n", cell(x.Path), daemon.FormatSize(x.OldSize), daemon.FormatSize(x.NewSize))
	}
	for _, x := range d.Renamed {
		fmt.Fprintf(w, "R %s -> %s\n", cell(x.OldPath), cell(x.Path))
	}
	for _, x := range d.Modes {
		fmt.Fprintf(w, "P %s (%s -> %s)\n", cell(x.Path), x.OldMode, x.NewMode)
	}
}

func runSnapshotRestore(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		sr, ok := a.(daemon.SnapshotRestorer)
		if !ok {
			return errors.New("snapshot restore: this admin connection has no snapshot operations")
		}
		r, err := sr.RestoreSnapshot(ctx, daemon.SnapshotRestoreRequest{User: c.String("user"), Name: c.Args().First(), Path: c.String("path"), DryRun: c.Bool("dry-run")})
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, r)
		}
		w := c.App.Writer
		for _, p := range r.Created {
			fmt.Fprintf(w, "create %s\n", cell(p))
		}
		for _, p := range r.Replaced {
			fmt.Fprintf(w, "replace %s\n", cell(p))
		}
		for _, p := range r.Removed {
			fmt.Fprintf(w, "remove %s (to the trash)\n", cell(p))
		}
		for _, p := range r.Modes {
			fmt.Fprintf(w, "chmod %s\n", cell(p))
		}
		if r.DryRun {
			fmt.Fprintln(w, "dry run: nothing changed")
		} else {
			fmt.Fprintf(w, "restored; snapshot %s holds what was there before (restore it to undo)\n", r.Undo)
		}
		return nil
	})
}
