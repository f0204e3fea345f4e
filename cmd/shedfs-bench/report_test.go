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
	rows := []reportRow{
		{metric: metric{Name: "create", Class: classMetadata}, Ratios: map[string]float64{"shedfs/loopback": 1.2}},
		{metric: metric{Name: "stat (x)", Class: classMetadata}, Ratios: map[string]float64{"shedfs/loopback": 0.8}},
		{metric: metric{Name: "seq read", Class: classSeqRead}, Ratios: map[string]float64{"shedfs/native": 0.95}},
	}
	checks := designChecks(rows, map[string]int64{"shedfs": 50 << 20})
	want := []string{"MISS", "PASS", "n/a", "n/a"}
	for i, c := range checks {
		if c.Result != want[i] {
			t.Errorf("check %d (%s) = %s, want %s (%s)", i, c.Target, c.Result, want[i], c.Detail)
		}
	}
	if !strings.Contains(checks[0].Detail, `"stat"`) {
		t.Errorf("metadata check should name the worst row: %s", checks[0].Detail)
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
