package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func quotaCommand() *cli.Command {
	return &cli.Command{
		Name:  "quota",
		Usage: "set and show quotas of users (user:NAME), groups (group:NAME) and the share space (share)",
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "set a holder's byte and/or inode limit (0 or none: unlimited)",
				ArgsUsage: "HOLDER",
				Flags: []cli.Flag{
					storeFlag(),
					&cli.StringFlag{Name: "bytes", Usage: "byte limit, e.g. 10GiB, 500M, 1.5G, none"},
					&cli.StringFlag{Name: "inodes", Usage: "inode limit, e.g. 100000, none"},
				},
				Action: runQuotaSet,
			},
			{
				Name:      "show",
				Usage:     "show usage against limits, of one holder or of all",
				ArgsUsage: "[HOLDER]",
				Flags:     []cli.Flag{storeFlag(), jsonFlag()},
				Action:    runQuotaShow,
			},
			quotaDefaultsCommand(), // settings.go
		},
	}
}

func runQuotaSet(c *cli.Context) error {
	if err := nargs(c, "one HOLDER (user:NAME, group:NAME or share)", 1); err != nil {
		return err
	}
	var req daemon.QuotaSetRequest
	b, ok, err := parseSizeFlag(c, "bytes")
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
	if req.Bytes == nil && req.Inodes == nil {
		return fmt.Errorf("quota set: give --bytes, --inodes or both")
	}
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		q, err := a.SetQuota(ctx, c.Args().First(), req)
		if err != nil {
			return err
		}
		if q.Over != (daemon.Amount{}) {
			fmt.Fprintf(c.App.ErrWriter, "shedfs: warning: %s is over its new limit by %s: nothing was deleted; new data is refused until enough is deleted or the limit raised\n",
				q.Holder, strings.ReplaceAll(overshoot(q.Over), ", ", " and "))
		}
		return quotaTable(c.App.Writer, []daemon.QuotaInfo{*q})
	})
}

func runQuotaShow(c *cli.Context) error {
	if c.NArg() > 1 {
		return fmt.Errorf("quota show: give at most one HOLDER")
	}
	return withAdminRead(c, func(ctx context.Context, a daemon.Admin) error {
		qs, err := a.ShowQuota(ctx, c.Args().First())
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, qs)
		}
		return quotaTable(c.App.Writer, qs)
	})
}

// quotaTable prints holders with bytes and inodes used, limit and share of
// the limit, the trash's part, how far a holder is over its limit, and
// the snapshots' part (what only snapshots hold).
func quotaTable(w io.Writer, qs []daemon.QuotaInfo) error {
	tw := table(w)
	fmt.Fprintln(tw, "HOLDER\tBYTES USED\tBYTES LIMIT\tBYTES %\tINODES USED\tINODES LIMIT\tINODES %\tTRASH\tOVER\tSNAPSHOTS")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s in %d files\t%s\t%s\n", q.Holder,
			daemon.FormatSize(q.Used.Bytes), sizeOrNone(q.Limit.Bytes), percent(q.Used.Bytes, q.Limit.Bytes),
			q.Used.Inodes, countOrNone(q.Limit.Inodes), percent(q.Used.Inodes, q.Limit.Inodes),
			daemon.FormatSize(q.Trash.Bytes), q.Trash.Inodes, orDash(overshoot(q.Over)), daemon.FormatSize(q.Snapshots.Bytes))
	}
	return tw.Flush()
}

// overshoot says how far a holder is over its limit ("2.0 MiB, 3
// inodes"), "" when it is not.
func overshoot(o daemon.Amount) string {
	var parts []string
	if o.Bytes > 0 {
		parts = append(parts, daemon.FormatSize(o.Bytes))
	}
	if o.Inodes > 0 {
		parts = append(parts, fmt.Sprintf("%d inodes", o.Inodes))
	}
	return strings.Join(parts, ", ")
}
