package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func groupCommand() *cli.Command {
	return &cli.Command{
		Name:  "group",
		Usage: "add, list, show and remove groups, and change their members",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a group (its zone appears as groups/NAME in its members' views)",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{storeFlag(), jsonFlag()},
				Action:    runGroupAdd,
			},
			{
				Name:   "list",
				Usage:  "list groups",
				Flags:  []cli.Flag{storeFlag(), jsonFlag()},
				Action: runGroupList,
			},
			{
				Name:      "show",
				Usage:     "show one group",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{storeFlag(), jsonFlag()},
				Action:    runGroupShow,
			},
			{
				Name:      "remove",
				Usage:     "remove a group and all the data in its zone",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{
					storeFlag(),
					&cli.BoolFlag{Name: "force", Usage: "remove even if the group's zone has data"},
				},
				Action: runGroupRemove,
			},
			{
				Name:      "add-member",
				Usage:     "add users to a group",
				ArgsUsage: "GROUP USER...",
				Flags:     []cli.Flag{storeFlag()},
				Action:    runGroupMember(true),
			},
			{
				Name:      "remove-member",
				Usage:     "take users out of a group",
				ArgsUsage: "GROUP USER...",
				Flags:     []cli.Flag{storeFlag()},
				Action:    runGroupMember(false),
			},
		},
	}
}

func runGroupAdd(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	name := c.Args().First()
	if err := daemon.ValidPrincipalName("group", name); err != nil {
		return err
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		g, err := a.AddGroup(ctx, daemon.GroupAddRequest{Name: name})
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, g)
		}
		fmt.Fprintf(c.App.Writer, "group %s added\n", g.Name)
		return nil
	})
}

func runGroupList(c *cli.Context) error {
	if err := nargs(c, "no arguments", 0); err != nil {
		return err
	}
	return withAdminRead(c, func(ctx context.Context, a daemon.Admin) error {
		groups, err := a.ListGroups(ctx)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, groups)
		}
		tw := table(c.App.Writer)
		fmt.Fprintln(tw, "NAME\tMEMBERS\tUSED\tQUOTA\tINODES\tINODE QUOTA")
		for _, g := range groups {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", g.Name, listOrNone(g.Members),
				daemon.FormatSize(g.Used.Bytes), sizeOrNone(g.Limit.Bytes),
				g.Used.Inodes, countOrNone(g.Limit.Inodes))
		}
		return tw.Flush()
	})
}

func runGroupShow(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	return withAdminRead(c, func(ctx context.Context, a daemon.Admin) error {
		g, err := a.ShowGroup(ctx, c.Args().First())
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, g)
		}
		tw := table(c.App.Writer)
		fmt.Fprintf(tw, "name:\t%s\n", g.Name)
		fmt.Fprintf(tw, "created:\t%s\n", g.Created.Local().Format(time.RFC3339))
		fmt.Fprintf(tw, "members:\t%s\n", orDash(strings.Join(g.Members, ", ")))
		fmt.Fprintf(tw, "used:\t%s, %d inodes\n", daemon.FormatSize(g.Used.Bytes), g.Used.Inodes)
		fmt.Fprintf(tw, "quota:\t%s, %s inodes\n", sizeOrNone(g.Limit.Bytes), countOrNone(g.Limit.Inodes))
		return tw.Flush()
	})
}

func runGroupRemove(c *cli.Context) error {
	if err := nargs(c, "one NAME", 1); err != nil {
		return err
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		r, err := a.RemoveGroup(ctx, c.Args().First(), c.Bool("force"))
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "group %s removed (%s deleted)\n", r.Name, entries(r))
		return nil
	})
}

// runGroupMember adds (add true) or removes users of a group, one after
// the other, stopping at the first failure.
func runGroupMember(add bool) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() < 2 {
			return fmt.Errorf("%s: give a GROUP and at least one USER (see --help)", c.Command.FullName())
		}
		group, users := c.Args().First(), c.Args().Tail()
		if err := daemon.ValidPrincipalName("group", group); err != nil {
			return err
		}
		for _, u := range users {
			if err := daemon.ValidPrincipalName("user", u); err != nil {
				return err
			}
		}
		return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
			for _, u := range users {
				var err error
				if add {
					_, err = a.AddMember(ctx, group, daemon.MemberRequest{User: u})
				} else {
					_, err = a.RemoveMember(ctx, group, u)
				}
				if err != nil {
					return err
				}
				if add {
					fmt.Fprintf(c.App.Writer, "%s added to group %s\n", u, group)
				} else {
					fmt.Fprintf(c.App.Writer, "%s removed from group %s\n", u, group)
				}
			}
			return nil
		})
	}
}
