// Command shedfs runs and administers the shedfs daemon: it parses flags,
// wires the packages together and formats output. Every rule and every
// piece of state lives in the packages it calls.
package main

import (
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// The release, commit and build date, stamped by `make build` (and the
// image) with -ldflags "-X main.version=... -X main.commit=... -X
// main.buildDate=..."; a plain `go build` leaves "dev" and no commit or
// date, so a binary nobody stamped says so instead of passing for a
// release.
var (
	version   = "dev"
	commit    = ""
	buildDate = ""
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run runs the command line in args and returns the exit status. Every
// error becomes one line on stderr starting with "shedfs: ".
func run(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	if err := app.Run(flagsFirst(app, args)); err != nil {
		fmt.Fprintf(stderr, "shedfs: %s\n", oneLine(err))
		var ec cli.ExitCoder
		if errors.As(err, &ec) && ec.ExitCode() != 0 {
			return ec.ExitCode()
		}
		return 1
	}
	return 0
}

// oneLine keeps an error to the single line the operator reads.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "shedfs",
		Usage:     "sandboxed per-user views of one shared file store, through FUSE",
		Version:   version,
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text (key=value) or json: one line per event on stderr, for the journal and log collectors"},
		},
		Commands: []*cli.Command{
			initCommand(),
			demoCommand(),
			serveCommand(),
			mountCommand(),
			userCommand(),
			groupCommand(),
			quotaCommand(),
			modeCommand(),
			importCommand(),
			statusCommand(),
			fsckCommand(),
			auditCommand(),
			linkCommand(),
			tokenCommand(),
			lockCommand(),
			mcpCommand(),
			migrateCommand(),
			quarantineCommand(),
			trashCommand(),
			restoreCommand(),
			sessionCommand(),
			snapshotCommand(),
			versionCommand(),
			helpMarkdownCommand(),
		},
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			return err
		},
		// Errors, cli.Exit ones included, come back from Run so that run
		// prints them in one format; urfave's default prints and exits.
		ExitErrHandler:  func(*cli.Context, error) {},
		HideHelpCommand: true,
	}
	quietUsageErrors(app.Commands)
	addMetaFlags(app.Commands)
	checkRequiredFlags("shedfs", app.Commands)
	return app
}

// checkRequiredFlags takes the check of required flags from urfave/cli,
// which prints the whole help text before its error, and does it in each
// command's Action instead: one line naming the flag and pointing at
// --help, as every other usage error. The flag's usage still says it is
// required.
func checkRequiredFlags(path string, cmds []*cli.Command) {
	for _, c := range cmds {
		path := path + " " + c.Name
		checkRequiredFlags(path, c.Subcommands)
		var names []string
		for _, f := range c.Flags {
			if r, ok := f.(cli.RequiredFlag); !ok || !r.IsRequired() {
				continue
			}
			switch f := f.(type) {
			case *cli.StringFlag:
				f.Required, f.Usage = false, f.Usage+" (required)"
			case *cli.StringSliceFlag:
				f.Required, f.Usage = false, f.Usage+" (required)"
			case *cli.IntFlag:
				f.Required, f.Usage = false, f.Usage+" (required)"
			case *cli.Int64Flag:
				f.Required, f.Usage = false, f.Usage+" (required)"
			case *cli.DurationFlag:
				f.Required, f.Usage = false, f.Usage+" (required)"
			default:
				continue // urfave checks it (TestNoRequiredFlagLeft keeps this empty)
			}
			names = append(names, f.Names()[0])
		}
		if len(names) == 0 || c.Action == nil {
			continue
		}
		action := c.Action
		c.Action = func(ctx *cli.Context) error {
			for _, n := range names {
				if !ctx.IsSet(n) {
					return fmt.Errorf("required flag --%s not set (see %s --help)", n, path)
				}
			}
			return action(ctx)
		}
	}
}

// quietUsageErrors makes a bad flag of any command an ordinary error (one
// line on stderr), instead of urfave's "Incorrect Usage" and help text.
func quietUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = func(c *cli.Context, err error, isSubcommand bool) error { return err }
		}
		quietUsageErrors(c.Subcommands)
	}
}

// storeFlag is the --store flag every command shares; SHEDFS_STORE stands
// in when it is absent.
func storeFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "store",
		Usage:   "store directory (meta/ and blobs/)",
		EnvVars: []string{"SHEDFS_STORE"},
	}
}

// logger builds the process logger from --log-level and --log-format, on
// stderr.
func logger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return newLogger(c, level)
}

// newLogger is a logger at level in the format --log-format names: text
// (slog's key=value) or json, one line per event either way, so that the
// journal and a Kubernetes log collector read one event per line. What
// libraries print through the standard log package (go-fuse's --debug
// trace) is routed through the same handler, so that a JSON stream stays
// JSON: that redirection is process-wide, which suits the one process
// this command is.
func newLogger(c *cli.Context, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch f := c.String("log-format"); f {
	case "text":
		h = slog.NewTextHandler(c.App.ErrWriter, opts)
	case "json":
		h = slog.NewJSONHandler(c.App.ErrWriter, opts)
	default:
		return nil, fmt.Errorf("--log-format: %q is neither text nor json", f)
	}
	stdlog.SetFlags(0)
	stdlog.SetOutput(slog.NewLogLogger(h, slog.LevelInfo).Writer())
	return slog.New(h), nil
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the release, the commit and the build date",
		Action: func(c *cli.Context) error {
			fmt.Fprint(c.App.Writer, versionText())
			return nil
		},
	}
}

// versionText is what shedfs version prints: the release on the first
// line, then the commit and the build date ("unknown" where the build did
// not stamp them).
func versionText() string {
	return fmt.Sprintf("shedfs %s\ncommit: %s\nbuilt: %s\n", version, orUnknown(commit), orUnknown(buildDate))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// flagsFirst moves the flags of the command being run ahead of its
// arguments, so that "shedfs user add alice --store S" works as operators
// type it: urfave/cli v2 stops reading flags at the first argument. It
// knows which flags take a value from the command's own definitions;
// everything after "--" stays an argument.
func flagsFirst(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	flags, cmds := app.Flags, app.Commands
	var leaf *cli.Command
	i := 1
	for i < len(args) {
		a := args[i]
		if strings.HasPrefix(a, "-") && a != "-" {
			if a == "--" {
				return append(out, args[i:]...)
			}
			out = append(out, a)
			i++
			if takesValue(flags, a) && i < len(args) {
				out = append(out, args[i])
				i++
			}
			continue
		}
		var next *cli.Command
		for _, c := range cmds {
			if c.HasName(a) {
				next = c
			}
		}
		if next == nil {
			break
		}
		out = append(out, a)
		i++
		leaf, flags, cmds = next, next.Flags, next.Subcommands
		if len(cmds) == 0 {
			break
		}
	}
	if leaf == nil || len(leaf.Subcommands) > 0 {
		return append(out, args[i:]...)
	}
	var fl, pos, global []string
	dashdash := false
	for i < len(args) {
		a := args[i]
		i++
		switch {
		case a == "--":
			dashdash = true
			pos = append(pos, args[i:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && a != "-":
			// A global flag (--log-level, --log-format) after the
			// command goes before it, where urfave reads it: a unit
			// file's "shedfs serve ... --log-format json" works.
			to := &fl
			if !hasFlag(flags, a) && hasFlag(app.Flags, a) {
				to = &global
			}
			*to = append(*to, a)
			if takesValue(flags, a) || takesValue(app.Flags, a) && to == &global {
				if i < len(args) {
					*to = append(*to, args[i])
					i++
				}
			}
		default:
			pos = append(pos, a)
		}
	}
	out = append(append(out[:1:1], global...), out[1:]...)
	out = append(out, fl...)
	if dashdash {
		out = append(out, "--")
	}
	return append(out, pos...)
}

// hasFlag reports whether the flag named in arg is one of flags.
func hasFlag(flags []cli.Flag, arg string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// takesValue reports whether the flag named in arg ("--store", "-store")
// reads the next argument as its value.
func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if strings.Contains(name, "=") {
		return false
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
