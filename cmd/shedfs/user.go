package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func userCommand() *cli.Command {
	return &cli.Command{
		Name:  "user",
		Usage: "add, list, show and remove users (each has a view)",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a user; a running daemon mounts its view at once",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{
					storeFlag(),
					&cli.StringFlag{Name: "quota", Usage: "byte quota, e.g. 10GiB, 500M (default none)"},
					&cli.StringFlag{Name: "inodes", Usage: "inode quota, e.g. 100000 (default none)"},
					&cli.IntFlag{Name: "uid", Value: -1, Usage: "present every entry of the user's view as owned by this uid"},
					&cli.IntFlag{Name: "gid", Value: -1, Usage: "present every entry of the user's view as owned by this gid"},
					jsonFlag(),
				},
				Action: runUserAdd,
			},
			{
				Name:      "set",
				Usage:     "change a user's presented owner or quota; its mounted views show a new owner at once",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{
					storeFlag(),
					&cli.IntFlag{Name: "uid", Value: -1, Usage: "present every entry of the user's view as owned by this uid (with --gid; 0 and 0: the daemon's default again)"},
					&cli.IntFlag{Name: "gid", Value: -1, Usage: "present every entry of the user's view as owned by this gid (with --uid)"},
					&cli.StringFlag{Name: "quota", Usage: "byte quota, e.g. 10GiB, 500M, none"},
					&cli.StringFlag{Name: "inodes", Usage: "inode quota, e.g. 100000, none"},
					jsonFlag(),
				},
				Action: runUserSet,
			},
			{
				Name:   "list",
				Usage:  "list users",
				Flags:  []cli.Flag{storeFlag(), jsonFlag()},
				Action: runUserList,
			},
			{
				Name:      "show",
				Usage:     "show one user",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{storeFlag(), jsonFlag()},
				Action:    runUserShow,
			},
			{
				Name:      "remove",
				Usage:     "remove a user, its view and all its private, output and uploads data",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{
					storeFlag(),
					&cli.BoolFlag{Name: "force", Usage: "remove even if the user has data"},
				},
				Action: runUserRemove,
			},
		},
	}
}

func runUserAdd(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	req := daemon.UserAddRequest{Name: c.Args().First()}
	if err := daemon.ValidPrincipalName("user", req.Name); err != nil {
		return err
	}
	var err error
	if req.Quota.Bytes, _, err = parseSizeFlag(c, "quota"); err != nil {
		return err
	}
	if req.Quota.Inodes, _, err = parseCountFlag(c, "inodes"); err != nil {
		return err
	}
	owner, err := forcedOwner(c)
	if err != nil {
		return err
	}
	if owner.ForceOwner {
		req.Uid, req.Gid = &owner.Uid, &owner.Gid
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		u, err := a.AddUser(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, u)
		}
		msg := "user " + u.Name + " added"
		if u.View != "" {
			msg += "; view mounted at " + u.View
		}
		fmt.Fprintln(c.App.Writer, msg)
		return nil
	})
}

func runUserSet(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	name := c.Args().First()
	if err := daemon.ValidPrincipalName("user", name); err != nil {
		return err
	}
	var req daemon.UserSetRequest
	owner, err := forcedOwner(c)
	if err != nil {
		return err
	}
	if owner.ForceOwner {
		req.Uid, req.Gid = &owner.Uid, &owner.Gid
	}
	b, ok, err := parseSizeFlag(c, "quota")
	if err != nil {
		return err
	}
	if ok {
		req.Bytes = &b
	}
	n, ok, err := parseCountFlag(c, "inodes")
	if err != nil {
		return err
	}
	if ok {
		req.Inodes = &n
	}
	if req.Uid == nil && req.Bytes == nil && req.Inodes == nil {
		return fmt.Errorf("user set: give --uid and --gid, --quota, --inodes, or several")
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		ua, ok := a.(daemon.UserAdmin)
		if !ok {
			return fmt.Errorf("this daemon cannot change users; upgrade it")
		}
		u, err := ua.SetUser(ctx, name, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, u)
		}
		owner := "as stored"
		if u.Uid != 0 || u.Gid != 0 {
			owner = fmt.Sprintf("uid %d, gid %d", u.Uid, u.Gid)
		}
		msg := fmt.Sprintf("user %s: presented owner %s; quota %s, inode quota %s", u.Name, owner, sizeOrNone(u.Limit.Bytes), countOrNone(u.Limit.Inodes))
		if u.View != "" {
			msg += "; view at " + u.View + " shows it now"
		}
		fmt.Fprintln(c.App.Writer, msg)
		return nil
	})
}

func runUserList(c *cli.Context) error {
	if err := nargs(c, "no arguments", 0); err != nil {
		return err
	}
	return withAdminRead(c, func(ctx context.Context, a daemon.Admin) error {
		users, err := a.ListUsers(ctx)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, users)
		}
		tw := table(c.App.Writer)
		fmt.Fprintln(tw, "NAME\tGROUPS\tUSED\tQUOTA\tINODES\tINODE QUOTA\tVIEW")
		for _, u := range users {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", u.Name, listOrNone(u.Groups),
				daemon.FormatSize(u.Used.Bytes), sizeOrNone(u.Limit.Bytes),
				u.Used.Inodes, countOrNone(u.Limit.Inodes), orDash(u.View))
		}
		return tw.Flush()
	})
}

func runUserShow(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	return withAdminRead(c, func(ctx context.Context, a daemon.Admin) error {
		u, err := a.ShowUser(ctx, c.Args().First())
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, u)
		}
		owner := "as stored"
		if u.Uid != 0 || u.Gid != 0 {
			owner = fmt.Sprintf("uid %d, gid %d", u.Uid, u.Gid)
		}
		tw := table(c.App.Writer)
		fmt.Fprintf(tw, "name:\t%s\n", u.Name)
		fmt.Fprintf(tw, "created:\t%s\n", u.Created.Local().Format(time.RFC3339))
		fmt.Fprintf(tw, "groups:\t%s\n", orDash(strings.Join(u.Groups, ", ")))
		fmt.Fprintf(tw, "used:\t%s, %d inodes\n", daemon.FormatSize(u.Used.Bytes), u.Used.Inodes)
		fmt.Fprintf(tw, "quota:\t%s, %s inodes\n", sizeOrNone(u.Limit.Bytes), countOrNone(u.Limit.Inodes))
		fmt.Fprintf(tw, "presented owner:\t%s\n", owner)
		fmt.Fprintf(tw, "view:\t%s\n", orDash(u.View))
		return tw.Flush()
	})
}

func runUserRemove(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		r, err := a.RemoveUser(ctx, c.Args().First(), c.Bool("force"))
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "user %s removed (%s deleted)\n", r.Name, entries(r))
		return nil
	})
}
