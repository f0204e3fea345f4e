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
	app := newApp(os.Stdout, os.Stderr)
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "shedfs: %s\n", oneLine(err))
		var ec cli.ExitCoder
		if errors.As(err, &ec) && ec.ExitCode() != 0 {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}

// oneLine keeps an error to the single line the operator reads.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:      "shedfs",
		Usage:     "sandboxed per-user views of one shared file store, through FUSE",
		Version:   version,
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		},
		Commands: []*cli.Command{
			serveCommand(),
			mountCommand(),
			userCommand(),
			groupCommand(),
			quotaCommand(),
			statusCommand(),
			fsckCommand(),
			versionCommand(),
		},
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			return err
		},
		HideHelpCommand: true,
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
