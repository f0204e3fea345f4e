package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func modeCommand() *cli.Command {
	userFlag := &cli.StringFlag{Name: "user", Usage: "the user whose view PATH is in", Required: true}
	return &cli.Command{
		Name:  "mode",
		Usage: "show or override the owner and ownership mode of an entry (admin)",
		Subcommands: []*cli.Command{
			{
				Name:      "get",
				Usage:     "show owner, mode and zone of PATH in the user's view",
				ArgsUsage: "PATH (relative to the view root, e.g. share/report.txt)",
				Flags:     []cli.Flag{storeFlag(), userFlag, jsonFlag()},
				Action:    runModeGet,
			},
			{
				Name:      "set",
				Usage:     "set the mode and/or owner of PATH in share/ or groups/, whoever owns it",
				ArgsUsage: "PATH (relative to the view root, e.g. groups/team-alpha/plan.md)",
				Flags: []cli.Flag{
					storeFlag(), userFlag, jsonFlag(),
					&cli.StringFlag{Name: "mode", Usage: "owner, group or owner_ro"},
					&cli.StringFlag{Name: "owner", Usage: "new owner: a member of the group, or any user in share/"},
				},
				Action: runModeSet,
			},
		},
	}
}

func runModeGet(c *cli.Context) error {
	if err := nargs(c, "one PATH", 1); err != nil {
		return err
	}
	user := c.String("user")
	if err := daemon.ValidPrincipalName("user", user); err != nil {
		return err
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		m, err := a.GetMode(ctx, user, c.Args().First())
		if err != nil {
			return err
		}
		return printMode(c, m)
	})
}

func runModeSet(c *cli.Context) error {
	if err := nargs(c, "one PATH", 1); err != nil {
		return err
	}
	user := c.String("user")
	if err := daemon.ValidPrincipalName("user", user); err != nil {
		return err
	}
	var req daemon.ModeSetRequest
	if c.IsSet("mode") {
		m := c.String("mode")
		req.Mode = &m
	}
	if c.IsSet("owner") {
		o := c.String("owner")
		req.Owner = &o
	}
	if req.Mode == nil && req.Owner == nil {
		return fmt.Errorf("mode set: give --mode, --owner or both")
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		m, err := a.SetMode(ctx, user, c.Args().First(), req)
		if err != nil {
			return err
		}
		return printMode(c, m)
	})
}

// printMode shows an entry's ownership as a small table, or JSON.
func printMode(c *cli.Context, m *daemon.ModeInfo) error {
	if c.Bool("json") {
		return printJSON(c.App.Writer, m)
	}
	tw := table(c.App.Writer)
	fmt.Fprintf(tw, "path:\t%s (%s, in the view of %s)\n", cell(m.Path), m.Type, m.User)
	fmt.Fprintf(tw, "zone:\t%s\n", m.Zone)
	fmt.Fprintf(tw, "owner:\t%s\n", orDash(m.Owner))
	fmt.Fprintf(tw, "mode:\t%s\n", orDash(m.Mode))
	// Labels no wider than the others, so the table keeps its columns.
	if m.SHA256 != "" {
		fmt.Fprintf(tw, "hash:\tsha256:%s\n", m.SHA256)
	}
	if m.Scan != "" {
		fmt.Fprintf(tw, "scan:\t%s\n", cell(m.Scan))
	}
	return tw.Flush()
}
