package fusefs

import (
	"runtime/debug"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

func TestLimitFor(t *testing.T) {
	const mib = 1 << 20
	v := perViewReserve()
	for _, c := range []struct {
		name                          string
		base, ceiling, views, entries int64
		want                          int64
	}{
		{"nothing held", 128 * mib, 0, 0, 0, 128 * mib},
		{"one view", 128 * mib, 0, 1, 0, 128*mib + v},
		{"a walk's nodes", 128 * mib, 0, 1, 1_000_000, 128*mib + 1_000_000*perNodeReserve + v},
		{"under the ceiling", 128 * mib, 1024 * mib, 2, 100_000, 128*mib + 100_000*perNodeReserve + 2*v},
		{"at the ceiling", 128 * mib, 256 * mib, 2, 10_000_000, 256*mib + 2*v},
		{"ceiling below the base", 128 * mib, 64 * mib, 1, 1_000_000, 128*mib + v},
		{"views past the ceiling", 128 * mib, 256 * mib, 1000, 0, 128*mib + 1000*v},
		{"a count below zero", 128 * mib, 0, 0, -5, 128 * mib},
	} {
		if got := limitFor(c.base, c.ceiling, c.views, c.entries); got != c.want {
			t.Errorf("%s: limitFor(%d, %d, %d, %d) = %d, want %d", c.name, c.base, c.ceiling, c.views, c.entries, got, c.want)
		}
	}
}

// TestMemLimitFollowsEntries: the limit is raised ahead of the entries
// counted, one step at a time, and lowered by the next update after the
// kernel forgets.
func TestMemLimitFollowsEntries(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	const base = 1 << 30
	var gotEntries, gotLimit int64
	m := newMemLimit(Options{MemoryLimit: base, MemoryLimitMax: base + 100*entryStep*perNodeReserve})
	m.gauge = func(e, l int64) { gotEntries, gotLimit = e, l }
	m.views = 1 // counted by hand: mounted(1) would start the scavenger
	m.update()
	if want := limitFor(base, m.ceiling, 1, entryStep); debug.SetMemoryLimit(-1) != want || gotLimit != want {
		t.Fatalf("limit %d (gauge %d), want %d", debug.SetMemoryLimit(-1), gotLimit, want)
	}
	for range entryStep {
		m.added(1)
	}
	if got := debug.SetMemoryLimit(-1); got != limitFor(base, m.ceiling, 1, entryStep) {
		t.Fatalf("raised within the step: %d", got)
	}
	m.added(1)
	if want := limitFor(base, m.ceiling, 1, 2*entryStep); debug.SetMemoryLimit(-1) != want || gotEntries != entryStep+1 {
		t.Fatalf("past the step: limit %d want %d, gauge entries %d", debug.SetMemoryLimit(-1), want, gotEntries)
	}
	m.added(1000 * entryStep)
	if want := base + 100*entryStep*perNodeReserve + perViewReserve(); debug.SetMemoryLimit(-1) != want {
		t.Fatalf("past the ceiling: limit %d, want %d", debug.SetMemoryLimit(-1), want)
	}
	// Forgetting lowers nothing at once; the next update (the scavenger's
	// tick) does.
	m.added(-(1000*entryStep + entryStep + 1))
	if got := debug.SetMemoryLimit(-1); got == limitFor(base, m.ceiling, 1, entryStep) {
		t.Fatalf("lowered at once")
	}
	m.update()
	if want := limitFor(base, m.ceiling, 1, entryStep); debug.SetMemoryLimit(-1) != want || gotEntries != 0 {
		t.Fatalf("after the forgets: limit %d want %d, entries %d", debug.SetMemoryLimit(-1), want, gotEntries)
	}
}

// TestPlusEntries counts the entries of a READDIRPLUS reply that name a
// node, as go-fuse lays them out.
func TestPlusEntries(t *testing.T) {
	l := fuse.NewDirEntryList(make([]byte, 4096), 0)
	for i, e := range []struct {
		name string
		node uint64
	}{{".", 0}, {"..", 0}, {"a", 7}, {"gone", 0}, {"a-longer-name.txt", 9}, {"1234567", 11}, {"12345678", 12}} {
		out := l.AddDirLookupEntry(fuse.DirEntry{Name: e.name, Mode: fuse.S_IFREG, Ino: uint64(i + 1)})
		if out == nil {
			t.Fatal("list full")
		}
		out.NodeId = e.node
	}
	if got := plusEntries(l.Bytes()); got != 4 {
		t.Fatalf("plusEntries = %d, want 4", got)
	}
	if got := plusEntries(nil); got != 0 {
		t.Fatalf("plusEntries(nil) = %d", got)
	}
}
