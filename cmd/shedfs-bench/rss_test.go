package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestParseProcStatus(t *testing.T) {
	status := "Name:\tshedfs\nVmPeak:\t 1500000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n" +
		"RssAnon:\t   81920 kB\nRssFile:\t   20480 kB\nRssShmem:\t       0 kB\nThreads:\t12\n"
	got, err := parseProcStatus(status)
	if err != nil {
		t.Fatal(err)
	}
	want := procMem{RSS: 100 << 20, HWM: 200 << 20, RSSAnon: 80 << 20, RSSFile: 20 << 20}
	if got != want {
		t.Errorf("parseProcStatus = %+v, want %+v", got, want)
	}

	for _, bad := range []string{
		"",                               // exited process
		"Name:\tkthreadd\nThreads:\t1\n", // kernel thread: no Vm lines
		"VmRSS:\t 12x kB\nVmHWM:\t 1 kB\n",
		"VmRSS:\t 12 MB\nVmHWM:\t 1 kB\n",
	} {
		if _, err := parseProcStatus(bad); err == nil {
			t.Errorf("parseProcStatus(%q) succeeded, want an error", bad)
		}
	}
}

func TestRSSShape(t *testing.T) {
	for _, tc := range []struct {
		n, dirs, last int
	}{
		{1, 1, 1},
		{999, 1, 999},
		{1000, 1, 1000},
		{1001, 2, 1},
		{1000000, 1000, 1000},
		{200500, 201, 500},
	} {
		dirs := rssShape(tc.n)
		if dirs != tc.dirs {
			t.Errorf("rssShape(%d) = %d, want %d", tc.n, dirs, tc.dirs)
			continue
		}
		total := 0
		for d := range dirs {
			total += rssFilesIn(tc.n, d)
		}
		if total != tc.n {
			t.Errorf("n=%d: directories hold %d files", tc.n, total)
		}
		if last := rssFilesIn(tc.n, dirs-1); last != tc.last {
			t.Errorf("n=%d: last directory holds %d, want %d", tc.n, last, tc.last)
		}
	}
	if rssDirName(7) >= rssDirName(10) || rssFileName(7) >= rssFileName(999) {
		t.Error("names do not sort in creation order")
	}
}

func rssTestRun(target string, mounted, stat, hwm, walk int64) rssRun {
	return rssRun{Target: target, Phases: []rssPhase{
		{Phase: rssPhases[0], Mem: procMem{RSS: mounted, HWM: mounted}},
		{Phase: rssPhases[1], Mem: procMem{RSS: stat, HWM: hwm}, Inodes: 100000, Seconds: 5},
		{Phase: rssPhases[2], Mem: procMem{RSS: walk, HWM: walk}, Inodes: 1001005, Seconds: 50},
		{Phase: rssPhases[3], Mem: procMem{RSS: mounted, HWM: walk}},
	}}
}

func TestRSSVerdict(t *testing.T) {
	pass := rssVerdict(rssTestRun("shedfs", 20<<20, 150<<20, 160<<20, 900<<20))
	if pass.Result != "PASS" || !strings.Contains(pass.Detail, "not judged") {
		t.Errorf("under the limit with a big walk: %+v, want PASS with the walk reported", pass)
	}
	// The peak counts, not just the reading after the phase.
	if c := rssVerdict(rssTestRun("shedfs", 20<<20, 150<<20, 250<<20, 300<<20)); c.Result != "MISS" {
		t.Errorf("peak over the limit: %+v, want MISS", c)
	}
	if c := rssVerdict(rssRun{Target: "shedfs", Phases: []rssPhase{{Phase: rssPhases[0]}}}); c.Result != "n/a" {
		t.Errorf("stopped after mounting: %+v, want n/a", c)
	}

	// The design target is about 1M inodes: a smaller store is not judged.
	small := &rssReport{Files: 200000, Dirs: 200, Runs: []rssRun{rssTestRun("shedfs", 20<<20, 50<<20, 50<<20, 90<<20)}}
	if c, ok := small.check(); !ok || c.Result != "n/a" || !strings.Contains(c.Detail, "only 200200 inodes") {
		t.Errorf("small store: %+v, %v", c, ok)
	}
	big := &rssReport{Files: 1000000, Dirs: 1000, Runs: []rssRun{
		rssTestRun("loopback", 20<<20, 500<<20, 500<<20, 900<<20),
		rssTestRun("shedfs", 20<<20, 50<<20, 50<<20, 90<<20),
	}}
	if c, ok := big.check(); !ok || c.Result != "PASS" || !strings.HasPrefix(c.Detail, "shedfs:") {
		t.Errorf("1M store: %+v, %v (the loopback is never judged)", c, ok)
	}
	if _, ok := (&rssReport{}).check(); ok {
		t.Error("no runs: check reported")
	}

	var out bytes.Buffer
	big.print(&out)
	for _, want := range []string{"| stat 100 dirs |", "VmRSS fell: 900MiB -> 20MiB", "PASS  shedfs:", "20000 inodes/s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("print output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSlicesWithoutFlag(t *testing.T) {
	got := slicesWithoutFlag([]string{"mount", "--metrics", "127.0.0.1:0", "--no-audit", "mnt"}, "--metrics")
	if want := []string{"mount", "--no-audit", "mnt"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParallelDirs(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	if err := parallelDirs(context.Background(), 57, func(d int) error {
		mu.Lock()
		seen[d]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 57 {
		t.Errorf("visited %d directories, want 57", len(seen))
	}
	for d, n := range seen {
		if n != 1 || d < 0 || d >= 57 {
			t.Errorf("directory %d visited %d times", d, n)
		}
	}

	boom := errors.New("boom")
	if err := parallelDirs(context.Background(), 1000, func(d int) error {
		if d == 3 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := parallelDirs(ctx, 10, func(int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestRSSIsOptIn(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if containsString(cfg.workloads, "rss") {
		t.Errorf("default workloads %q include rss", cfg.workloads)
	}
	if cfg.rssInodes != 1000000 {
		t.Errorf("-rss-inodes defaults to %d", cfg.rssInodes)
	}
	cfg, err = parseFlags([]string{"-workloads", "rss,smallfiles", "-rss-inodes", "5000"})
	if err != nil {
		t.Fatal(err)
	}
	per, standalone := splitWorkloads(selectWorkloads(cfg.workloads))
	if len(per) != 1 || per[0].Name != "smallfiles" || len(standalone) != 1 || standalone[0].Name != "rss" {
		t.Errorf("split: %v / %v", workloadNames(per), workloadNames(standalone))
	}
	if cfg.rssInodes != 5000 {
		t.Errorf("-rss-inodes = %d", cfg.rssInodes)
	}
	if _, err := parseFlags([]string{"-rss-inodes", "0"}); err == nil {
		t.Error("-rss-inodes 0 accepted")
	}
}
