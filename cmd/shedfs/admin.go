package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/space"
)

// withAdmin runs fn against the daemon serving the store when one answers
// on its admin socket, and against the store opened directly otherwise, so
// every admin command works the same with or without a running daemon.
// It never creates a store (shedfs init does): a location that holds none
// is a one-line error saying how to create one.
func withAdmin(c *cli.Context, fn func(ctx context.Context, a daemon.Admin) error) error {
	return adminOn(c, false, fn)
}

// withPart runs fn on one part of the admin operations (links, tokens,
// sessions, ...; T is its interface, such as daemon.LinkAdmin), of the
// daemon or of the store when no daemon runs. what names the part in the
// error of a connection that has none.
func withPart[T any](c *cli.Context, what string, fn func(ctx context.Context, p T) error) error {
	return withAdmin(c, func(ctx context.Context, a daemon.Admin) error {
		p, ok := a.(T)
		if !ok {
			return fmt.Errorf("this admin connection has no %s operations (a daemon of an older shedfs?)", what)
		}
		return fn(ctx, p)
	})
}

// withAdminRead is withAdmin for commands that only read: when no daemon
// runs and the store's disk is too full to open it for writing, they open
// it read-only rather than fail (without the repair an unclean stop
// calls for, which a warning says).
func withAdminRead(c *cli.Context, fn func(ctx context.Context, a daemon.Admin) error) error {
	return adminOn(c, true, fn)
}

func adminOn(c *cli.Context, readOK bool, fn func(ctx context.Context, a daemon.Admin) error) error {
	loc, err := location(c)
	if err != nil {
		return err
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	log, err := quietLogger(c)
	if err != nil {
		return err
	}
	cl, st, err := reach(loc, readOK, log)
	if err != nil {
		return err
	}
	if cl != nil {
		defer cl.Close()
		return fn(ctx, cl)
	}
	ferr := fn(ctx, daemon.NewLocal(st, log))
	if err := st.Close(); err != nil && ferr == nil {
		return err
	}
	return ferr
}

// lockedPatience is how long a command keeps trying a store another
// process holds: a daemon that holds it answers on its socket once it
// listens, another command lets go when it is done.
const lockedPatience = 10 * time.Second

// reach finds what serves the store at loc: the daemon answering on its
// admin socket (cl), or else the store opened here (st, read-only when
// readOK and its disk is too full to write). A store locked by another
// process is no reason to give up at once: the daemon that holds it may
// not have answered in time (a loaded machine), or a command holds it
// for a moment; both are asked again until lockedPatience is over, and
// then the error says what was tried.
func reach(loc daemon.Location, readOK bool, log *slog.Logger) (*daemon.Client, *daemon.Store, error) {
	deadline := time.Now().Add(lockedPatience)
	for {
		cl, err := daemon.DialSocket(loc.SocketPath())
		if err == nil {
			return cl, nil, nil
		}
		if !errors.Is(err, daemon.ErrNoDaemon) {
			return nil, nil, err
		}
		st, err := daemon.Open(loc, daemon.OpenOptions{Logger: log})
		if readOK && errors.Is(err, space.ErrFull) {
			log.Warn("opening the store read-only", "why", err)
			st, err = daemon.Open(loc, daemon.OpenOptions{ReadOnly: true, Logger: log})
		}
		if !errors.Is(err, metadata.ErrLocked) {
			return nil, st, err
		}
		if time.Now().After(deadline) {
			sock := loc.SocketPath()
			if sock == "" {
				return nil, nil, fmt.Errorf("%w (for %v; no admin socket given)", err, lockedPatience)
			}
			return nil, nil, fmt.Errorf("%w, and no daemon answered on %s for %v: another shedfs command may hold it, or a daemon that does not answer (see its log)", err, sock, lockedPatience)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// quietLogger is the logger of one-shot commands: warnings and worse only
// (unless --log-level asks for more detail), so that a successful command
// prints its result and nothing else.
func quietLogger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	level = max(level, slog.LevelWarn)
	if c.String("log-level") == "debug" {
		level = slog.LevelDebug
	}
	return newLogger(c, level)
}

// jsonFlag is the --json flag of commands whose output scripts read.
func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"}
}

// printJSON writes v indented, for --json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// table starts an aligned table on w.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// nargs insists on exactly n arguments, naming them in the error.
func nargs(c *cli.Context, what string, n int) error {
	if c.NArg() != n {
		return fmt.Errorf("%s: give exactly %s (see --help)", c.Command.FullName(), what)
	}
	return nil
}

// sizeOrNone shows a byte limit, "none" for unlimited.
func sizeOrNone(n int64) string {
	if n == 0 {
		return "none"
	}
	return daemon.FormatSize(n)
}

// countOrNone shows an inode limit, "none" for unlimited.
func countOrNone(n int64) string {
	if n == 0 {
		return "none"
	}
	return strconv.FormatInt(n, 10)
}

// percent shows used against a limit, "-" when unlimited.
func percent(used, limit int64) string {
	if limit <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", float64(used)*100/float64(limit))
}

// orDash shows "-" for an empty cell, so columns stay readable.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cell shows one table field that may hold what a user chose (a path, a
// name) as shedfs.Display does, the one format of such fields wherever
// they are shown. Every user-controlled field of every table goes
// through it.
func cell(s string) string { return shedfs.Display(s) }

// listOrNone joins names, "-" when there are none.
func listOrNone(names []string) string {
	return orDash(strings.Join(names, ","))
}

// parseSizeFlag reads a size flag ("10GiB", "none"); ok is false when the
// flag was not given.
func parseSizeFlag(c *cli.Context, name string) (v int64, ok bool, err error) {
	if !c.IsSet(name) {
		return 0, false, nil
	}
	v, err = daemon.ParseSize(c.String(name))
	if err != nil {
		return 0, false, fmt.Errorf("--%s: %w", name, err)
	}
	return v, true, nil
}

// parseCountFlag reads an inode count flag ("100000", "none").
func parseCountFlag(c *cli.Context, name string) (v int64, ok bool, err error) {
	if !c.IsSet(name) {
		return 0, false, nil
	}
	v, err = daemon.ParseCount(c.String(name))
	if err != nil {
		return 0, false, fmt.Errorf("--%s: %w", name, err)
	}
	return v, true, nil
}

// entries is what a removal deleted: "3 entries, 12 KiB".
func entries(r *daemon.RemoveResult) string {
	what := "entries"
	if r.Entries == 1 {
		what = "entry"
	}
	return fmt.Sprintf("%d %s, %s", r.Entries, what, daemon.FormatSize(r.Bytes))
}
