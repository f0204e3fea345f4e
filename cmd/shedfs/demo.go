package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

// Defaults of the demo: every door on loopback, at the addresses the
// README's quick start names.
const (
	demoMetrics = "127.0.0.1:9567"
	demoHTTP    = "127.0.0.1:8467"
	demoMCP     = "127.0.0.1:8468"
	demoAPI     = "127.0.0.1:8469"
)

// demoWelcome is the file the demo imports into the first user's
// uploads/, so that a link and a read-only folder have something to show.
const demoWelcome = `Welcome to shedfs.

This file was imported by "shedfs demo" into the uploads/ of the demo's
first user: the view reads it, and refuses to change it (uploads/ is
read-only). Its link came from getfattr -n user.shedfs.link.

README.md, "Quick start", lists what to try next.
`

// demoCommand is the quick start in one process: it makes a store with a
// few users and a group (again, idempotently, at every run), serves every
// door on loopback, prints where to look, and stops cleanly on SIGINT or
// SIGTERM sent to it. It is one process, not a make recipe or a script,
// so that a signal to the command the README gives reaches the daemon.
// It takes every flag of serve but those the demo sets itself.
func demoCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "dir", Value: "demo", Usage: "the demo's directory: its store in DIR/store, one view per user under DIR/mnt"},
		&cli.StringSliceFlag{Name: "users", Value: cli.NewStringSlice("alice", "bob", "carol"), Usage: "users of the demo (the first gets a quota and the imported files)"},
		&cli.StringFlag{Name: "group", Value: "team-alpha", Usage: "group of the demo"},
		&cli.StringSliceFlag{Name: "members", Value: cli.NewStringSlice("alice", "bob"), Usage: "members of --group"},
		&cli.StringSliceFlag{Name: "import", Usage: "also import these files into the first user's uploads/ (replacing a previous import)"},
	}
	for _, f := range serveCommand().Flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			switch f.Name {
			case "mount-root":
				continue // DIR/mnt
			case "store":
				f.Hidden, f.EnvVars = true, nil // DIR/store
			case "metrics":
				f.Value = demoMetrics
			case "http":
				f.Value = demoHTTP
			case "mcp":
				f.Value = demoMCP
			case "api":
				f.Value = demoAPI
			}
		case *cli.BoolFlag:
			if f.Name == "init" {
				f.Hidden = true // the demo always creates its store
			}
		}
		flags = append(flags, f)
	}
	return &cli.Command{
		Name:  "demo",
		Usage: "the quick start: a store in DIR with a few users and a group, every view, links, metrics, the MCP server and the file API on loopback; SIGINT or SIGTERM stops it",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return errors.New("demo: takes no arguments (see shedfs demo --help)")
			}
			return runDemo(c)
		},
	}
}

func runDemo(c *cli.Context) error {
	dir := c.String("dir")
	if dir == "" {
		return errors.New("demo: --dir is empty")
	}
	users := c.StringSlice("users")
	if len(users) == 0 {
		return errors.New("demo: --users is empty")
	}
	for _, u := range users {
		if err := daemon.ValidPrincipalName("user", u); err != nil {
			return fmt.Errorf("demo: --users: %w", err)
		}
	}
	group := c.String("group")
	if group != "" {
		if err := daemon.ValidPrincipalName("group", group); err != nil {
			return fmt.Errorf("demo: --group: %w", err)
		}
	}
	store, mnt := filepath.Join(dir, "store"), filepath.Join(dir, "mnt")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := c.Set("store", store); err != nil {
		return err
	}
	if err := c.Set("init", "true"); err != nil {
		return err
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	if err := daemon.CheckFuse(); err != nil {
		return err
	}
	s, err := openServing(c, log, daemon.Config{MountRoot: mnt})
	if err != nil {
		return err
	}
	// Signals are caught before anything is mounted, so that none can
	// kill the process between a mount and the handler.
	ctx, stopSignals := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	if err := s.startDoors(c); err != nil {
		s.stop()
		return err
	}
	if err := s.d.Start(ctx); err != nil {
		s.close()
		return err
	}
	link, err := demoSetup(ctx, s.d.Admin(), users, group, c.StringSlice("members"), c.StringSlice("import"), c.String("http") != "")
	if err != nil {
		stopErr := s.stop()
		if ctx.Err() != nil {
			// A signal came during the setup: a stop, not a failure.
			return stopErr
		}
		return fmt.Errorf("demo: %w", err)
	}
	token := ""
	if c.String("mcp") != "" || c.String("api") != "" {
		ta, ok := s.d.Admin().(daemon.TokenAdmin)
		if ok {
			t, err := ta.CreateToken(ctx, daemon.TokenCreateRequest{User: users[0], TTL: "24h", Reason: "shedfs demo"})
			if err != nil {
				s.stop()
				return fmt.Errorf("demo: a token for the agent doors: %w", err)
			}
			token = t.Token
		}
	}
	driver, err := startCSI(c, s, log)
	if err != nil {
		s.stop()
		return err
	}
	demoGuide(c.App.Writer, demoGuideInfo{
		bin: os.Args[0], dir: dir, store: store, mnt: mnt, users: users, group: group,
		members: c.StringSlice("members"), link: link, metrics: c.String("metrics"),
		socket: s.st.Location().SocketPath(), mcp: c.String("mcp"), api: c.String("api"), token: token,
	})
	<-ctx.Done()
	stopSignals()
	stopCSI(driver)
	log.Info("stopping: unmounting every view")
	if err := s.stop(); err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, "shedfs demo stopped; the store stays in", store)
	return nil
}

// demoSetup makes the demo's users, group and quotas through the running
// daemon, as an operator would over the admin socket, so that every view
// is mounted the way user add mounts one. What exists already from an
// earlier run is kept. It returns a link to the welcome file ("" without
// a link server).
func demoSetup(ctx context.Context, a daemon.Admin, users []string, group string, members, imports []string, links bool) (string, error) {
	for _, u := range users {
		if _, err := a.AddUser(ctx, daemon.UserAddRequest{Name: u}); err != nil && !isCode(err, daemon.CodeExists) {
			return "", fmt.Errorf("add user %s: %w", u, err)
		}
	}
	first := users[0]
	gib := int64(1) << 30
	inodes := int64(100000)
	if _, err := a.SetQuota(ctx, "user:"+first, daemon.QuotaSetRequest{Bytes: &gib, Inodes: &inodes}); err != nil {
		return "", fmt.Errorf("quota of %s: %w", first, err)
	}
	if group != "" {
		if _, err := a.AddGroup(ctx, daemon.GroupAddRequest{Name: group}); err != nil && !isCode(err, daemon.CodeExists) {
			return "", fmt.Errorf("add group %s: %w", group, err)
		}
		for _, m := range members {
			if _, err := a.AddMember(ctx, group, daemon.MemberRequest{User: m}); err != nil && !isCode(err, daemon.CodeExists) {
				return "", fmt.Errorf("add %s to group %s: %w", m, group, err)
			}
		}
		two := 2 * gib
		if _, err := a.SetQuota(ctx, "group:"+group, daemon.QuotaSetRequest{Bytes: &two}); err != nil {
			return "", fmt.Errorf("quota of group %s: %w", group, err)
		}
	}
	if _, err := a.Import(ctx, daemon.ImportRequest{User: first, Name: "welcome.txt", Replace: true},
		strings.NewReader(demoWelcome), int64(len(demoWelcome))); err != nil {
		return "", fmt.Errorf("import welcome.txt: %w", err)
	}
	for _, path := range imports {
		if err := demoImport(ctx, a, first, path); err != nil {
			return "", err
		}
	}
	la, ok := a.(daemon.LinkAdmin)
	if !links || !ok {
		return "", nil
	}
	info, err := la.CreateLink(ctx, daemon.LinkCreateRequest{User: first, Path: "uploads/welcome.txt"})
	if err != nil {
		return "", fmt.Errorf("link to uploads/welcome.txt: %w", err)
	}
	return info.URL, nil
}

// demoImport imports one file of --import under its base name.
func demoImport(ctx context.Context, a daemon.Admin, user, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--import: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("--import: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("--import %s: not a regular file", path)
	}
	if _, err := a.Import(ctx, daemon.ImportRequest{User: user, Name: filepath.Base(path), Replace: true}, f, fi.Size()); err != nil {
		return fmt.Errorf("import %s: %w", path, err)
	}
	return nil
}

// isCode reports whether err is an admin API error with this code.
func isCode(err error, code string) bool {
	var e *daemon.Error
	return errors.As(err, &e) && e.Code == code
}

type demoGuideInfo struct {
	bin, dir, store, mnt string
	users                []string
	group                string
	members              []string
	link, metrics        string
	socket               string
	// mcp and api are the agent doors' addresses, token a bearer token
	// of the first user for them.
	mcp, api, token string
}

// demoGuide prints one line per door to try; the "label: value" lines
// are stable (the integration test reads them).
func demoGuide(w io.Writer, g demoGuideInfo) {
	var views []string
	for _, u := range g.users {
		views = append(views, filepath.Join(g.mnt, u))
	}
	first := filepath.Join(g.mnt, g.users[0])
	fmt.Fprintf(w, "\nshedfs demo: %d users, one view each; its store is %s\n", len(g.users), g.store)
	fmt.Fprintf(w, "  views:    %s\n", strings.Join(views, " "))
	if g.group != "" {
		fmt.Fprintf(w, "  group:    %s (%s share %s/groups/%s)\n", g.group, strings.Join(g.members, ", "), filepath.Join(g.mnt, "USER"), g.group)
	}
	fmt.Fprintf(w, "  try:      ls -la %s %s/uploads; cat %s/uploads/welcome.txt\n", first, first, first)
	if g.link != "" {
		fmt.Fprintf(w, "  link:     %s\n", g.link)
		fmt.Fprintf(w, "            (another: getfattr --only-values -n user.shedfs.link %s/uploads/welcome.txt)\n", first)
	}
	if g.metrics != "" {
		fmt.Fprintf(w, "  metrics:  http://%s/metrics\n", g.metrics)
	}
	if g.token != "" {
		fmt.Fprintf(w, "  token:    %s   (%s's, for the agent doors, 24h)\n", g.token, g.users[0])
	}
	if g.mcp != "" {
		fmt.Fprintf(w, "  mcp:      http://%s/mcp with Authorization: Bearer TOKEN; on stdio: %s mcp --store %s --user %s\n", g.mcp, g.bin, g.store, g.users[0])
	}
	if g.api != "" {
		fmt.Fprintf(w, "  api:      curl -s -H 'Authorization: Bearer %s' -d '{\"path\":\"uploads/welcome.txt\"}' http://%s/v1/fs/read\n", g.token, g.api)
	}
	fmt.Fprintf(w, "  admin:    %s status --store %s   (admin API: %s)\n", g.bin, g.store, g.socket)
	fmt.Fprintf(w, "  audit:    %s audit --store %s --denied\n", g.bin, g.store)
	fmt.Fprintf(w, "  more:     README.md, \"Quick start\"\n")
	fmt.Fprintf(w, "  stop:     Ctrl-C, or kill -INT %d (unmounts every view; the store stays for the next run)\n\n", os.Getpid())
}
