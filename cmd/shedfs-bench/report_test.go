package main

import (
	"math"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	cases := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, c := range cases {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Errorf("median(nil) is not NaN")
	}
}

func TestSpeedRatio(t *testing.T) {
	rate := metric{HigherIsBetter: true}
	dur := metric{}
	if got := speedRatio(rate, 50, 100); got != 0.5 {
		t.Errorf("rate ratio = %v, want 0.5", got)
	}
	// Twice the seconds is half the speed.
	if got := speedRatio(dur, 2, 1); got != 0.5 {
		t.Errorf("duration ratio = %v, want 0.5", got)
	}
	if !math.IsNaN(speedRatio(dur, 0, 1)) {
		t.Errorf("zero duration must give NaN")
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{"4096": 4096, "64MiB": 64 << 20, "1GiB": 1 << 30, "500M": 500 << 20, "2g": 2 << 30, "1 GiB": 1 << 30}
	for in, want := range good {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "1.5GiB", "-1", "12parsecs", "1GiBx"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/var/tmp/a\040b`); got != "/var/tmp/a b" {
		t.Errorf("got %q", got)
	}
	if got := unescapeMountinfo(`/plain`); got != "/plain" {
		t.Errorf("got %q", got)
	}
}

func TestDesignChecks(t *testing.T) {
	lb := &goal{Of: "shedfs/loopback", Min: 1.5}
	rows := []reportRow{
		{metric: metric{ID: "create@1", Name: "create (x)", Goal: lb}, Ratios: map[string]float64{"shedfs/loopback": 1.6}},
		{metric: metric{ID: "stat@1", Name: "stat", Goal: lb}, Ratios: map[string]float64{"shedfs/loopback": 0.8}},
		{metric: metric{ID: "seq-read", Name: "seq read", Goal: &goal{Of: "shedfs/native", Min: 0.95}}, Ratios: map[string]float64{}},
		{metric: metric{ID: "npm", Name: "npm", Goal: &goal{Of: "shedfs/loopback", Min: 1.2}}, Skipped: "npm is not installed"},
		{metric: metric{ID: "dir-create-small", Name: "no goal"}, Ratios: map[string]float64{"shedfs/loopback": 9}},
	}
	derived := []derivedRow{
		{derivedDef: derivedDef{Name: "create scaling", Goal: &goal{Of: "shedfs", Min: 1.5}}, Values: map[string]float64{"shedfs": 1.2}},
		{derivedDef: derivedDef{Name: "dir growth", Goal: &goal{Of: "shedfs", Max: 1.5}}, Values: map[string]float64{"shedfs": 1.2}},
		{derivedDef: derivedDef{Name: "unjudged"}, Values: map[string]float64{"shedfs": 100}},
	}
	checks := designChecks(rows, derived)
	want := []string{"PASS", "MISS", "n/a", "n/a", "MISS", "PASS"}
	if len(checks) != len(want) {
		t.Fatalf("got %d checks, want %d: %+v", len(checks), len(want), checks)
	}
	for i, c := range checks {
		if c.Result != want[i] {
			t.Errorf("check %d (%s) = %s, want %s (%s)", i, c.Target, c.Result, want[i], c.Detail)
		}
	}
	if !strings.Contains(checks[0].Target, "create: shedfs/loopback ≥ 1.50") {
		t.Errorf("check names the row and its bound: %q", checks[0].Target)
	}
	if !strings.Contains(checks[3].Detail, "npm is not installed") {
		t.Errorf("a skipped row's check says why: %q", checks[3].Detail)
	}
	if got := tally(checks); got != "2 PASS, 2 MISS, 2 n/a" {
		t.Errorf("tally = %q", got)
	}
}

func TestGoal(t *testing.T) {
	for _, c := range []struct {
		g    goal
		v    float64
		want bool
	}{
		{goal{Min: 1.5}, 1.5, true},
		{goal{Min: 1.5}, 1.49, false},
		{goal{Max: 1.5}, 1.5, true},
		{goal{Max: 1.5}, 1.51, false},
		{goal{Min: 1}, math.NaN(), false},
	} {
		if got := c.g.met(c.v); got != c.want {
			t.Errorf("%+v.met(%v) = %v, want %v", c.g, c.v, got, c.want)
		}
	}
	if got := (goal{Max: 1.5}).bound(); got != "≤ 1.50" {
		t.Errorf("bound = %q", got)
	}
}

func TestComputeDerived(t *testing.T) {
	rows := []reportRow{
		{metric: metric{ID: "create@1"}, Median: map[string]float64{"loopback": 1000, "shedfs": 2000}},
		{metric: metric{ID: "create@N"}, Median: map[string]float64{"loopback": 3000, "shedfs": 2000, "native": 5}},
		{metric: metric{ID: "dir-create-small"}, Median: map[string]float64{"shedfs": 10}},
	}
	got := computeDerived(derivedDefs(4), rows, []string{"native", "loopback", "shedfs"})
	if len(got) != 1 || got[0].ID != "create-scaling" {
		t.Fatalf("want only create scaling (the other rows are missing), got %+v", got)
	}
	if v := got[0].Values; v["loopback"] != 3 || v["shedfs"] != 1 || len(v) != 2 {
		t.Errorf("values = %v, want loopback 3, shedfs 1 and no native (no 1-worker median)", v)
	}
	if !strings.Contains(got[0].Name, "4 workers") {
		t.Errorf("name = %q", got[0].Name)
	}
}

func TestDerivedDefsNameKnownMetrics(t *testing.T) {
	b := &bench{cfg: &config{files: 10, fileSize: 4096, workers: 4, dirSmall: 10, dirLarge: 100}}
	ids := map[string]bool{}
	for _, m := range append(smallFilesMetrics(b), dirScaleMetrics(b)...) {
		if ids[m.ID] {
			t.Errorf("duplicate metric ID %s", m.ID)
		}
		ids[m.ID] = true
	}
	for _, d := range derivedDefs(4) {
		if !ids[d.Num] || !ids[d.Den] {
			t.Errorf("derived %s refers to unknown metrics %s, %s", d.ID, d.Num, d.Den)
		}
	}
}

func TestTargetsCompareKnownNames(t *testing.T) {
	names := targetNames(allTargets())
	for _, tg := range allTargets() {
		for _, c := range tg.Compare {
			if !containsString(names, c) {
				t.Errorf("target %s compares to unknown target %s", tg.Name, c)
			}
		}
	}
}

func TestWriteTable(t *testing.T) {
	var sb strings.Builder
	writeTable(&sb, [][]string{{"workload", "x"}, {"create", "12"}})
	want := "| workload |  x |\n| -------- | -: |\n| create   | 12 |\n"
	if sb.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", sb.String(), want)
	}
}
