package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/metadata"
)

func fsckCommand() *cli.Command {
	return &cli.Command{
		Name:  "fsck",
		Usage: "check the store and repair what is wrong (the daemon must not run)",
		Flags: []cli.Flag{
			storeFlag(),
			&cli.BoolFlag{Name: "dry-run", Usage: "report only: open the store read-only and change nothing, not even its clean/dirty state"},
			&cli.BoolFlag{Name: "verify-content", Usage: "also re-read every blob and report files whose content no longer matches its SHA-256"},
		},
		Action: runFsck,
	}
}

func runFsck(c *cli.Context) error {
	log, err := logger(c)
	if err != nil {
		return err
	}
	dry := c.Bool("dry-run")
	loc, err := location(c)
	if err != nil {
		return err
	}
	st, err := daemon.Open(loc, daemon.OpenOptions{NoRecover: true, ReadOnly: dry, Logger: log})
	if errors.Is(err, metadata.ErrLocked) {
		return inUse(loc, err)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	if peers, err := st.Meta.Peers(); err == nil && len(peers) > 0 && !dry {
		// A repair would race the daemons serving a store on etcd.
		return cli.Exit(fmt.Sprintf("fsck: %d other daemons serve this store (%s): stop them first, or use --dry-run",
			len(peers), strings.Join(peers, "; ")), 1)
	}
	var progress func(done, total int)
	if f, ok := c.App.ErrWriter.(*os.File); ok && isTerminal(f) {
		last := time.Now()
		progress = func(done, total int) {
			if time.Since(last) > 200*time.Millisecond || done == total {
				fmt.Fprintf(f, "\rfsck: %d/%d", done, total)
				last = time.Now()
			}
		}
	}
	rep, err := st.Meta.Check(st.Blobs, !dry, progress)
	if progress != nil {
		fmt.Fprintln(c.App.ErrWriter)
	}
	if err != nil {
		return fmt.Errorf("fsck: %w", err)
	}
	snaps, err := daemon.CheckSnapshots(st, !dry)
	if err != nil {
		return fmt.Errorf("fsck: snapshots: %w", err)
	}
	for _, p := range snaps {
		rep.Problems = append(rep.Problems, metadata.Problem{Kind: metadata.KindSnapshot, Detail: p.Detail, Repaired: p.Repaired})
	}
	w := c.App.Writer
	mismatched := 0
	if c.Bool("verify-content") {
		if mismatched, err = verifyContent(c, st); err != nil {
			return err
		}
	}
	for _, p := range rep.Problems {
		state := "repaired"
		switch {
		case p.Kind == metadata.KindOverQuota:
			state = "NOT repaired: raise the limit or delete data"
		case !p.Repaired && dry:
			state = "NOT repaired: dry run"
		case !p.Repaired:
			state = "NOT repaired"
		}
		fmt.Fprintf(w, "%-14s ino %-10d %s (%s)\n", p.Kind, p.Ino, p.Detail, state)
	}
	summary := fmt.Sprintf("%d inodes, %d entries, %d blobs in %s", rep.Inodes, rep.Entries, rep.Blobs, rep.Duration.Round(time.Millisecond))
	switch {
	case mismatched > 0:
		return cli.Exit(fmt.Sprintf("fsck: %d files whose content does not match its checksum, %d other problems not repaired: %s", mismatched, rep.Unrepaired(), summary), 1)
	case len(rep.Problems) == 0:
		fmt.Fprintf(w, "fsck: clean: %s\n", summary)
	case rep.Unrepaired() == 0:
		fmt.Fprintf(w, "fsck: repaired %d problems: %s\n", len(rep.Problems), summary)
	default:
		return cli.Exit(fmt.Sprintf("fsck: %d of %d problems not repaired: %s", rep.Unrepaired(), len(rep.Problems), summary), 1)
	}
	return nil
}

// inUse says what to do when another process holds an embedded store:
// the daemon that serves it (its pid, from the admin socket) must stop
// first. fsck needs the store to itself, a dry run too: a check of a
// store that changes under it would report changes in flight as damage.
func inUse(loc daemon.Location, err error) error {
	sock := loc.SocketPath()
	pid, perr := daemon.PeerPID(sock)
	if perr != nil {
		return fmt.Errorf("fsck: %w, and no daemon answers on %s (another shedfs command?): run fsck when it is done", err, sock)
	}
	return fmt.Errorf("fsck: store %s is served by the shedfs daemon with pid %d (admin socket %s): stop it (kill -TERM %d), then run shedfs fsck again; fsck needs the store to itself, --dry-run too",
		loc, pid, sock, pid)
}

// isTerminal reports whether progress lines would reach a person.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
