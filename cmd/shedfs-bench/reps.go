package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Each target keeps one mount (one daemon, one store) across all
// repetitions, so a cost that grows with what the store has seen (badger's
// compactions, the GC against the memory limit, a filesystem's recently
// deleted inodes) makes its later repetitions slower than its first; the
// median hides that. The report therefore also prints every repetition,
// with the speed of the last relative to the first.

// repetitions turns one row's per-repetition values (NaN: not measured)
// into the report's form: null for NaN, targets that measured nothing left
// out, and the speed ratio of the last measured repetition to the first
// (>1 faster, <1 slower, as every ratio of the report).
func repetitions(m metric, reps map[string][]float64) (map[string][]*float64, map[string]float64) {
	out := map[string][]*float64{}
	trend := map[string]float64{}
	for t, vs := range reps {
		var cells []*float64
		first, last := math.NaN(), math.NaN()
		measured := 0
		for _, v := range vs {
			if math.IsNaN(v) {
				cells = append(cells, nil)
				continue
			}
			cells = append(cells, &v)
			if measured == 0 {
				first = v
			}
			last = v
			measured++
		}
		if measured == 0 {
			continue
		}
		out[t] = cells
		if measured > 1 {
			if r := speedRatio(m, last, first); !math.IsNaN(r) {
				trend[t] = r
			}
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	if len(trend) == 0 {
		trend = nil
	}
	return out, trend
}

// printRepetitions writes, for a run of more than one repetition, one
// table per workload: a row per metric, a column per target, each cell
// the repetitions' values in order and the last one's speed over the
// first's.
func (rep *report) printRepetitions(w io.Writer) {
	if rep.Config.Reps < 2 {
		return
	}
	var order []string
	byWorkload := map[string][]reportRow{}
	for _, r := range rep.Rows {
		if len(r.Repetitions) == 0 {
			continue
		}
		if _, ok := byWorkload[r.Workload]; !ok {
			order = append(order, r.Workload)
		}
		byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
	}
	if len(order) == 0 {
		return
	}
	fmt.Fprintf(w, "\nevery repetition, in order (each target keeps one mount across them, so what grows shows here and not in the medians); ×: the last one's speed over the first's, <1 slower:\n")
	for _, wl := range order {
		fmt.Fprintln(w)
		table := [][]string{append([]string{wl, "unit"}, rep.Targets...)}
		for _, r := range byWorkload[wl] {
			cells := []string{r.Name, r.Unit}
			for _, t := range rep.Targets {
				cells = append(cells, repCell(r, t))
			}
			table = append(table, cells)
		}
		writeTable(w, table)
	}
}

// repCell is one target's repetitions of a row: "1053 978 719 ×0.68", "-"
// for a repetition not measured, "-" alone for a target that measured none.
func repCell(r reportRow, target string) string {
	vs, ok := r.Repetitions[target]
	if !ok {
		return "-"
	}
	parts := make([]string, 0, len(vs)+1)
	for _, v := range vs {
		if v == nil {
			parts = append(parts, "-")
		} else {
			parts = append(parts, formatValue(*v, r.Unit))
		}
	}
	if x, ok := r.LastOverFirst[target]; ok {
		parts = append(parts, fmt.Sprintf("×%.2f", x))
	}
	return strings.Join(parts, " ")
}
