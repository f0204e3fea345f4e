package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/fusefs"
	"github.com/shedfs/shedfs/zones"
)

// fsFlags are the settings of the FUSE layer that serve and mount share.
func fsFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "metrics", Usage: "serve Prometheus metrics at this address (e.g. 127.0.0.1:9567)"},
		&cli.IntFlag{Name: "metrics-max-holders", Value: daemon.DefaultMaxHolders, Usage: "export quota gauges for at most this many holders"},
		&cli.StringFlag{Name: "memory-limit", Value: "128MiB", Usage: "soft limit for the daemon's Go heap, kept by collecting garbage more often near it, raised by each mounted view's FUSE read buffers and by the inodes the views' kernels hold, up to --memory-limit-max (0: none; GOMEMLIMIT wins when set)"},
		&cli.StringFlag{Name: "memory-limit-max", Value: "25%", Usage: "the most --memory-limit is raised to for the inodes the views' kernels hold (go-fuse keeps a node per inode a kernel holds): a size, or a percentage of physical memory (0: no ceiling)"},
		&cli.BoolFlag{Name: "pprof", Usage: "also serve Go's profiler at /debug/pprof/ on the metrics address"},
		&cli.StringFlag{Name: "transport", Value: transportAuto, Usage: "how the kernel hands the views' requests to the daemon: uring (FUSE over io_uring, Linux 6.14+ with /sys/module/fuse/parameters/enable_uring on), dev (/dev/fuse) or auto (uring when the kernel offers it)"},
		&cli.BoolFlag{Name: "no-passthrough", Usage: "serve every read through the daemon instead of FUSE passthrough"},
		&cli.StringFlag{Name: "symlinks", Value: "shared-in-zone", Usage: "symlink policy: shared-in-zone (any target in a user's own zones, none leaving share/ or a group), in-zone (none leaving any zone), allow or deny"},
		&cli.StringFlag{Name: "share-mode", Value: "group", Usage: "ownership mode of new entries in share/: owner, group or owner_ro"},
		&cli.StringFlag{Name: "group-mode", Value: "group", Usage: "ownership mode of new entries in group spaces: owner, group or owner_ro"},
	}, append(linkFlags(), agentFlags()...)...) // link.go, agents.go
}

// fsOptions reads fsFlags, and applies --memory-limit to the process.
func fsOptions(c *cli.Context) (fusefs.Options, error) {
	opts := fusefs.Options{Passthrough: !c.Bool("no-passthrough")}
	limit, err := daemon.ParseSize(c.String("memory-limit"))
	if err != nil {
		return opts, fmt.Errorf("--memory-limit: %w", err)
	}
	if limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
		// Each mounted view raises it by its FUSE read buffers, and
		// by the nodes its kernel holds up to --memory-limit-max.
		opts.MemoryLimit = limit
		if opts.MemoryLimitMax, err = memoryCeiling(c.String("memory-limit-max"), physicalMemory()); err != nil {
			return opts, fmt.Errorf("--memory-limit-max: %w", err)
		}
	}
	if opts.Zones.Symlinks, err = zones.ParseSymlinkPolicy(c.String("symlinks")); err != nil {
		return opts, fmt.Errorf("--symlinks: %w", err)
	}
	if opts.Zones.ShareDefault, err = shedfs.ParseOwnMode(c.String("share-mode")); err != nil {
		return opts, fmt.Errorf("--share-mode: %w", err)
	}
	if opts.Zones.GroupDefault, err = shedfs.ParseOwnMode(c.String("group-mode")); err != nil {
		return opts, fmt.Errorf("--group-mode: %w", err)
	}
	return opts, nil
}

// memoryCeiling reads --memory-limit-max: a size, or a percentage (up to
// 100) of phys, the bytes of physical memory.
func memoryCeiling(s string, phys int64) (int64, error) {
	if p, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return 0, fmt.Errorf("%q is not a percentage from 0 to 100", s)
		}
		return int64(float64(phys) * f / 100), nil
	}
	return daemon.ParseSize(s)
}

// physicalMemory is the machine's RAM in bytes, 0 when unknown (a
// percentage then means no ceiling).
func physicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
