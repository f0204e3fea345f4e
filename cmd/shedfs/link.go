package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/web"
)

// linkFlags are serve's and mount's share-by-link flags.
func linkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "http", Usage: "serve share-by-link links at this address (e.g. 127.0.0.1:8467); without it nothing listens"},
		&cli.StringFlag{Name: "public-url", Usage: "what links start with (default http://ADDR of --http)"},
	}
}

// openLinks prepares the link service when --http asks for it and hands
// it to the core (user.shedfs.link).
func (s *serving) openLinks(c *cli.Context) error {
	if c.String("http") == "" {
		if c.String("public-url") != "" {
			return errors.New("--public-url needs --http")
		}
		return nil
	}
	if p := c.String("public-url"); p != "" {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("--public-url %q: give an http or https URL such as https://files.example.org", p)
		}
	}
	opts := web.Options{Core: s.core, Dir: s.st.Location().StateDir(), PublicURL: c.String("public-url"), Logger: s.log}
	if s.content != nil {
		opts.Content = s.content
	}
	if s.reg != nil {
		opts.Registerer = s.reg
	}
	svc, err := web.New(opts)
	if err != nil {
		return err
	}
	s.links = svc
	s.core.SetLinks(svc)
	return nil
}

// startLinks listens for link requests when --http asks for it.
func (s *serving) startLinks(c *cli.Context) error {
	if s.links == nil {
		return nil
	}
	s.d.UseLinks(s.links)
	_, err := s.links.Listen(c.String("http"))
	return err
}

// stopLinks ends the link server, letting requests under way finish.
func (s *serving) stopLinks() {
	if s.links == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.links.Shutdown(ctx); err != nil {
		s.log.Warn("link server", "err", err)
	}
}

func linkCommand() *cli.Command {
	return &cli.Command{
		Name:  "link",
		Usage: "share files and folders by signed, expiring links (served by serve/mount --http)",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "make a link to PATH in the user's view and print its URL",
				ArgsUsage: "PATH (relative to the view root, e.g. output/report.html)",
				Flags: []cli.Flag{
					storeFlag(), jsonFlag(),
					&cli.StringFlag{Name: "user", Usage: "the user whose view PATH is in, who shares it", Required: true},
					&cli.StringFlag{Name: "ttl", Usage: "how long the link lives (e.g. 2h, 7d; default: the store's, 24h; at most 7d)"},
				},
				Action: runLinkCreate,
			},
			{
				Name:   "list",
				Usage:  "the live links",
				Flags:  []cli.Flag{storeFlag(), jsonFlag(), &cli.StringFlag{Name: "user", Usage: "only this user's links"}},
				Action: runLinkList,
			},
			{
				Name:      "revoke",
				Usage:     "revoke links: they answer 403 at once",
				ArgsUsage: "ID...",
				Flags:     []cli.Flag{storeFlag()},
				Action:    runLinkRevoke,
			},
			{
				Name:   "rotate-key",
				Usage:  "replace the key links are signed with: every link stops working",
				Flags:  []cli.Flag{storeFlag()},
				Action: runLinkRotate,
			},
			{
				Name:   "defaults",
				Usage:  "show, or with --ttl set, the lifetime of new links",
				Flags:  []cli.Flag{storeFlag(), jsonFlag(), &cli.StringFlag{Name: "ttl", Usage: "new default lifetime (e.g. 12h, 3d; at most 7d)"}},
				Action: runLinkDefaults,
			},
		},
	}
}

func runLinkCreate(c *cli.Context) error {
	if err := nargs(c, "one PATH", 1); err != nil {
		return err
	}
	if err := daemon.ValidPrincipalName("user", c.String("user")); err != nil {
		return err
	}
	return withPart(c, "link", func(ctx context.Context, la daemon.LinkAdmin) error {
		l, err := la.CreateLink(ctx, daemon.LinkCreateRequest{User: c.String("user"), Path: c.Args().First(), TTL: c.String("ttl")})
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, l)
		}
		fmt.Fprintln(c.App.Writer, l.URL)
		return nil
	})
}

func runLinkList(c *cli.Context) error {
	if c.NArg() != 0 {
		return errors.New("link list: takes no arguments (--user filters)")
	}
	return withPart(c, "link", func(ctx context.Context, la daemon.LinkAdmin) error {
		ls, err := la.ListLinks(ctx, c.String("user"))
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, ls)
		}
		tw := table(c.App.Writer)
		fmt.Fprintln(tw, "ID\tUSER\tPATH\tEXPIRES\tDOWNLOADS\tURL")
		for _, l := range ls {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", l.ID, l.User, cell(l.Path), l.Expires.Local().Format(time.DateTime), l.Downloads, orDash(l.URL))
		}
		return tw.Flush()
	})
}

func runLinkRevoke(c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("link revoke: give at least one ID (link list shows them)")
	}
	return withPart(c, "link", func(ctx context.Context, la daemon.LinkAdmin) error {
		var errs []error
		for _, id := range c.Args().Slice() {
			if err := la.RevokeLink(ctx, id); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(c.App.Writer, "revoked %s\n", id)
		}
		return errors.Join(errs...)
	})
}

func runLinkRotate(c *cli.Context) error {
	return withPart(c, "link", func(ctx context.Context, la daemon.LinkAdmin) error {
		if err := la.RotateLinkKey(ctx); err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, "link key replaced: every link made before no longer works")
		return nil
	})
}

func runLinkDefaults(c *cli.Context) error {
	var req daemon.LinkSettingsRequest
	if c.IsSet("ttl") {
		v := c.String("ttl")
		req.TTL = &v
	}
	return withPart(c, "link", func(ctx context.Context, la daemon.LinkAdmin) error {
		st, err := la.LinkSettings(ctx, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, st)
		}
		fmt.Fprintf(c.App.Writer, "default lifetime of new links: %s (at most %s)\n", st.DefaultTTL, st.MaxTTL)
		return nil
	})
}
