package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/content"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/scan"
)

// contentFlags are the checksum and scanning settings of serve and mount.
func contentFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "clamd", Usage: "scan written and imported files with this clamd: unix:/path/clamd.ctl or tcp:host:port (none: nothing is scanned)"},
		&cli.StringFlag{Name: "scan-zones", Value: "all", Usage: "zones whose files are scanned: all, or a comma list of zone kinds and zones (share,group,output,group:team-alpha)"},
		&cli.DurationFlag{Name: "scan-wait", Value: content.DefaultWait, Usage: "how long an open from another view waits for a pending scan before EAGAIN"},
		&cli.BoolFlag{Name: "scan-fail-open", Usage: "when clamd cannot scan a file, let it be opened (state error) instead of keeping it pending"},
		&cli.StringFlag{Name: "scan-max-size", Value: "100MiB", Usage: "files larger than this are not scanned (unscanned); keep it at most clamd's StreamMaxLength"},
		&cli.IntFlag{Name: "scan-queue", Value: content.DefaultQueueSize, Usage: "files the digest and scan queue holds in memory (the rest wait in the store)"},
	}
}

// openContent builds the content service from contentFlags, with its
// metrics in reg when there is one; the caller starts it.
func openContent(c *cli.Context, st *daemon.Store, log *slog.Logger, reg *prometheus.Registry) (*content.Service, error) {
	opts := content.Options{
		Wait:      c.Duration("scan-wait"),
		FailOpen:  c.Bool("scan-fail-open"),
		QueueSize: c.Int("scan-queue"),
		Logger:    log,
	}
	if opts.Wait <= 0 {
		opts.Wait = time.Millisecond
	}
	max, err := daemon.ParseSize(c.String("scan-max-size"))
	if err != nil || max <= 0 {
		return nil, fmt.Errorf("--scan-max-size %q: give a size such as 100MiB", c.String("scan-max-size"))
	}
	opts.MaxSize = uint64(max)
	if opts.ScanZone, err = content.ParseZones(c.String("scan-zones")); err != nil {
		return nil, fmt.Errorf("--scan-zones: %w", err)
	}
	if a := c.String("clamd"); a != "" {
		addr, err := scan.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("--clamd: %w", err)
		}
		opts.Scanner = scan.New(addr)
	}
	if reg != nil {
		if opts.Metrics, err = content.NewMetrics(reg, opts.Scanner != nil); err != nil {
			return nil, err
		}
	}
	return content.New(st.Meta, st.Blobs, opts), nil
}

// verifyContent re-reads every blob whose digest is known and prints the
// files whose content no longer matches it (fsck --verify-content); it
// returns how many.
func verifyContent(c *cli.Context, st *daemon.Store) (int, error) {
	bad := 0
	checked, err := content.Verify(st.Meta, st.Blobs, func(m content.Mismatch) {
		bad++
		fmt.Fprintf(c.App.Writer, "%-14s ino %-10d %s: stored sha256 %s, blob has %s (NOT repaired: restore it or delete the file)\n",
			"content", m.Ino, m.Zone, m.Want, m.Got)
	})
	if err != nil {
		return bad, fmt.Errorf("fsck --verify-content: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "fsck: content of %d files verified, %d mismatched\n", checked, bad)
	return bad, nil
}
