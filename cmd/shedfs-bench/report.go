package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"unicode/utf8"
)

// report is everything printed at the end of a run, and what -json writes.
type report struct {
	Machine     machineInfo      `json:"machine"`
	Config      reportConfig     `json:"config"`
	CacheDrop   string           `json:"caches_dropped"`
	Targets     []string         `json:"targets"`
	RatioCols   []ratioCol       `json:"ratio_columns"`
	Rows        []reportRow      `json:"rows"`
	Derived     []derivedRow     `json:"derived,omitempty"`
	Checks      []check          `json:"design_targets"`
	PeakRSS     map[string]int64 `json:"peak_rss_bytes,omitempty"`
	RSS         *rssReport       `json:"rss,omitempty"`
	Views       *viewsReport     `json:"views,omitempty"`
	SpeedRatios string           `json:"ratio_meaning"`
}

// reportConfig is the part of the configuration that shapes the numbers.
type reportConfig struct {
	Reps      int    `json:"reps"`
	Workers   int    `json:"workers"`
	Files     int    `json:"files"`
	FileSize  int    `json:"file_size"`
	SeqSize   int64  `json:"seq_size"`
	Tree      string `json:"tree,omitempty"`
	TreeFiles int    `json:"tree_files,omitempty"`
	TreeBytes int64  `json:"tree_bytes,omitempty"`
	Quick     bool   `json:"quick"`
}

// ratioCol is one ratio column: Target divided by Base, as a speed ratio.
type ratioCol struct {
	Target string `json:"target"`
	Base   string `json:"base"`
}

// reportRow is one metric: raw samples, medians and ratios.
type reportRow struct {
	metric
	Samples map[string][]float64 `json:"samples"`
	Median  map[string]float64   `json:"median"`
	Ratios  map[string]float64   `json:"ratios"` // key "target/base"
	Skipped string               `json:"skipped,omitempty"`
	// Workload is the -workloads name the row belongs to.
	Workload string `json:"workload,omitempty"`
	// Repetitions holds each repetition's value per target, in order
	// (null where not measured), and LastOverFirst the speed ratio of the
	// last repetition to the first (reps.go): each target keeps one mount
	// across the repetitions, and what grows shows here, not in Median.
	Repetitions   map[string][]*float64 `json:"repetitions,omitempty"`
	LastOverFirst map[string]float64    `json:"last_over_first,omitempty"`
}

// check is one docs/design.md "Performance" target and whether this run met it.
type check struct {
	Target string  `json:"target"`
	Result string  `json:"result"` // PASS, MISS or n/a
	Value  float64 `json:"value,omitempty"`
	Detail string  `json:"detail"`
}

// speedRatio compares a to base so that >1 always means a is faster.
func speedRatio(m metric, a, base float64) float64 {
	if a <= 0 || base <= 0 {
		return math.NaN()
	}
	if m.HigherIsBetter {
		return a / base
	}
	return base / a
}

// median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// buildReport computes medians, ratios and target checks.
func buildReport(b *bench, targets []target, rows []*row, rss map[string]int64) *report {
	rep := &report{
		Machine: readMachineInfo(b),
		Config: reportConfig{
			Reps: b.cfg.reps, Workers: b.cfg.workers, Files: b.cfg.files, FileSize: b.cfg.fileSize, SeqSize: b.cfg.seqSize,
			Tree: b.treeLabel, TreeFiles: b.treeFiles, TreeBytes: b.treeBytes, Quick: b.cfg.quick,
		},
		PeakRSS:     rss,
		SpeedRatios: "speed ratios: >1 means the first target is faster than the second, for rates and durations alike",
	}
	switch {
	case b.dropped+b.notDropped == 0:
		rep.CacheDrop = "n/a (no workload asked)"
	case b.notDropped == 0:
		rep.CacheDrop = "yes"
	case b.dropped == 0:
		rep.CacheDrop = "no (not permitted: reads may come from the page cache)"
	default:
		rep.CacheDrop = fmt.Sprintf("partly (%d of %d runs)", b.dropped, b.dropped+b.notDropped)
	}
	names := targetNames(targets)
	rep.Targets = names
	for _, t := range targets {
		for _, base := range t.Compare {
			if containsString(names, base) {
				rep.RatioCols = append(rep.RatioCols, ratioCol{Target: t.Name, Base: base})
			}
		}
	}
	for _, r := range rows {
		rr := reportRow{metric: r.Metric, Samples: r.Samples, Median: map[string]float64{}, Ratios: map[string]float64{},
			Skipped: b.skips[r.Metric.ID], Workload: r.Workload}
		rr.Repetitions, rr.LastOverFirst = repetitions(r.Metric, r.Reps)
		for _, n := range names {
			if s := r.Samples[n]; len(s) > 0 {
				rr.Median[n] = median(s)
			}
		}
		for _, c := range rep.RatioCols {
			a, okA := rr.Median[c.Target]
			base, okB := rr.Median[c.Base]
			if okA && okB {
				if v := speedRatio(r.Metric, a, base); !math.IsNaN(v) {
					rr.Ratios[c.Target+"/"+c.Base] = v
				}
			}
		}
		rep.Rows = append(rep.Rows, rr)
	}
	rep.Derived = computeDerived(derivedDefs(b.cfg.workers), rep.Rows, names)
	rep.Checks = designChecks(rep.Rows, rep.Derived)
	rssCheck := check{Target: "daemon RSS < 200MiB with 1M inodes", Result: "n/a",
		Detail: "not measured by this run (the opt-in workload rss)"}
	if v, ok := rss["shedfs"]; ok {
		rssCheck.Detail += fmt.Sprintf("; peak RSS of shedfs in this run: %s", humanBytes(v))
	}
	if r := b.rss.rep; r != nil {
		rep.RSS = r
		if c, ok := r.check(); ok {
			rssCheck = c
		}
	}
	rep.Checks = append(rep.Checks, rssCheck)
	if v := b.views.rep; v != nil {
		rep.Views = v
		rep.Checks = append(rep.Checks, v.checks()...)
	}
	return rep
}

// r2s shortens a metric name to its leading words for check details.
func r2s(name string) string {
	if i := strings.Index(name, " ("); i > 0 {
		return name[:i]
	}
	return name
}

// formatValue prints a number with a precision that suits its unit.
func formatValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case unit == "s":
		return fmt.Sprintf("%.2f", v)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// print writes the human-readable report.
func (rep *report) print(w io.Writer) {
	m := rep.Machine
	fmt.Fprintf(w, "\nshedfs-bench  %s\n", m.Date)
	fmt.Fprintf(w, "machine: %s, nproc %d, %s, mem %s, kernel %s, %s\n", m.Hostname, m.NumCPU, m.CPU, m.MemTotal, m.Kernel, m.GoVersion)
	fmt.Fprintf(w, "load average: %s at start, %s at end (other load moves every number; compare ratios within one run)\n", m.LoadStart, m.LoadEnd)
	m.printWorkFS(w) // workfs.go
	if m.ShedfsInfo != "" {
		fmt.Fprintf(w, "shedfs: %s\n", m.ShedfsInfo)
	}
	quick := ""
	if rep.Config.Quick {
		quick = " (-quick smoke run: small sizes, not for comparing)"
	}
	if len(rep.Rows) > 0 {
		rep.printTable(w, quick)
		rep.printRepetitions(w) // reps.go
	}
	if len(rep.Derived) > 0 {
		rep.printDerived(w)
	}
	if rep.RSS != nil {
		rep.RSS.print(w)
	}
	if rep.Views != nil {
		rep.Views.print(w)
	}
	fmt.Fprintf(w, "\ndocs/design.md \"Performance\" / issue 9 targets (%s):\n", tally(rep.Checks))
	for _, c := range rep.Checks {
		fmt.Fprintf(w, "  %-4s  %s: %s\n", c.Result, c.Target, c.Detail)
	}
}

// printDerived writes the ratios between rows of one target.
func (rep *report) printDerived(w io.Writer) {
	fmt.Fprintf(w, "\nratios within each target (of the medians above):\n\n")
	table := [][]string{append([]string{"ratio", "goal"}, rep.Targets...)}
	for _, d := range rep.Derived {
		g := "-"
		if d.Goal != nil {
			g = d.Goal.Of + " " + d.Goal.bound()
		}
		cells := []string{d.Name, g}
		for _, t := range rep.Targets {
			if v, ok := d.Values[t]; ok {
				cells = append(cells, fmt.Sprintf("%.2f", v))
			} else {
				cells = append(cells, "-")
			}
		}
		table = append(table, cells)
	}
	writeTable(w, table)
}

// printTable writes the per-target workloads' medians and ratios.
func (rep *report) printTable(w io.Writer, quick string) {
	fmt.Fprintf(w, "medians of %d run(s)%s; caches dropped before every timed phase of smallfiles and untar and where a workload asks (cold seq read, random reads, dirscale lookup and readdir): %s\n", rep.Config.Reps, quick, rep.CacheDrop)
	fmt.Fprintf(w, "ratios are speed ratios: >1.00 means the first is faster (for durations, base/target)\n\n")

	header := []string{"workload", "unit"}
	header = append(header, rep.Targets...)
	for _, c := range rep.RatioCols {
		header = append(header, c.Target+"/"+c.Base)
	}
	header = append(header, "goal")
	table := [][]string{header}
	for _, r := range rep.Rows {
		cells := []string{r.Name, r.Unit}
		for _, t := range rep.Targets {
			if v, ok := r.Median[t]; ok {
				cells = append(cells, formatValue(v, r.Unit))
			} else {
				cells = append(cells, "-")
			}
		}
		for _, c := range rep.RatioCols {
			if v, ok := r.Ratios[c.Target+"/"+c.Base]; ok {
				cells = append(cells, fmt.Sprintf("%.2f", v))
			} else {
				cells = append(cells, "-")
			}
		}
		if r.Goal != nil {
			cells = append(cells, r.Goal.Of+" "+r.Goal.bound())
		} else {
			cells = append(cells, "-")
		}
		table = append(table, cells)
	}
	writeTable(w, table)

	var skipped []string
	for _, r := range rep.Rows {
		if r.Skipped != "" && !containsString(skipped, r.Skipped) {
			skipped = append(skipped, r.Skipped)
		}
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}

	if len(rep.PeakRSS) > 0 {
		var parts []string
		for _, t := range rep.Targets {
			if v, ok := rep.PeakRSS[t]; ok {
				parts = append(parts, fmt.Sprintf("%s %s", t, humanBytes(v)))
			}
		}
		fmt.Fprintf(w, "\npeak RSS of FUSE servers: %s\n", strings.Join(parts, ", "))
	}
}

// writeJSON writes the report, samples included, to path.
func (rep *report) writeJSON(path string) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeTable prints rows as a Markdown table: the first column left-aligned,
// the others right-aligned, padded to line up in a terminal too.
func writeTable(w io.Writer, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var sb strings.Builder
		sb.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				sb.WriteString(" " + c + pad + " |")
			} else {
				sb.WriteString(" " + pad + c + " |")
			}
		}
		fmt.Fprintln(w, sb.String())
	}
	line(rows[0])
	sep := make([]string, len(widths))
	for i, n := range widths {
		if i == 0 {
			sep[i] = strings.Repeat("-", n)
		} else {
			sep[i] = strings.Repeat("-", n-1) + ":"
		}
	}
	fmt.Fprintln(w, "|"+strings.Join(func() []string {
		out := make([]string, len(sep))
		for i, s := range sep {
			out[i] = " " + s + " "
		}
		return out
	}(), "|")+"|")
	for _, r := range rows[1:] {
		line(r)
	}
}
