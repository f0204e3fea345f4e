package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
)

// nearFull is the share of a quota limit from which status flags a holder.
const nearFull = 0.9

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the store and, if one runs, the daemon serving it",
		Description: "Views, open files and the request rate come from the running daemon (the rate only when it\n" +
			"serves --metrics); without a daemon the store is read directly. The data size is the sum of the\n" +
			"quota holders' usage unless --du measures the disk usage of the blobs directory.",
		Flags: []cli.Flag{
			storeFlag(),
			jsonFlag(),
			&cli.BoolFlag{Name: "du", Usage: "measure the disk usage of the blobs directory (walks it) instead of estimating it from the usage counters"},
		},
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) error {
	if err := nargs(c, "no arguments", 0); err != nil {
		return err
	}
	return withAdminRead(c, func(ctx context.Context, a daemon.Admin) error {
		st, err := a.Status(ctx)
		if err != nil {
			return err
		}
		if c.Bool("du") {
			loc, err := location(c)
			if err != nil {
				return err
			}
			n, err := diskUsage(loc.BlobDir())
			if err != nil {
				return err
			}
			st.Size.DataBytes, st.Size.DataMeasured = n, true
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, st)
		}
		return printStatus(c.App.Writer, st)
	})
}

// printStatus writes st for a terminal: one line per fact, then the quota
// table.
func printStatus(w io.Writer, st *daemon.Status) error {
	tw := table(w)
	fmt.Fprintf(tw, "store:\t%s\n", st.Store)
	const noDaemon = "no daemon"
	if st.Daemon {
		d := fmt.Sprintf("running (pid %d)", st.PID)
		if st.MountRoot != "" {
			d += ", mount root " + st.MountRoot
		}
		fmt.Fprintf(tw, "daemon:\t%s\n", d)
		fmt.Fprintf(tw, "views:\t%d\n", len(st.Views))
		for _, v := range st.Views {
			fmt.Fprintf(tw, "\t  %s → %s\n", v.User, v.Mountpoint)
		}
		if st.Transport != "" {
			fmt.Fprintf(tw, "transport:\t%s\n", st.Transport)
		}
		fmt.Fprintf(tw, "open files:\t%d\n", st.OpenFiles)
		fmt.Fprintf(tw, "locks:\t%d\n", len(st.Locks))
		if r := st.Requests; r != nil {
			fmt.Fprintf(tw, "requests:\t%.1f/s over the last %.0fs, %d since start\n", r.PerSecond, r.WindowSeconds, r.Total)
		} else {
			fmt.Fprintf(tw, "requests:\tnot counted\n")
		}
	} else {
		fmt.Fprintf(tw, "daemon:\tnot running\n")
		fmt.Fprintf(tw, "views:\t%s\n", noDaemon)
		fmt.Fprintf(tw, "open files:\t%s\n", noDaemon)
		fmt.Fprintf(tw, "locks:\t%s\n", noDaemon)
		fmt.Fprintf(tw, "requests:\t%s\n", noDaemon)
	}
	if len(st.Daemons) > 0 {
		// A store on etcd: the daemon asked is one of several, and
		// one that runs elsewhere is running all the same.
		label := "daemons elsewhere"
		if st.Daemon {
			label = "other daemons"
		}
		fmt.Fprintf(tw, "%s:\t%d\n", label, len(st.Daemons))
		for _, d := range st.Daemons {
			fmt.Fprintf(tw, "\t  %s\n", d)
		}
	}
	if b := st.Bucket; b != nil {
		ratio := "no reads yet"
		if n := b.Hits + b.Misses; n > 0 {
			ratio = fmt.Sprintf("%.0f%% hits", 100*float64(b.Hits)/float64(n))
		}
		fmt.Fprintf(tw, "contents:\t%s\n", b.URL)
		fmt.Fprintf(tw, "uploads pending:\t%d files, %s\n", b.PendingUploads, daemon.FormatSize(b.PendingBytes))
		fmt.Fprintf(tw, "cache:\t%s of %s, %s; %s up, %s down, %d upload and %d download errors\n",
			daemon.FormatSize(b.CacheBytes), daemon.FormatSize(b.CacheSize), ratio,
			daemon.FormatSize(b.UploadBytes), daemon.FormatSize(b.DownloadBytes), b.UploadErrors, b.DownloadErrors)
	}
	fmt.Fprintf(tw, "users:\t%d\n", st.Users)
	fmt.Fprintf(tw, "groups:\t%d\n", st.Groups)
	how := "estimated from quota usage"
	if st.Size.DataMeasured {
		how = "disk usage of blobs/"
	}
	if st.Size.Meta == "etcd" {
		// What one store takes of an etcd database is not told
		// apart: its keys, and the database every store shares.
		fmt.Fprintf(tw, "store size:\t%s of data (%s); metadata on etcd: %d keys, cluster database %s (%s in use)\n",
			daemon.FormatSize(st.Size.DataBytes), how, st.Size.EtcdKeys,
			daemon.FormatSize(st.Size.EtcdDBBytes), daemon.FormatSize(st.Size.EtcdDBInUse))
	} else {
		fmt.Fprintf(tw, "store size:\t%s (metadata %s: LSM %s + value log %s; data %s, %s)\n",
			daemon.FormatSize(st.Size.LSMBytes+st.Size.VlogBytes+st.Size.DataBytes),
			daemon.FormatSize(st.Size.LSMBytes+st.Size.VlogBytes),
			daemon.FormatSize(st.Size.LSMBytes), daemon.FormatSize(st.Size.VlogBytes),
			daemon.FormatSize(st.Size.DataBytes), how)
	}
	switch lc := st.LastCheck; {
	case lc == nil:
		fmt.Fprintf(tw, "last fsck:\tnever\n")
	case lc.Problems == 0:
		fmt.Fprintf(tw, "last fsck:\t%s, clean\n", lc.At.Local().Format(time.RFC3339))
	default:
		fmt.Fprintf(tw, "last fsck:\t%s, %d problems, %d not repaired\n", lc.At.Local().Format(time.RFC3339), lc.Problems, lc.Unrepaired)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "quota:")
	tw = table(w)
	fmt.Fprintln(tw, "  HOLDER\tBYTES USED\tLIMIT\t%\tINODES USED\tLIMIT\t%\tSTATE")
	for _, q := range st.Quotas {
		flag := "-"
		switch {
		case full(q.Used.Bytes, q.Limit.Bytes) || full(q.Used.Inodes, q.Limit.Inodes):
			flag = "NEAR FULL"
		case q.Limit.Bytes > 0 || q.Limit.Inodes > 0:
			flag = "ok"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", q.Holder,
			daemon.FormatSize(q.Used.Bytes), sizeOrNone(q.Limit.Bytes), percent(q.Used.Bytes, q.Limit.Bytes),
			q.Used.Inodes, countOrNone(q.Limit.Inodes), percent(q.Used.Inodes, q.Limit.Inodes), flag)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printLocks(w, st.Locks)
}

// printLocks writes the lock table: who holds what, through which view.
func printLocks(w io.Writer, locks []daemon.LockInfo) error {
	if len(locks) == 0 {
		return nil
	}
	fmt.Fprintln(w, "locks held:")
	tw := table(w)
	// On a store several daemons share, each lock names its daemon.
	shared := slices.ContainsFunc(locks, func(l daemon.LockInfo) bool { return l.Daemon != "" })
	head := "  USER\tPATH\tINODE\tKIND\tTYPE\tRANGE\tPID"
	if shared {
		head += "\tDAEMON"
	}
	fmt.Fprintln(tw, head)
	for _, l := range locks {
		rng := fmt.Sprintf("%d-EOF", l.Start)
		if l.Len > 0 {
			rng = fmt.Sprintf("%d-%d", l.Start, l.Start+l.Len-1)
		}
		path := l.Path
		if strings.ContainsFunc(path, unicode.IsControl) {
			// A name with a newline must not forge a row.
			path = strconv.Quote(path)
		}
		row := fmt.Sprintf("  %s\t%s\t%d\t%s\t%s\t%s\t%d", l.User, path, l.Ino, l.Kind, l.Type, rng, l.PID)
		if shared {
			row += "\t" + l.Daemon
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// full reports whether used reaches nearFull of a set limit.
func full(used, limit int64) bool {
	return limit > 0 && float64(used) >= nearFull*float64(limit)
}

// diskUsage is the space the files under dir take on disk (allocated
// blocks, so holes do not count), like du -s.
func diskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walk
			}
			return err
		}
		if s, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += s.Blocks * 512
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", dir, err)
	}
	return total, nil
}
