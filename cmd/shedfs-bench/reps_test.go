package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repsBench is a finished run of three repetitions in which shedfs slows
// down from one repetition to the next, as it did on the machine.
func repsBench() (*bench, []target, []*row) {
	b := &bench{cfg: &config{reps: 3, workers: 4, files: 10000, fileSize: 4096, targets: []string{"loopback", "shedfs"}},
		work: "/mnt/benchfs/shedfs-bench-1", skips: map[string]string{}}
	nan := math.NaN()
	rows := []*row{
		{Metric: metric{ID: "create@1", Name: "create 10000×4.0 KiB files, 1 worker", Unit: "files/s", HigherIsBetter: true,
			Goal: &goal{Of: "shedfs/loopback", Min: 1.5}}, Workload: "smallfiles",
			Reps: map[string][]float64{"loopback": {2387, 2401, 2290}, "shedfs": {1053, 978, 719}}},
		{Metric: metric{ID: "untar", Name: "untar $GOROOT/src", Unit: "s", Goal: &goal{Of: "shedfs/loopback", Min: 1.5}}, Workload: "untar",
			Reps: map[string][]float64{"loopback": {8.1, 8.4, 8.0}, "shedfs": {12, 19.5, 24}}},
		{Metric: metric{ID: "cpu-untar", Name: "daemon CPU for the untar (utime+stime)", Unit: "s", Goal: &goal{Of: "shedfs/loopback", Min: 1}},
			Workload: "untar", Reps: map[string][]float64{"loopback": {6.6, 8.2, 7.7}, "shedfs": {10.9, nan, 34.2}, "native": {nan, nan, nan}}},
	}
	// Samples are what the run loop keeps: the measured values only.
	for _, r := range rows {
		r.Samples = map[string][]float64{}
		for t, vs := range r.Reps {
			for _, v := range vs {
				if !math.IsNaN(v) {
					r.Samples[t] = append(r.Samples[t], v)
				}
			}
		}
	}
	targets := selectTargets([]string{"loopback", "shedfs"})
	return b, targets, rows
}

func TestRepetitions(t *testing.T) {
	rate := metric{HigherIsBetter: true}
	reps, trend := repetitions(rate, map[string][]float64{"shedfs": {1000, 900, 500}, "native": {math.NaN(), math.NaN()}, "one": {math.NaN(), 7}})
	if _, ok := reps["native"]; ok {
		t.Errorf("a target that measured nothing is listed: %v", reps["native"])
	}
	if got := reps["shedfs"]; len(got) != 3 || *got[0] != 1000 || *got[2] != 500 {
		t.Errorf("shedfs repetitions = %v", got)
	}
	if got := reps["one"]; len(got) != 2 || got[0] != nil || *got[1] != 7 {
		t.Errorf("a repetition not measured must stay in its place as null: %v", got)
	}
	if trend["shedfs"] != 0.5 {
		t.Errorf("last over first of a rate = %v, want 0.5", trend["shedfs"])
	}
	if _, ok := trend["one"]; ok {
		t.Errorf("one measured repetition has no trend: %v", trend)
	}
	// A duration that doubles is half the speed.
	_, trend = repetitions(metric{}, map[string][]float64{"shedfs": {10, 20}})
	if trend["shedfs"] != 0.5 {
		t.Errorf("last over first of a duration = %v, want 0.5", trend["shedfs"])
	}
	if reps, trend := repetitions(rate, map[string][]float64{"native": {math.NaN()}}); reps != nil || trend != nil {
		t.Errorf("nothing measured: %v, %v", reps, trend)
	}
}

func TestPrintRepetitions(t *testing.T) {
	b, targets, rows := repsBench()
	rep := buildReport(b, targets, rows, nil)
	var sb strings.Builder
	rep.print(&sb)
	out := sb.String()
	for _, want := range []string{
		"every repetition, in order",
		"| smallfiles ",
		"| create 10000×4.0 KiB files, 1 worker | files/s | 2387 2401 2290 ×0.96 | 1053 978 719 ×0.68 |",
		"| untar ",
		"| untar $GOROOT/src                      |    s | 8.10 8.40 8.00 ×1.01 | 12.00 19.50 24.00 ×0.50 |",
		"| daemon CPU for the untar (utime+stime) |    s | 6.60 8.20 7.70 ×0.86 |     10.90 - 34.20 ×0.32 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The medians, ratios and verdicts are those of before.
	for _, want := range []string{"| create 10000×4.0 KiB files, 1 worker   | files/s |     2387 |    978 |            0.41 |", "MISS  create 10000×4.0 KiB files, 1 worker: shedfs/loopback ≥ 1.50: shedfs/loopback = 0.41"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "every repetition"), strings.Index(out, "medians of 3 run(s)"); i < j {
		t.Errorf("the repetitions come after the medians")
	}

	// One repetition: nothing more to show than the medians.
	b.cfg.reps = 1
	sb.Reset()
	buildReport(b, targets, rows, nil).print(&sb)
	if strings.Contains(sb.String(), "every repetition") {
		t.Errorf("repetitions printed for a run of one:\n%s", sb.String())
	}
}

func TestReportJSONRepetitions(t *testing.T) {
	b, targets, rows := repsBench()
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := buildReport(b, targets, rows, nil).writeJSON(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Rows []struct {
			ID            string                `json:"id"`
			Workload      string                `json:"workload"`
			Samples       map[string][]float64  `json:"samples"`
			Repetitions   map[string][]*float64 `json:"repetitions"`
			LastOverFirst map[string]float64    `json:"last_over_first"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 3 {
		t.Fatalf("%d rows", len(got.Rows))
	}
	cpu := got.Rows[2]
	if cpu.ID != "cpu-untar" || cpu.Workload != "untar" {
		t.Errorf("row %+v", cpu)
	}
	if s := cpu.Repetitions["shedfs"]; len(s) != 3 || *s[0] != 10.9 || s[1] != nil || *s[2] != 34.2 {
		t.Errorf("shedfs's repetitions of the daemon CPU = %v, want 10.9, null, 34.2", s)
	}
	if _, ok := cpu.Repetitions["native"]; ok {
		t.Errorf("native measured no CPU, yet has repetitions")
	}
	if len(cpu.Samples["shedfs"]) != 2 {
		t.Errorf("samples keep only the measured values: %v", cpu.Samples)
	}
	if v := got.Rows[0].LastOverFirst["shedfs"]; math.Abs(v-719.0/1053) > 1e-9 {
		t.Errorf("last_over_first = %v", v)
	}
}
