package main

// The agent workloads: what agents actually run in their views, `npm ci`
// of a fixed package.json from a warm npm cache and `git clone` of a local
// repository, each followed by `rm -rf` of what it made. Both spend much of
// their time in node and git themselves, which is why docs/design.md, "Performance",
// asks only 1.2× the loopback of them (and 1.5× of their rm -rf).
//
// The npm cache is filled from the registry once per run (or kept across
// runs with -npm-cache) in a plain directory; every target then installs
// with --offline from that cache, so the network is not measured. Without
// npm, or without a reachable registry, the workload is reported as skipped
// with the reason: benchmarks are not tests.

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// npmPackages is the fixed package.json of the npm workload: five real
// packages with pinned versions that pull in a few hundred more (about 235
// packages and 7,000 files) and run no install scripts.
const npmPackages = `{
  "name": "shedfs-bench-agent",
  "version": "1.0.0",
  "private": true,
  "dependencies": {
    "eslint": "9.17.0",
    "express": "4.21.2",
    "lodash": "4.17.21",
    "typescript": "5.7.3",
    "webpack": "5.97.1"
  }
}
`

// npmPackagesQuick is the package.json of -quick: two small packages.
const npmPackagesQuick = `{
  "name": "shedfs-bench-agent",
  "version": "1.0.0",
  "private": true,
  "dependencies": {
    "lodash": "4.17.21",
    "ms": "2.1.3"
  }
}
`

// npmWarmTimeout bounds each npm command of the warm-up, which talks to
// the registry.
const npmWarmTimeout = 10 * time.Minute

// npmFlags are the flags of every npm command: no audit, funding or update
// requests, no install scripts, errors only.
var npmFlags = []string{"--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error", "--update-notifier=false"}

// npmState is the npm workload's project (package.json and the
// package-lock.json of the warm-up) and cache.
type npmState struct {
	project string
	cache   string
	label   string // what is installed, for the row name
}

func npmMetrics(b *bench) []metric {
	label := b.npm.label
	if label == "" {
		label = "(skipped)"
	}
	return []metric{
		{ID: "npm", Name: "npm ci --offline of " + label, Unit: "s", Class: classAgent, Goal: &goal{Of: "shedfs/loopback", Min: 1.2}},
		{ID: "rm-npm", Name: "rm -rf of the npm project", Unit: "s", Class: classAgent, Goal: &goal{Of: "shedfs/loopback", Min: 1.5}},
	}
}

// skip records why the rows with these metric IDs are not measured.
func (b *bench) skip(reason string, ids ...string) {
	slog.Warn("workload skipped", "rows", strings.Join(ids, ","), "reason", reason)
	for _, id := range ids {
		b.skips[id] = reason
	}
}

// prepareNpm fills the npm cache from the registry in a plain directory:
// `npm install` (which writes package-lock.json and fetches the tarballs),
// then `npm ci` once more (which fetches the abbreviated metadata that
// `npm ci --offline` reads). Both prefer what the cache already holds, so
// with a warm -npm-cache they do not wait for the network.
func prepareNpm(ctx context.Context, b *bench) error {
	ids := []string{"npm", "rm-npm"}
	if _, err := exec.LookPath("npm"); err != nil {
		b.skip("npm is not installed (apt-get install npm)", ids...)
		return nil
	}
	project := filepath.Join(b.work, "npm-project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		return fmt.Errorf("npm project: %w", err)
	}
	pkg := npmPackages
	if b.cfg.quick {
		pkg = npmPackagesQuick
	}
	if err := os.WriteFile(filepath.Join(project, "package.json"), []byte(pkg), 0o644); err != nil {
		return fmt.Errorf("npm project: %w", err)
	}
	cache := b.cfg.npmCache
	if cache == "" {
		cache = filepath.Join(b.work, "npm-cache")
	}
	slog.Info("npm: warming the cache from the registry (once per run)", "cache", cache)
	start := time.Now()
	var files int
	for _, sub := range []string{"install", "ci"} {
		wctx, cancel := context.WithTimeout(ctx, npmWarmTimeout)
		args := append([]string{sub, "--prefer-offline", "--cache", cache}, npmFlags...)
		_, err := timeCommandIn(wctx, project, nil, "npm", args...)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			b.skip(fmt.Sprintf("warming the npm cache failed (registry unreachable?): %s", lastLine(err.Error())), ids...)
			return nil
		}
		files = countFiles(filepath.Join(project, "node_modules"))
		if err := os.RemoveAll(filepath.Join(project, "node_modules")); err != nil {
			return fmt.Errorf("npm project: %w", err)
		}
	}
	pkgs, err := lockPackages(filepath.Join(project, "package-lock.json"))
	if err != nil {
		b.skip(fmt.Sprintf("npm wrote no usable package-lock.json: %v", err), ids...)
		return nil
	}
	var direct struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal([]byte(pkg), &direct); err != nil {
		return fmt.Errorf("npm package.json: %w", err)
	}
	b.npm = npmState{project: project, cache: cache,
		label: fmt.Sprintf("%d packages (%d with deps, %d files)", len(direct.Dependencies), pkgs, files)}
	slog.Info("npm: cache warm", "took", time.Since(start).Round(time.Millisecond), "what", b.npm.label)
	return nil
}

// lockPackages counts the installed packages a package-lock.json lists.
func lockPackages(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var lock struct {
		Packages map[string]json.RawMessage `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	n := 0
	for k := range lock.Packages {
		if k != "" {
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%s lists no packages", path)
	}
	return n, nil
}

// countFiles counts the regular files under dir (0 if it is missing).
func countFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// lastLine is the last non-empty line of s, for one-line reasons.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// runNpm copies package.json and package-lock.json into a new project
// directory, installs with `npm ci --offline` from the warm cache, and
// removes the project with rm -rf.
func runNpm(ctx context.Context, b *bench, _ *mounted, dir string) ([]float64, error) {
	if b.npm.project == "" {
		return []float64{math.NaN(), math.NaN()}, nil
	}
	proj := filepath.Join(dir, "npm")
	if err := os.Mkdir(proj, 0o755); err != nil {
		return nil, fmt.Errorf("mkdir: %w", err)
	}
	for _, name := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(b.npm.project, name))
		if err != nil {
			return nil, fmt.Errorf("npm project: %w", err)
		}
		if err := os.WriteFile(filepath.Join(proj, name), data, 0o644); err != nil {
			return nil, fmt.Errorf("npm project: %w", err)
		}
	}
	args := append([]string{"ci", "--offline", "--cache", b.npm.cache}, npmFlags...)
	install, err := timeCommandIn(ctx, proj, nil, "npm", args...)
	if err != nil {
		return nil, err
	}
	syncAll()
	rm, err := timeCommand(ctx, "rm", "-rf", proj)
	if err != nil {
		return nil, err
	}
	return []float64{install.Seconds(), rm.Seconds()}, nil
}

func cloneMetrics(b *bench) []metric {
	what := "(skipped)"
	if b.repo != "" {
		what = fmt.Sprintf("%s (%d files)", b.treeLabel, b.treeFiles)
	}
	return []metric{
		{ID: "clone", Name: "git clone --no-hardlinks of a local repository of " + what, Unit: "s", Class: classAgent,
			Goal: &goal{Of: "shedfs/loopback", Min: 1.2}},
		{ID: "rm-clone", Name: "rm -rf of the clone", Unit: "s", Class: classAgent, Goal: &goal{Of: "shedfs/loopback", Min: 1.5}},
	}
}

// gitFlags make the bench's git commands independent of the user's git
// configuration.
var gitFlags = []string{"-c", "user.name=shedfs-bench", "-c", "user.email=bench@localhost",
	"-c", "gc.auto=0", "-c", "commit.gpgsign=false", "-c", "core.bare=false"}

// prepareRepo makes a bare git repository of the source tree (one commit,
// repacked into one pack, as a fetched repository is), once per run.
func prepareRepo(ctx context.Context, b *bench) error {
	ids := []string{"clone", "rm-clone"}
	if _, err := exec.LookPath("git"); err != nil {
		b.skip("git is not installed (apt-get install git)", ids...)
		return nil
	}
	if err := b.prepareTree(ctx); err != nil {
		return err
	}
	repo := filepath.Join(b.work, "repo.git")
	slog.Info("git: making a repository of the tree (once per run)", "tree", b.treePath, "repo", repo)
	start := time.Now()
	git := func(args ...string) error {
		all := append(append([]string{"--git-dir=" + repo, "--work-tree=" + b.treePath}, gitFlags...), args...)
		_, err := timeCommand(ctx, "git", all...)
		return err
	}
	if _, err := timeCommand(ctx, "git", "init", "-q", "--bare", repo); err != nil {
		return fmt.Errorf("git repository: %w", err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "the tree"}, {"repack", "-a", "-d", "-q"}} {
		if err := git(args...); err != nil {
			return fmt.Errorf("git repository: %w", err)
		}
	}
	if err := os.Remove(filepath.Join(repo, "index")); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("git repository: %w", err)
	}
	b.repo = repo
	slog.Info("git: repository made", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// runClone clones the repository made at start with `git clone
// --no-hardlinks` (objects copied, the tree checked out) and removes the
// clone with rm -rf.
func runClone(ctx context.Context, b *bench, _ *mounted, dir string) ([]float64, error) {
	if b.repo == "" {
		return []float64{math.NaN(), math.NaN()}, nil
	}
	d := filepath.Join(dir, "clone")
	clone, err := timeCommand(ctx, "git", "clone", "-q", "--no-hardlinks", b.repo, d)
	if err != nil {
		return nil, err
	}
	syncAll()
	rm, err := timeCommand(ctx, "rm", "-rf", d)
	if err != nil {
		return nil, err
	}
	return []float64{clone.Seconds(), rm.Seconds()}, nil
}
