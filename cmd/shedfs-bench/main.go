// Command shedfs-bench measures shedfs against a plain directory and a plain
// go-fuse loopback mount on the same machine, in the same run, and prints
// medians and ratios.
//
// It is a separate command rather than a set of Go benchmarks because
// benchmarks are not tests (docs/design.md, "Tests"): they do not pass or fail on
// their own, they need root, /dev/fuse, a built shedfs binary, a gigabyte of
// disk and minutes of wall time, and what they produce is a table of ratios
// to read, not a verdict for `go test`. `make bench` builds bin/shedfs and
// runs this command; `make test` never does.
//
// Every target is measured in one process run so that the ratios compare like
// with like: the same disk, the same kernel, the same moment. Each workload is
// repeated -reps times, targets interleaved within each repetition, and the
// median is reported. The FUSE targets are served by child processes (serving
// and using a mount from one process can deadlock, docs/design.md, "Traps that shaped the code"); the
// loopback child is this binary re-executed with the hidden first argument
// -serve-loopback SRC MNT.
//
// Usage:
//
//	shedfs-bench [-quick] [-reps N] [-shedfs bin/shedfs] [-json FILE] ...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// serveLoopbackArg is the hidden first argument that turns this binary into
// the loopback FUSE server used as a baseline.
const serveLoopbackArg = "-serve-loopback"

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if len(os.Args) > 1 && (os.Args[1] == serveLoopbackArg || os.Args[1] == "-"+serveLoopbackArg) {
		if len(os.Args) != 4 && (len(os.Args) != 5 || os.Args[4] != loopbackPassthroughArg) {
			fmt.Fprintf(os.Stderr, "shedfs-bench: usage: shedfs-bench %s SRC MNT [%s]\n", serveLoopbackArg, loopbackPassthroughArg)
			os.Exit(2)
		}
		if err := serveLoopback(os.Args[2], os.Args[3], len(os.Args) == 5); err != nil {
			fmt.Fprintf(os.Stderr, "shedfs-bench: serve loopback: %v\n", err)
			os.Exit(1)
		}
		return
	}

	if len(os.Args) > 1 && (os.Args[1] == serveMemfsArg || os.Args[1] == "-"+serveMemfsArg) {
		if len(os.Args) != 3 && (len(os.Args) != 4 || os.Args[3] != "writeback" && os.Args[3] != "uring") {
			fmt.Fprintf(os.Stderr, "shedfs-bench: usage: shedfs-bench %s MNT [writeback|uring]\n", serveMemfsArg)
			os.Exit(2)
		}
		if err := serveMemfs(os.Args[2], len(os.Args) == 4 && os.Args[3] == "writeback", len(os.Args) == 4 && os.Args[3] == "uring"); err != nil {
			fmt.Fprintf(os.Stderr, "shedfs-bench: serve memfs: %v\n", err)
			os.Exit(1)
		}
		return
	}

	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "shedfs-bench: %v\n", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "shedfs-bench: %v\n", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

// config is everything the flags decide.
type config struct {
	reps         int
	files        int
	fileSize     int
	seqSize      int64
	tree         string
	parentDir    string
	shedfsBin    string
	shedfsBase   string
	targets      []string
	workloads    []string
	jsonPath     string
	quick        bool
	mountTimeout time.Duration
	rssInodes    int
	rssLoopback  bool
	rssProfile   string
	rssStore     string
	workers      int
	randSize     int64
	randOps      int
	dirSmall     int
	dirLarge     int
	views        int
	viewCreates  int
	npmCache     string
	scratchMode  string // -scratch-fs: scratchAuto, scratchOff or "size" (scratch.go)
	scratchSize  int64
}

// parseFlags reads the command line into a config; -quick lowers the sizes
// that were not set explicitly.
func parseFlags(args []string) (*config, error) {
	fset := flag.NewFlagSet("shedfs-bench", flag.ContinueOnError)
	cfg := &config{}
	var seqSize, randSize, targets, workloads, scratch string
	fset.IntVar(&cfg.reps, "reps", 3, "repetitions of each workload per target; the median is reported")
	fset.IntVar(&cfg.files, "files", 10000, "number of small files in the create/stat/read/delete workload")
	fset.IntVar(&cfg.fileSize, "file-size", 4096, "size of each small file in bytes")
	fset.StringVar(&seqSize, "seq-size", "1GiB", "size of the sequential write/read file (e.g. 1GiB, 256MiB)")
	fset.StringVar(&cfg.tree, "tree", "", "directory tree to tar once and untar per run (default: $(go env GOROOT)/src; -quick: its net/ subtree)")
	fset.StringVar(&cfg.parentDir, "dir", "/var/tmp", "parent of the temporary work directory; native dir, loopback source and shedfs store all live there, on one filesystem")
	fset.StringVar(&scratch, "scratch-fs", scratchAuto, "run every target on a journaled ext4 made for the run in a sparse image of this size under -dir, loop-mounted (root), removed at the end: auto (the default) does so, at up to "+humanBytes(scratchAutoSize)+", only when -dir's filesystem is ext4 without a journal, which skews creates; off never")
	fset.StringVar(&cfg.shedfsBin, "shedfs", "bin/shedfs", "path of the shedfs binary")
	fset.StringVar(&cfg.shedfsBase, "shedfs-base", "", "path of a second shedfs binary, measured as target shedfs-base with the flags of shedfs (an A/B of two builds in one run)")
	fset.StringVar(&targets, "targets", strings.Join(defaultTargets(), ","), "comma-separated targets to measure (all: "+strings.Join(targetNames(allTargets()), ",")+")")
	fset.StringVar(&workloads, "workloads", strings.Join(workloadNames(defaultWorkloads()), ","), "comma-separated workloads to run (opt-in: rss)")
	fset.IntVar(&cfg.workers, "workers", 4, "smallfiles: the parallel phases use this many goroutines, each on its own share of the files")
	fset.StringVar(&randSize, "rand-size", "256MiB", "randread: size of the file read at random offsets")
	fset.IntVar(&cfg.randOps, "rand-ops", 20000, "randread: number of 4KiB reads at random offsets")
	fset.IntVar(&cfg.dirSmall, "dir-small", 1000, "dirscale: entries in the small directory")
	fset.IntVar(&cfg.dirLarge, "dir-large", 100000, "dirscale: entries in the large directory")
	fset.IntVar(&cfg.views, "views", 1000, "views: users served by one shedfs serve daemon, one view each")
	fset.IntVar(&cfg.viewCreates, "view-creates", 100, "views: creates (and writes) timed per phase")
	fset.StringVar(&cfg.npmCache, "npm-cache", "", "npm: keep the npm cache in this directory across runs (default: a fresh one in the work directory, filled from the registry)")
	fset.StringVar(&cfg.jsonPath, "json", "", "also write the raw numbers as JSON to this file")
	fset.BoolVar(&cfg.quick, "quick", false, "smoke run: 1 repetition and small sizes (1000 files, 64MiB sequential file, small tree, few npm packages, directories of 200 and 5000, 50 views)")
	fset.DurationVar(&cfg.mountTimeout, "mount-timeout", 30*time.Second, "how long to wait for a FUSE target to appear mounted")
	fset.IntVar(&cfg.rssInodes, "rss-inodes", 1000000, "rss workload: files in the store (plus one directory per 1000)")
	fset.BoolVar(&cfg.rssLoopback, "rss-loopback", false, fmt.Sprintf("rss workload: also measure the loopback on a native tree of -rss-inodes files even above %d", rssLoopbackMax))
	fset.StringVar(&cfg.rssProfile, "rss-profile", "", "rss workload: serve pprof from each shedfs daemon and save its heap profile after every phase in this directory")
	fset.StringVar(&cfg.rssStore, "rss-store", "", "rss workload: keep the filled store in this directory and reuse it in later runs (filled here once per -rss-inodes; each target mounts a fresh copy)")
	// Parse errors are reported by main as one line; only -h prints usage.
	fset.SetOutput(io.Discard)
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fset.SetOutput(os.Stdout)
			fmt.Fprintf(os.Stdout, "usage: shedfs-bench [flags]\n\nMeasures a plain directory, a go-fuse loopback mount and shedfs in one run; see `make bench`.\n\n")
			fset.PrintDefaults()
		}
		return nil, err
	}
	if fset.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (all options are flags; see -h)", fset.Arg(0))
	}
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.quick {
		if !set["reps"] {
			cfg.reps = 1
		}
		if !set["files"] {
			cfg.files = 1000
		}
		if !set["seq-size"] {
			seqSize = "64MiB"
		}
		if !set["rand-size"] {
			randSize = "32MiB"
		}
		if !set["rand-ops"] {
			cfg.randOps = 2000
		}
		if !set["dir-small"] {
			cfg.dirSmall = 200
		}
		if !set["dir-large"] {
			cfg.dirLarge = 5000
		}
		if !set["views"] {
			cfg.views = 50
		}
		if !set["view-creates"] {
			cfg.viewCreates = 20
		}
	}
	var err error
	if cfg.scratchMode, cfg.scratchSize, err = parseScratchFlag(scratch); err != nil {
		return nil, err
	}
	n, err := parseSize(seqSize)
	if err != nil {
		return nil, fmt.Errorf("-seq-size: %w", err)
	}
	cfg.seqSize = n
	if cfg.randSize, err = parseSize(randSize); err != nil {
		return nil, fmt.Errorf("-rand-size: %w", err)
	}
	if cfg.randSize < 1<<20 {
		return nil, fmt.Errorf("-rand-size must be at least 1MiB, got %d bytes", cfg.randSize)
	}
	for _, c := range []struct {
		name string
		v    int
		min  int
	}{{"workers", cfg.workers, 2}, {"rand-ops", cfg.randOps, 1}, {"dir-small", cfg.dirSmall, 1},
		{"dir-large", cfg.dirLarge, 1}, {"views", cfg.views, 1}, {"view-creates", cfg.viewCreates, 1}} {
		if c.v < c.min {
			return nil, fmt.Errorf("-%s must be at least %d, got %d", c.name, c.min, c.v)
		}
	}
	if cfg.npmCache != "" {
		if cfg.npmCache, err = filepath.Abs(cfg.npmCache); err != nil {
			return nil, fmt.Errorf("-npm-cache: %w", err)
		}
	}
	if cfg.reps < 1 {
		return nil, fmt.Errorf("-reps must be at least 1, got %d", cfg.reps)
	}
	if cfg.files < 1 {
		return nil, fmt.Errorf("-files must be at least 1, got %d", cfg.files)
	}
	if cfg.fileSize < 0 {
		return nil, fmt.Errorf("-file-size must not be negative, got %d", cfg.fileSize)
	}
	if cfg.seqSize < 1<<20 {
		return nil, fmt.Errorf("-seq-size must be at least 1MiB, got %d bytes", cfg.seqSize)
	}
	if cfg.rssInodes < 1 {
		return nil, fmt.Errorf("-rss-inodes must be at least 1, got %d", cfg.rssInodes)
	}
	if cfg.rssProfile != "" {
		if cfg.rssProfile, err = filepath.Abs(cfg.rssProfile); err != nil {
			return nil, fmt.Errorf("-rss-profile: %w", err)
		}
	}
	if cfg.rssStore != "" {
		if cfg.rssStore, err = filepath.Abs(cfg.rssStore); err != nil {
			return nil, fmt.Errorf("-rss-store: %w", err)
		}
	}
	if cfg.targets, err = pickNames("-targets", targets, targetNames(allTargets())); err != nil {
		return nil, err
	}
	if cfg.workloads, err = pickNames("-workloads", workloads, workloadNames(allWorkloads())); err != nil {
		return nil, err
	}
	return cfg, nil
}

// pickNames splits a comma-separated list and checks each name against known.
func pickNames(flagName, list string, known []string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		ok := false
		for _, k := range known {
			if k == name {
				ok = true
			}
		}
		if !ok {
			return nil, fmt.Errorf("%s: unknown name %q (known: %s)", flagName, name, strings.Join(known, ", "))
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", flagName)
	}
	return out, nil
}

// parseSize reads a byte size such as 4096, 64MiB, 1GiB, 500M or 2G
// (K/M/G without "iB" are taken as binary units too, like dd).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suffix)) {
			t = strings.TrimSpace(t[:len(t)-len(u.suffix)])
			mult = u.mult
			break
		}
	}
	var n int64
	if _, err := fmt.Sscanf(t, "%d", &n); err != nil || fmt.Sprint(n) != t || n < 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 4096, 64MiB, 1GiB)", s)
	}
	return n * mult, nil
}
