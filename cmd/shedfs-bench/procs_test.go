package main

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestParseProcStatCPU(t *testing.T) {
	// proc(5): pid (comm) state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime ...; comm may hold ") (".
	stat := "4242 (shedfs ) (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 1000 0 0\n"
	got, err := parseProcStatCPU(stat)
	if err != nil || got != 325 {
		t.Errorf("parseProcStatCPU = %d, %v; want 325", got, err)
	}
	for _, bad := range []string{"", "4242 shedfs S 1", "4242 (shedfs) S 1 2 3", "1 (a) S 1 1 1 0 -1 0 0 0 0 0 x 1 0"} {
		if _, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("parseProcStatCPU(%q) succeeded", bad)
		}
	}
}

func TestParseThreads(t *testing.T) {
	n, err := parseThreads("Name:\tshedfs\nThreads:\t2870\nVmRSS:\t1 kB\n")
	if err != nil || n != 2870 {
		t.Errorf("parseThreads = %d, %v", n, err)
	}
	if _, err := parseThreads("Name:\tx\n"); err == nil {
		t.Error("no Threads line accepted")
	}
}

func TestParseFUSEMountsUnder(t *testing.T) {
	info := "22 1 0:21 / /proc rw - proc proc rw\n" +
		"50 22 0:50 / /var/tmp/w/views-mnt/u00000 rw - fuse.shedfs shedfs:u00000 rw\n" +
		"51 22 0:51 / /var/tmp/w/views-mnt/u00001/deep rw shared:1 - fuse shedfs rw\n" +
		"52 22 0:52 / /var/tmp/w/views-mnt rw - tmpfs tmpfs rw\n" +
		"53 22 0:53 / /var/tmp/w/views-mnt2/u0 rw - fuse.shedfs s rw\n" +
		"54 22 0:54 / /var/tmp/w/views-mnt/a\\040b rw - fuse.x s rw\n"
	got := parseFUSEMountsUnder(info, "/var/tmp/w/views-mnt/")
	want := []string{"/var/tmp/w/views-mnt/u00001/deep", "/var/tmp/w/views-mnt/u00000", "/var/tmp/w/views-mnt/a b"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q (deepest first, only strictly below, only FUSE)", got, want)
	}
}

func TestSplitWork(t *testing.T) {
	for _, w := range []int{1, 3, 4, 7} {
		var mu sync.Mutex
		seen := make([]int, 10)
		err := splitWork(10, w, func(lo, hi int) error {
			mu.Lock()
			defer mu.Unlock()
			for i := lo; i < hi; i++ {
				seen[i]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("w=%d: index %d done %d times", w, i, n)
			}
		}
	}
	boom := errors.New("boom")
	if err := splitWork(8, 4, func(lo, _ int) error {
		if lo == 4 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("error of one worker lost: %v", err)
	}
}

func TestViewsChecks(t *testing.T) {
	one := &viewsDaemon{Views: 1, MountSeconds: 0.1, Samples: map[string][]float64{"private create": {1, 1, 1}}}
	many := &viewsDaemon{Views: 1000, MountSeconds: 4, Mounted: procMem{RSS: 150 << 20}, Threads: 40,
		Samples: map[string][]float64{"private create": {0.9, 1.5, 1.0}, "share create": {2.5, 2.5, 2.5}, "share write": {1.9}}}
	r := &viewsReport{Users: 1000, One: one, Many: many}
	want := []string{"PASS", "PASS", "MISS", "PASS", "PASS"}
	got := r.checks()
	for i, c := range got {
		if c.Result != want[i] {
			t.Errorf("check %d (%s) = %s, want %s (%s)", i, c.Target, c.Result, want[i], c.Detail)
		}
	}

	// Fewer views than the target is about: shown, not judged.
	r.Users, many.Views = 50, 50
	for _, c := range r.checks() {
		if c.Result != "n/a" {
			t.Errorf("%s judged with 50 views: %s", c.Target, c.Result)
		}
	}

	skipped := (&viewsReport{Users: 1000, Skipped: "needs target shedfs"}).checks()
	if len(skipped) != 5 || skipped[0].Result != "n/a" || skipped[0].Detail != "skipped: needs target shedfs" {
		t.Errorf("skipped checks: %+v", skipped)
	}
}

func TestLastLine(t *testing.T) {
	if got := lastLine("npm error code ENOTFOUND\nnpm error network down\n\n"); got != "npm error network down" {
		t.Errorf("lastLine = %q", got)
	}
}
