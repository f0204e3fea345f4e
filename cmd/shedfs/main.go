// Command shedfs runs and administers the shedfs daemon: it parses flags,
// wires the packages together and formats output. Every rule and every
// piece of state lives in the packages it calls.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

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

// logger builds the process logger from --log-level, on stderr.
func logger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level})), nil
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "shedfs %s\n", version)
			return nil
		},
	}
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
	var fl, pos []string
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
			fl = append(fl, a)
			if takesValue(flags, a) && i < len(args) {
				fl = append(fl, args[i])
				i++
			}
		default:
			pos = append(pos, a)
		}
	}
	out = append(out, fl...)
	if dashdash {
		out = append(out, "--")
	}
	return append(out, pos...)
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
