package main

// The performance targets of docs/design.md, "Performance" (issue 9), and their
// evaluation: a goal on a row's ratio column ("shedfs/loopback" at least
// 1.5), ratios between two rows of one target (create with 4 workers over
// create with 1, cost per entry in a 100,000-entry directory over a
// 1,000-entry one), and the PASS/MISS verdicts printed at the end of a run.
// Everything here is pure: it works on medians already computed.

import (
	"fmt"
	"math"
)

// goal is one target on one number: a speed ratio column of a row (Of is
// "shedfs/loopback"), or a derived ratio in one target's column (Of is
// "shedfs"). Zero Min or Max means no bound on that side.
type goal struct {
	Of  string  `json:"of"`
	Min float64 `json:"min,omitempty"`
	Max float64 `json:"max,omitempty"`
}

// met reports whether v meets the goal.
func (g goal) met(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	if g.Min > 0 && v < g.Min {
		return false
	}
	if g.Max > 0 && v > g.Max {
		return false
	}
	return true
}

// bound is the goal's condition as text: "≥ 1.50", "≤ 1.50".
func (g goal) bound() string {
	switch {
	case g.Min > 0 && g.Max > 0:
		return fmt.Sprintf("in [%.2f, %.2f]", g.Min, g.Max)
	case g.Max > 0:
		return fmt.Sprintf("≤ %.2f", g.Max)
	default:
		return fmt.Sprintf("≥ %.2f", g.Min)
	}
}

// derivedDef is a ratio of two rows within one target: Num's median over
// Den's median, in every target column that has both.
type derivedDef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Num  string `json:"num"` // metric ID
	Den  string `json:"den"` // metric ID
	Goal *goal  `json:"goal,omitempty"`
}

// derivedRow is a derivedDef with its values per target.
type derivedRow struct {
	derivedDef
	Values map[string]float64 `json:"values"`
}

// derivedDefs lists the ratios between rows the report prints: how small
// files scale from 1 to `workers` workers (rates: above 1 is faster), and
// how the cost per entry grows from a small to a large directory (costs:
// 1 is flat, above 1 is slower).
func derivedDefs(workers int) []derivedDef {
	var out []derivedDef
	for _, p := range smallFilePhases {
		d := derivedDef{ID: p + "-scaling", Name: fmt.Sprintf("%s scaling: files/s with %s / with 1", p, workersLabel(workers)),
			Num: smallFilesID(p, workers), Den: smallFilesID(p, 1)}
		if p == "create" {
			d.Goal = &goal{Of: "shedfs", Min: 1.5}
		}
		out = append(out, d)
	}
	for _, op := range dirOps {
		d := derivedDef{ID: "dir-" + op + "-growth", Name: fmt.Sprintf("%s cost per entry: large dir / small dir", op),
			Num: dirID(op, "large"), Den: dirID(op, "small")}
		if op != "delete" {
			d.Goal = &goal{Of: "shedfs", Max: 1.5}
		}
		out = append(out, d)
	}
	return out
}

// computeDerived evaluates defs on the medians of rows, for each target.
// A def whose rows are not both present is left out.
func computeDerived(defs []derivedDef, rows []reportRow, targets []string) []derivedRow {
	byID := map[string]reportRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	var out []derivedRow
	for _, d := range defs {
		num, okN := byID[d.Num]
		den, okD := byID[d.Den]
		if !okN || !okD {
			continue
		}
		dr := derivedRow{derivedDef: d, Values: map[string]float64{}}
		for _, t := range targets {
			a, okA := num.Median[t]
			b, okB := den.Median[t]
			if okA && okB && b > 0 {
				dr.Values[t] = a / b
			}
		}
		out = append(out, dr)
	}
	return out
}

// designChecks evaluates every goal on the rows and the derived ratios of
// a run, in row order, then derived order.
func designChecks(rows []reportRow, derived []derivedRow) []check {
	var out []check
	for _, r := range rows {
		if r.Goal == nil {
			continue
		}
		g := *r.Goal
		c := check{Target: fmt.Sprintf("%s: %s %s", r2s(r.Name), g.Of, g.bound()), Result: "n/a"}
		v, ok := r.Ratios[g.Of]
		switch {
		case ok:
			c.Value = v
			c.Result = verdict(g.met(v))
			c.Detail = fmt.Sprintf("%s = %.2f", g.Of, v)
		case r.Skipped != "":
			c.Detail = "skipped: " + r.Skipped
		default:
			c.Detail = fmt.Sprintf("not measured (needs both targets of %s)", g.Of)
		}
		out = append(out, c)
	}
	for _, d := range derived {
		if d.Goal == nil {
			continue
		}
		g := *d.Goal
		c := check{Target: fmt.Sprintf("%s, %s %s", d.Name, g.Of, g.bound()), Result: "n/a",
			Detail: fmt.Sprintf("not measured (needs target %s)", g.Of)}
		if v, ok := d.Values[g.Of]; ok {
			c.Value = v
			c.Result = verdict(g.met(v))
			c.Detail = fmt.Sprintf("%.2f", v)
		}
		out = append(out, c)
	}
	return out
}

// verdict names a boolean outcome.
func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// tally counts the results of checks: "12 PASS, 3 MISS, 2 n/a".
func tally(checks []check) string {
	var pass, miss, na int
	for _, c := range checks {
		switch c.Result {
		case "PASS":
			pass++
		case "MISS":
			miss++
		default:
			na++
		}
	}
	return fmt.Sprintf("%d PASS, %d MISS, %d n/a", pass, miss, na)
}
