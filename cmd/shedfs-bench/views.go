package main

// The views workload: one `shedfs serve` daemon serving many users, one
// view each, against the same daemon serving one. docs/design.md, "Performance",
// (issue 9) wants, with 1,000 views: a create in a private tree no slower
// than with one view, a create or a write in share/ at most 2× that, all
// views mounted in under 5 s, and the daemon under 200 MiB RSS with a
// bounded number of threads.
//
// Like rss it is standalone: it makes two stores of its own straight
// through package metadata (N users, and 1 user, each with a 1 TiB quota),
// serves both at once with the flags of the "shedfs" target, and times
// -view-creates creates by open/write/close in the first user's view,
// alternating between the two daemons -reps times. Before the share/
// phases every view looks at share/ (and, for the write, at the written
// file), so that every view's kernel holds the entries a change must
// invalidate.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

const (
	// viewsTargetN is the number of views the targets are about.
	viewsTargetN = 1000
	// viewsMountLimit is the docs/design.md, "Performance", bound on
	// mounting them all.
	viewsMountLimit = 5 * time.Second
)

// viewsPhases are the timed phases, per daemon.
var viewsPhases = []string{"private create", "share create", "share write"}

// viewsState holds the views workload's findings.
type viewsState struct {
	rep *viewsReport
}

// viewsDaemon is what one serve daemon showed.
type viewsDaemon struct {
	Views        int     `json:"views"`
	Cmd          string  `json:"cmd"`
	MountSeconds float64 `json:"mount_seconds"`
	Mounted      procMem `json:"mem_after_mount"`
	Threads      int     `json:"threads_after_mount"`
	After        procMem `json:"mem_after_phases"`
	ThreadsAfter int     `json:"threads_after_phases"`
	StopSeconds  float64 `json:"stop_seconds"`
	// Samples holds ms per operation for each phase, one per repetition.
	Samples map[string][]float64 `json:"samples_ms"`
}

// median returns the median ms per operation of a phase, NaN if none.
func (d *viewsDaemon) median(phase string) float64 {
	if d == nil {
		return median(nil)
	}
	return median(d.Samples[phase])
}

// viewsReport is what the views workload found, printed after the main
// table and written under "views" by -json.
type viewsReport struct {
	Users    int          `json:"users"`
	Creates  int          `json:"creates_per_phase"`
	Populate float64      `json:"populate_seconds"`
	One      *viewsDaemon `json:"one_view,omitempty"`
	Many     *viewsDaemon `json:"many_views,omitempty"`
	Skipped  string       `json:"skipped,omitempty"`
}

// viewUser names user i of a views store.
func viewUser(i int) string { return fmt.Sprintf("u%05d", i) }

// runViews is the views workload.
func runViews(ctx context.Context, b *bench) error {
	rep := &viewsReport{Users: b.cfg.views, Creates: b.cfg.viewCreates}
	b.views.rep = rep
	if !containsString(b.cfg.targets, "shedfs") {
		rep.Skipped = "needs target shedfs (it serves with the flags of that target)"
		return nil
	}
	if _, err := os.Stat(b.cfg.shedfsBin); err != nil {
		return fmt.Errorf("shedfs binary: %w (build it with `make build`, or pass -shedfs)", err)
	}
	start := time.Now()
	one, err := makeViewsStore(filepath.Join(b.work, "views1-store"), 1)
	if err != nil {
		return err
	}
	many, err := makeViewsStore(filepath.Join(b.work, "viewsN-store"), b.cfg.views)
	if err != nil {
		return err
	}
	rep.Populate = time.Since(start).Seconds()
	slog.Info("views: stores made", "users", b.cfg.views, "took", time.Since(start).Round(time.Millisecond))

	rep.One = &viewsDaemon{Views: 1, Samples: map[string][]float64{}}
	mOne, err := b.startServe(ctx, "views1", one, rep.One)
	if err != nil {
		return err
	}
	rep.Many = &viewsDaemon{Views: b.cfg.views, Samples: map[string][]float64{}}
	mMany, err := b.startServe(ctx, "viewsN", many, rep.Many)
	if err != nil {
		return errors.Join(err, b.stopOne(mOne))
	}
	err = b.viewsPhases(ctx, []*mounted{mOne, mMany}, []*viewsDaemon{rep.One, rep.Many})
	for i, m := range []*mounted{mOne, mMany} {
		d := []*viewsDaemon{rep.One, rep.Many}[i]
		if mem, threads, merr := readProcMemThreads(m); merr == nil {
			d.After, d.ThreadsAfter = mem, threads
		}
		t := time.Now()
		if serr := b.stopOne(m); serr != nil {
			err = errors.Join(err, serr)
		}
		d.StopSeconds = time.Since(t).Seconds()
	}
	return err
}

// makeViewsStore makes a store of n users, each with the quota of the
// "shedfs" target (quota.go).
func makeViewsStore(store string, n int) (string, error) {
	meta, err := metadata.Open(filepath.Join(store, "meta"), metadata.Options{})
	if err != nil {
		return "", fmt.Errorf("views: open store: %w", err)
	}
	for i := range n {
		name := viewUser(i)
		if _, err := meta.AddUser(name); err != nil {
			meta.Close()
			return "", fmt.Errorf("views: add user %s: %w", name, err)
		}
		if err := meta.SetLimit(shedfs.Holder("user:"+name), shedfs.Limit{Bytes: quotaBytes, Inodes: quotaInodes}); err != nil {
			meta.Close()
			return "", fmt.Errorf("views: quota of %s: %w", name, err)
		}
	}
	if err := meta.Close(); err != nil {
		return "", fmt.Errorf("views: close store: %w", err)
	}
	return store, nil
}

// startServe starts `shedfs serve` on store with the "shedfs" target's
// flags, waits until every user's view is mounted, and records how long
// that took and the daemon's memory and threads.
func (b *bench) startServe(ctx context.Context, name, store string, d *viewsDaemon) (*mounted, error) {
	root := filepath.Join(b.work, name+"-mnt")
	args := append([]string{"serve", "--store", store, "--mount-root", root}, shedfsMetricsFlags...)
	d.Cmd = "shedfs " + strings.Join(args, " ")
	ready := func() (bool, error) {
		ms, err := fuseMountsUnder(root)
		return len(ms) >= d.Views, err
	}
	// A slow daemon may need more than -mount-timeout for many views.
	timeout := b.cfg.mountTimeout + time.Duration(d.Views)*50*time.Millisecond
	start := time.Now()
	m, err := startChild(ctx, b, name, root, timeout, ready, b.cfg.shedfsBin, args...)
	if err != nil {
		return nil, fmt.Errorf("views: %w", err)
	}
	d.MountSeconds = time.Since(start).Seconds()
	m.stopWait = timeout
	mem, threads, err := readProcMemThreads(m)
	if err != nil {
		return m, errors.Join(err, b.stopOne(m))
	}
	d.Mounted, d.Threads = mem, threads
	slog.Info("views: mounted", "views", d.Views, "took", time.Since(start).Round(time.Millisecond),
		"VmRSS", humanBytes(mem.RSS), "threads", threads)
	return m, nil
}

// readProcMemThreads reads the memory and thread count of a child.
func readProcMemThreads(m *mounted) (procMem, int, error) {
	if m.exited() {
		return procMem{}, 0, fmt.Errorf("%s exited (%s); its output:\n%s", m.name, m.cmd.ProcessState, tail(m.log, 20))
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return procMem{}, 0, fmt.Errorf("%s: %w", m.name, err)
	}
	mem, err := parseProcStatus(string(data))
	if err != nil {
		return procMem{}, 0, fmt.Errorf("%s: %w", m.name, err)
	}
	threads, err := parseThreads(string(data))
	if err != nil {
		return procMem{}, 0, fmt.Errorf("%s: %w", m.name, err)
	}
	return mem, threads, nil
}

// parseThreads reads the Threads line of /proc/PID/status.
func parseThreads(status string) (int, error) {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				return 0, fmt.Errorf("bad Threads line %q", line)
			}
			return n, nil
		}
	}
	return 0, errors.New("no Threads line")
}

// viewsPhases times the phases on each daemon in turn, -reps times.
func (b *bench) viewsPhases(ctx context.Context, ms []*mounted, ds []*viewsDaemon) error {
	for rep := range b.cfg.reps {
		for i, m := range ms {
			d := ds[i]
			for _, phase := range viewsPhases {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if m.exited() {
					return fmt.Errorf("views: %s exited (%s); its output:\n%s", m.name, m.cmd.ProcessState, tail(m.log, 20))
				}
				v, err := b.viewsPhase(m.dir, d.Views, phase, rep)
				if err != nil {
					return fmt.Errorf("views: %s with %d views: %w", phase, d.Views, err)
				}
				d.Samples[phase] = append(d.Samples[phase], v)
				slog.Info("measured", "rep", fmt.Sprintf("%d/%d", rep+1, b.cfg.reps), "workload", "views",
					"views", d.Views, "phase", phase, "ms/op", fmt.Sprintf("%.2f", v))
			}
		}
	}
	return nil
}

// viewsPhase runs one phase in the view of user 0 under root and returns
// ms per operation; what it made is removed afterwards, untimed.
func (b *bench) viewsPhase(root string, views int, phase string, rep int) (float64, error) {
	view := filepath.Join(root, viewUser(0))
	n := b.cfg.viewCreates
	var dir string
	switch phase {
	case "private create":
		dir = filepath.Join(view, fmt.Sprintf("private-%d", rep))
	default:
		dir = filepath.Join(view, "share", fmt.Sprintf("%s-%d", strings.Fields(phase)[1], rep))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, fmt.Errorf("mkdir: %w", err)
	}
	defer os.RemoveAll(dir)
	rel, err := filepath.Rel(view, dir)
	if err != nil {
		return 0, err
	}
	// Every view looks at the directory, so every kernel holds it.
	if err := lookFromEveryView(root, views, rel); err != nil {
		return 0, err
	}
	line := []byte("x\n")
	var target string
	if phase == "share write" {
		target = filepath.Join(dir, "w")
		if err := os.WriteFile(target, line, 0o644); err != nil {
			return 0, fmt.Errorf("create: %w", err)
		}
		if err := lookFromEveryView(root, views, filepath.Join(rel, "w")); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	for i := range n {
		var f *os.File
		var err error
		if target != "" {
			f, err = os.OpenFile(target, os.O_WRONLY|os.O_APPEND, 0)
		} else {
			f, err = os.OpenFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		}
		if err != nil {
			return 0, fmt.Errorf("open: %w", err)
		}
		if _, err := f.Write(line); err != nil {
			f.Close()
			return 0, fmt.Errorf("write: %w", err)
		}
		if err := f.Close(); err != nil {
			return 0, fmt.Errorf("close: %w", err)
		}
	}
	return float64(time.Since(start).Microseconds()) / 1000 / float64(n), nil
}

// lookFromEveryView stats rel in the view of every user, for a path in
// share/, or only in user 0's view for a private path (no other view has
// it).
func lookFromEveryView(root string, views int, rel string) error {
	if !strings.HasPrefix(rel, "share/") {
		views = 1
	}
	for i := range views {
		if _, err := os.Lstat(filepath.Join(root, viewUser(i), rel)); err != nil {
			return fmt.Errorf("look from view %d: %w", i, err)
		}
	}
	return nil
}

// checks are the views rows of the docs/design.md "Performance" checks. With fewer
// views than the targets are about, the numbers are shown but not judged.
func (r *viewsReport) checks() []check {
	n := r.Users
	names := []string{
		fmt.Sprintf("many views: mount all %d views < %s", n, viewsMountLimit),
		fmt.Sprintf("many views: private create with %d views ≤ 1.00× with 1 view", n),
		fmt.Sprintf("many views: share create with %d views ≤ 2.00× private create with 1 view", n),
		fmt.Sprintf("many views: share write with %d views ≤ 2.00× private create with 1 view", n),
		fmt.Sprintf("many views: daemon RSS with %d views mounted < %s (threads printed)", n, humanBytes(rssLimit)),
	}
	out := make([]check, len(names))
	for i := range out {
		out[i] = check{Target: names[i], Result: "n/a"}
	}
	if r.Skipped != "" || r.One == nil || r.Many == nil {
		reason := r.Skipped
		if reason == "" {
			reason = "the run stopped before the views were measured"
		}
		for i := range out {
			out[i].Detail = "skipped: " + reason
		}
		return out
	}
	base := r.One.median("private create")
	judge := func(c *check, v float64, ok bool, detail string) {
		c.Value, c.Detail = v, detail
		if n < viewsTargetN {
			c.Detail += fmt.Sprintf(" (not judged: only %d views, use -views %d)", n, viewsTargetN)
			return
		}
		c.Result = verdict(ok)
	}
	mount := r.Many.MountSeconds
	judge(&out[0], mount, mount < viewsMountLimit.Seconds(), fmt.Sprintf("%.2f s (1 view: %.2f s)", mount, r.One.MountSeconds))
	for i, phase := range viewsPhases {
		v := r.Many.median(phase)
		limit := 2.0
		if i == 0 {
			limit = 1.0
		}
		ratio := v / base
		c := &out[1+i]
		if !(ratio >= 0) { // NaN: no samples
			c.Detail = "not measured"
			continue
		}
		judge(c, ratio, ratio <= limit, fmt.Sprintf("%.2f× (%.2f ms with %d views, private create with 1 view %.2f ms)", ratio, v, n, base))
	}
	rss := r.Many.Mounted.RSS
	judge(&out[4], float64(rss), rss > 0 && rss < rssLimit, fmt.Sprintf("VmRSS %s and %d threads after mounting, %s and %d threads after the phases (1 view: %s, %d threads)",
		humanBytes(rss), r.Many.Threads, humanBytes(r.Many.After.RSS), r.Many.ThreadsAfter, humanBytes(r.One.Mounted.RSS), r.One.Threads))
	return out
}

// print writes the views table.
func (r *viewsReport) print(w io.Writer) {
	if r.Skipped != "" {
		fmt.Fprintf(w, "\nmany views: skipped: %s\n", r.Skipped)
		return
	}
	if r.One == nil || r.Many == nil {
		return
	}
	fmt.Fprintf(w, "\nmany views (`shedfs serve`, audit and metrics on, 1 TiB quota per user; stores of %d users made in %.1f s without FUSE);\n", r.Users, r.Populate)
	fmt.Fprintf(w, "ms per operation, median of the repetitions, %d operations each, in the view of %s; every view holds share/ and the written file:\n\n", r.Creates, viewUser(0))
	table := [][]string{{"views served", "mount all (s)", "VmRSS after mount", "threads", "private create (ms)", "share create (ms)", "share write (ms)", "VmRSS after", "threads after", "stop (s)"}}
	for _, d := range []*viewsDaemon{r.One, r.Many} {
		table = append(table, []string{strconv.Itoa(d.Views), fmt.Sprintf("%.2f", d.MountSeconds), humanBytes(d.Mounted.RSS),
			strconv.Itoa(d.Threads), fmt.Sprintf("%.2f", d.median(viewsPhases[0])), fmt.Sprintf("%.2f", d.median(viewsPhases[1])),
			fmt.Sprintf("%.2f", d.median(viewsPhases[2])), humanBytes(d.After.RSS), strconv.Itoa(d.ThreadsAfter), fmt.Sprintf("%.2f", d.StopSeconds)})
	}
	writeTable(w, table)
}
