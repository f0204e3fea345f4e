package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/tokens"
)

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "bearer tokens for the agent doors (MCP over HTTP, the file API): each a grant within one user's view",
		Subcommands: []*cli.Command{
			{
				Name:  "create",
				Usage: "make a token and print it (it is shown this once; the store keeps only its hash)",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "user", Usage: "the user the token acts as", Required: true},
					&cli.StringFlag{Name: "session", Usage: "act in this open session of the user (its view) instead of the user's own view"},
					&cli.StringFlag{Name: "root", Usage: "a directory of the view (e.g. output/run-42); nothing outside it is reachable"},
					&cli.StringFlag{Name: "access", Value: "all", Usage: "what the token may do, comma-separated: " + strings.Join(acl.AccessNames(), ",") + " (or all)"},
					&cli.StringSliceFlag{Name: "allow", Usage: "only paths matching this glob (repeat; *.md matches a name at any depth, docs/* a path)"},
					&cli.StringSliceFlag{Name: "deny", Usage: "never paths matching this glob (repeat; wins over --allow)"},
					&cli.StringFlag{Name: "ttl", Value: "24h", Usage: "how long the token lives (90m, 12h, 30d; at most 365d)"},
					&cli.StringSliceFlag{Name: "door", Usage: "the doors it may be used at: " + strings.Join(tokens.Doors, ", ") + " (repeat or comma-separate; default all)"},
					&cli.StringFlag{Name: "reason", Usage: "why it was made (shown by token list and in the audit trail)"},
				},
				Action: runTokenCreate,
			},
			{
				Name:   "list",
				Usage:  "the tokens (never their secrets)",
				Flags:  []cli.Flag{storeFlag(), jsonFlag(), &cli.StringFlag{Name: "user", Usage: "only this user's tokens"}},
				Action: runTokenList,
			},
			{
				Name:      "revoke",
				Usage:     "revoke tokens: refused from their next request on",
				ArgsUsage: "ID...",
				Flags:     []cli.Flag{storeFlag()},
				Action:    runTokenRevoke,
			},
		},
	}
}

// splitList reads a repeatable flag whose values may also be
// comma-separated.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func runTokenCreate(c *cli.Context) error {
	if c.NArg() != 0 {
		return errors.New("token create: takes no arguments (see --help)")
	}
	ttl, err := parseAge(c.String("ttl"))
	if err != nil || ttl <= 0 {
		return fmt.Errorf("--ttl %q: give a positive duration (90m, 12h, 30d)", c.String("ttl"))
	}
	req := daemon.TokenCreateRequest{
		User: c.String("user"), Session: c.String("session"), Root: c.String("root"),
		Access: c.String("access"), Allow: c.StringSlice("allow"), Deny: c.StringSlice("deny"),
		Doors: splitList(c.StringSlice("door")), TTL: ttl.String(), Reason: c.String("reason"),
	}
	return withPart(c, "token", func(ctx context.Context, ta daemon.TokenAdmin) error {
		t, err := ta.CreateToken(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, t)
		}
		fmt.Fprintln(c.App.Writer, t.Token)
		fmt.Fprintf(c.App.ErrWriter, "token %s for %s, %s in %s, until %s: keep it now, it is not shown again\n",
			t.ID, t.User, t.Access, t.Root, t.Expires.Local().Format(time.DateTime))
		return nil
	})
}

func runTokenList(c *cli.Context) error {
	if c.NArg() != 0 {
		return errors.New("token list: takes no arguments (--user filters)")
	}
	return withPart(c, "token", func(ctx context.Context, ta daemon.TokenAdmin) error {
		ts, err := ta.ListTokens(ctx, c.String("user"))
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, ts)
		}
		tw := table(c.App.Writer)
		fmt.Fprintln(tw, "ID\tUSER\tSESSION\tROOT\tACCESS\tDOORS\tEXPIRES\tLAST USED\tREASON")
		for _, t := range ts {
			expires := t.Expires.Local().Format(time.DateTime)
			if t.Expired {
				expires += " (expired)"
			}
			last := "-"
			if !t.LastUsed.IsZero() {
				last = t.LastUsed.Local().Format(time.DateTime)
			}
			doors := strings.Join(t.Doors, ",")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.User, orDash(t.Session), cell(t.Root), t.Access,
				orDash(doors), expires, last, orDash(cell(t.Reason)))
		}
		return tw.Flush()
	})
}

func runTokenRevoke(c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("token revoke: give at least one ID (token list shows them)")
	}
	return withPart(c, "token", func(ctx context.Context, ta daemon.TokenAdmin) error {
		var errs []error
		for _, id := range c.Args().Slice() {
			if err := ta.RevokeToken(ctx, id); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(c.App.Writer, "revoked %s\n", id)
		}
		return errors.Join(errs...)
	})
}
