package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func trashCommand() *cli.Command {
	return &cli.Command{
		Name:  "trash",
		Usage: "list, restore and purge files removed or replaced in the views (admin)",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "kept files, oldest first: those a user's view sees, or one holder's",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "user", Usage: "what this user's view shows in trash/"},
					&cli.StringFlag{Name: "holder", Usage: "user:NAME, group:NAME or share"},
					&cli.StringFlag{Name: "path", Usage: "only below this path (as the view shows it)"},
					&cli.StringFlag{Name: "since", Usage: "only removed since this long ago (10m, 7d) or this time (RFC 3339)"},
				},
				Action: runTrashList,
			},
			{
				Name:      "restore",
				Usage:     "put kept files back where they were (or at --to), creating parent directories",
				ArgsUsage: "ENTRY... (as trash list shows it: trash/share/a.txt@2026-...Z)",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "user", Usage: "the user whose view ENTRY and --to are in", Required: true},
					&cli.StringFlag{Name: "to", Usage: "restore to this path (one ENTRY) or into this directory (several)"},
				},
				Action: runTrashRestore,
			},
			{
				Name:  "purge",
				Usage: "delete kept files for good",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "holder", Usage: "only this holder's (user:NAME, group:NAME or share)"},
					&cli.StringFlag{Name: "before", Usage: "only those removed before this long ago (7d) or this time"},
					&cli.BoolFlag{Name: "all", Usage: "every kept file (of --holder, if given)"},
				},
				Action: runTrashPurge,
			},
			{
				Name:      "retention",
				Usage:     "show or set how long the trash keeps files (0 turns it off)",
				ArgsUsage: "[DURATION (e.g. 7d, 12h, 0)]",
				Flags:     []cli.Flag{storeFlag(), jsonFlag()},
				Action:    runTrashRetention,
			},
		},
	}
}

// parseWhen reads a time flag: a duration back from now ("10m", "7d") or
// a date or RFC 3339 time, like audit --since.
func parseWhen(flag, s string) (time.Time, error) {
	t, err := parseSince(s, time.Now())
	if err != nil {
		return t, fmt.Errorf("--%s %q: give a duration back from now (10m, 7d) or a time (RFC 3339)", flag, s)
	}
	return t, nil
}

func runTrashList(c *cli.Context) error {
	if c.NArg() != 0 {
		return fmt.Errorf("trash list: takes no arguments (filter with --user, --holder, --path, --since)")
	}
	req := daemon.TrashListRequest{User: c.String("user"), Holder: c.String("holder"), Path: c.String("path")}
	if s := c.String("since"); s != "" {
		t, err := parseWhen("since", s)
		if err != nil {
			return err
		}
		req.Since = t
	}
	return withAdminRead(c, func(ctx context.Context, a daemon.Admin) error {
		list, err := a.ListTrash(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, list)
		}
		tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ENTRY\tSIZE\tBY\tWHY\tHOLDER")
		for _, e := range list {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", e.Entry, e.Size, e.By, e.Why, e.Holder)
		}
		return tw.Flush()
	})
}

func runTrashRestore(c *cli.Context) error {
	if c.NArg() == 0 {
		return fmt.Errorf("trash restore: name at least one ENTRY (see trash list)")
	}
	req := daemon.TrashRestoreRequest{User: c.String("user"), Entries: c.Args().Slice(), To: c.String("to")}
	if err := daemon.ValidPrincipalName("user", req.User); err != nil {
		return err
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		done, err := a.RestoreTrash(ctx, req)
		if c.Bool("json") && err == nil {
			return printJSON(c.App.Writer, done)
		}
		for _, r := range done {
			fmt.Fprintf(c.App.Writer, "restored %s to %s\n", r.Entry, r.Path)
		}
		return err
	})
}

func runTrashPurge(c *cli.Context) error {
	if c.NArg() != 0 {
		return fmt.Errorf("trash purge: takes no arguments (select with --holder, --before, --all)")
	}
	req := daemon.TrashPurgeRequest{Holder: c.String("holder"), All: c.Bool("all")}
	if s := c.String("before"); s != "" {
		t, err := parseWhen("before", s)
		if err != nil {
			return err
		}
		req.Before = t
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		res, err := a.PurgeTrash(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, res)
		}
		fmt.Fprintf(c.App.Writer, "purged %d files, %d bytes\n", res.Entries, res.Bytes)
		return nil
	})
}

func runTrashRetention(c *cli.Context) error {
	var ret *time.Duration
	switch c.NArg() {
	case 0:
	case 1:
		s := c.Args().First()
		d, err := parseAge(s)
		if s == "0" {
			d, err = 0, nil
		}
		if err != nil || strings.HasPrefix(s, "-") {
			return fmt.Errorf("trash retention %q: give a duration (7d, 12h) or 0 to turn the trash off", s)
		}
		ret = &d
	default:
		return fmt.Errorf("trash retention: give at most one DURATION")
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		st, err := a.SetTrashSettings(ctx, ret)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, st)
		}
		if st.RetentionSeconds == 0 {
			fmt.Fprintln(c.App.Writer, "trash: off")
			return nil
		}
		fmt.Fprintf(c.App.Writer, "trash retention: %v\n", time.Duration(st.RetentionSeconds)*time.Second)
		return nil
	})
}

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "restore",
		Usage:     "put a subtree of a view back as it was at a time, from the trash (admin)",
		ArgsUsage: "PATH (as the user's view shows it, e.g. share/project)",
		Flags: []cli.Flag{
			storeFlag(), jsonFlag(),
			&cli.StringFlag{Name: "user", Usage: "the user whose view PATH is in", Required: true},
			&cli.StringFlag{Name: "at", Usage: "the time: how long ago (10m, 2h) or RFC 3339", Required: true},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be done, change nothing"},
		},
		Action: runRestore,
	}
}

func runRestore(c *cli.Context) error {
	if err := nargs(c, "one PATH", 1); err != nil {
		return err
	}
	at, err := parseWhen("at", c.String("at"))
	if err != nil {
		return err
	}
	req := daemon.RestoreAtRequest{User: c.String("user"), Path: c.Args().First(), At: at, DryRun: c.Bool("dry-run")}
	if err := daemon.ValidPrincipalName("user", req.User); err != nil {
		return err
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		res, err := a.RestoreAt(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, res)
		}
		verb := ""
		if res.DryRun {
			verb = "would "
		}
		for _, a := range res.Actions {
			switch a.Action {
			case "rename-back":
				fmt.Fprintf(c.App.Writer, "%srename %s back to %s\n", verb, a.From, a.Path)
			case "trash":
				fmt.Fprintf(c.App.Writer, "%smove %s to the trash (not there then)\n", verb, a.Path)
			case "restore":
				from := a.Entry
				if from == "" {
					from = "the trash (put there by this restore)"
				}
				fmt.Fprintf(c.App.Writer, "%srestore %s from %s\n", verb, a.Path, from)
			case "link":
				fmt.Fprintf(c.App.Writer, "%slink %s to %s\n", verb, a.Path, a.From)
			case "mkdir":
				fmt.Fprintf(c.App.Writer, "%smake directory %s\n", verb, a.Path)
			case "rmdir":
				fmt.Fprintf(c.App.Writer, "%sremove directory %s (not there then)\n", verb, a.Path)
			}
		}
		fmt.Fprintf(c.App.Writer, "%d changes\n", len(res.Actions))
		return nil
	})
}
