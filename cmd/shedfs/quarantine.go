package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

func quarantineCommand() *cli.Command {
	one := func(name, usage string, fn func(ctx context.Context, q daemon.QuarantineAdmin, ino uint64) (*daemon.QuarantineInfo, error)) *cli.Command {
		return &cli.Command{
			Name: name, Usage: usage, ArgsUsage: "INO (from quarantine list)",
			Flags: []cli.Flag{storeFlag(), jsonFlag()},
			Action: func(c *cli.Context) error {
				if err := nargs(c, "one INO", 1); err != nil {
					return err
				}
				ino, err := daemon.ParseIno(c.Args().First())
				if err != nil {
					return err
				}
				return withPart(c, "quarantine", func(ctx context.Context, q daemon.QuarantineAdmin) error {
					info, err := fn(ctx, q, ino)
					if err != nil {
						return err
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, info)
					}
					fmt.Fprintf(c.App.Writer, "%s: inode %d (%s) %s\n", name, info.Ino, cell(info.Signature), cell(strings.Join(info.Paths, ", ")))
					return nil
				})
			},
		}
	}
	return &cli.Command{
		Name:  "quarantine",
		Usage: "files the virus scanner found infected: list, release (the admin decides; nothing is rescanned) or delete them",
		Subcommands: []*cli.Command{
			{
				Name: "list", Usage: "list the infected files",
				Flags:  []cli.Flag{storeFlag(), jsonFlag()},
				Action: runQuarantineList,
			},
			one("release", "let every view open the file again, as clean", func(ctx context.Context, q daemon.QuarantineAdmin, ino uint64) (*daemon.QuarantineInfo, error) {
				return q.ReleaseQuarantined(ctx, ino)
			}),
			one("delete", "remove every name of the file", func(ctx context.Context, q daemon.QuarantineAdmin, ino uint64) (*daemon.QuarantineInfo, error) {
				return q.DeleteQuarantined(ctx, ino)
			}),
		},
	}
}

func runQuarantineList(c *cli.Context) error {
	if err := nargs(c, "no arguments", 0); err != nil {
		return err
	}
	return withPart(c, "quarantine", func(ctx context.Context, q daemon.QuarantineAdmin) error {
		list, err := q.Quarantine(ctx)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, list)
		}
		tw := table(c.App.Writer)
		fmt.Fprintln(tw, "INO\tSIGNATURE\tOWNER\tSIZE\tPATHS")
		for _, e := range list {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", e.Ino, cell(e.Signature), orDash(e.Owner), e.Size, cell(strings.Join(e.Paths, ", ")))
		}
		return tw.Flush()
	})
}
