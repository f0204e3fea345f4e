package space

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/acl"
)

// fakeDisk is a disk whose free space the test sets, measured by a
// counting statfs.
type fakeDisk struct {
	mu          sync.Mutex
	free, files uint64
	ffree       uint64
	calls       int
}

func (d *fakeDisk) statfs(_ string, st *unix.Statfs_t) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	*st = unix.Statfs_t{Bsize: 1024, Bavail: d.free / 1024, Files: d.files, Ffree: d.ffree}
	return nil
}

func (d *fakeDisk) set(free uint64) {
	d.mu.Lock()
	d.free = free
	d.mu.Unlock()
}

const mb = 1 << 20

func open(t *testing.T, d *fakeDisk, clock *time.Time, headroom int64) *Guard {
	t.Helper()
	g, err := Open(t.TempDir(), Options{
		Headroom: func() int64 { return headroom },
		Slack:    2 * mb,
		statfs:   d.statfs,
		now:      func() time.Time { return *clock },
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return g
}

func TestAdmit(t *testing.T) {
	d := &fakeDisk{free: 30 * mb, files: 1000, ffree: 1000}
	now := time.Unix(1000, 0)
	g := open(t, d, &now, 20*mb)
	if d.calls != 1 {
		t.Fatalf("Open measured %d times", d.calls)
	}
	// 30 MiB free, 22 kept: 8 MiB of growth (the disk shows each write
	// once it returned; a measurement comes after each MiB).
	for i := range 7 {
		if got := g.Admit(mb, 1); !got.Allowed() {
			t.Fatalf("growth %d refused: %v", i, got)
		}
		d.set(d.free - mb)
	}
	if got := g.Admit(mb+1, 0); got.Errno != syscall.ENOSPC || got.Reason != acl.ReasonStoreFull {
		t.Fatalf("growth past the mark: %v", got)
	}
	// Admitted growth counts until the next measurement, which comes
	// after RefreshBytes or Refresh, never on every call.
	if d.calls > 1+7 {
		t.Fatalf("%d measurements for 8 admissions", d.calls)
	}
	calls := d.calls
	for range 100 {
		g.Admit(1, 0)
	}
	if d.calls != calls {
		t.Fatalf("small growth measured the disk %d times", d.calls-calls)
	}
	// Deletes freed space: seen at the next measurement.
	d.set(100 * mb)
	now = now.Add(DefaultRefresh)
	if got := g.Admit(50*mb, 1); !got.Allowed() {
		t.Fatalf("after space came back: %v", got)
	}
	// Nothing that does not grow is refused, however full.
	d.set(0)
	now = now.Add(DefaultRefresh)
	for _, c := range [][2]int64{{0, 0}, {-mb, -1}} {
		if got := g.Admit(c[0], c[1]); !got.Allowed() {
			t.Errorf("Admit(%d, %d) on a full disk: %v", c[0], c[1], got)
		}
	}
	if got := g.Admit(1, 0); got.Allowed() {
		t.Error("growth on a full disk admitted")
	}
	if !g.Short() {
		t.Error("a full disk is not short")
	}
}

func TestAdmitInodes(t *testing.T) {
	d := &fakeDisk{free: 100 * mb, files: 1000, ffree: 70}
	now := time.Unix(1000, 0)
	g := open(t, d, &now, mb)
	for range 6 {
		if got := g.Admit(4096, 1); !got.Allowed() {
			t.Fatalf("create refused with inodes left: %v", got)
		}
	}
	if got := g.Admit(4096, 1); got.Errno != syscall.ENOSPC {
		t.Fatalf("create past the inode mark: %v", got)
	}
	if got := g.Admit(4096, 0); !got.Allowed() {
		t.Fatalf("data without inodes refused: %v", got)
	}
	// A filesystem without an inode count never runs out of inodes.
	d2 := &fakeDisk{free: 100 * mb}
	g2 := open(t, d2, &now, mb)
	if got := g2.Admit(4096, 1000); !got.Allowed() {
		t.Fatalf("no inode count: %v", got)
	}
}

func TestReserveStep(t *testing.T) {
	const h, slack = 20 * mb, 2 * mb
	for _, c := range []struct {
		name                 string
		free, reserved, want int64
	}{
		{"made_when_room", 100 * mb, 0, h},
		{"made_at_exactly_room", 2*h + 2*slack, 0, h},
		{"not_made_short_of_room", 2*h + 2*slack - 1, 0, 0},
		{"kept", 30 * mb, h, h},
		{"kept_while_growth_refused", h, h, h},
		{"released_when_short", h - 1, h, 0},
		{"grown_with_headroom", 100 * mb, h / 2, h},
		{"not_grown_short_of_room", h + 2*slack + h/2 - 1, h / 2, h / 2},
		{"nothing_to_release", 0, 0, 0},
	} {
		if got := reserveStep(c.free, c.reserved, h, slack); got != c.want {
			t.Errorf("%s: reserveStep(%d, %d) = %d, want %d", c.name, c.free, c.reserved, got, c.want)
		}
	}
}

// TestReserve: the background loop makes a really allocated reserve when
// there is room, releases it when something else fills the disk, and
// makes it again when space returns; Open releases it when the disk is
// too full to open the store, and fails when even that is not enough.
func TestReserve(t *testing.T) {
	dir := t.TempDir()
	d := &fakeDisk{free: 100 * mb}
	now := time.Unix(1000, 0)
	opts := Options{
		Headroom: func() int64 { return 4 * mb },
		Slack:    mb,
		statfs:   d.statfs,
		now:      func() time.Time { return now },
	}
	g, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, ReserveName)
	g.tick()
	if got := allocated(p); got != 4*mb {
		t.Fatalf("reserve has %d bytes allocated, want %d", got, 4*mb)
	}
	if f := g.Figures(); f.Reserve != 4*mb || f.Keep != 5*mb {
		t.Fatalf("figures %+v", f)
	}
	d.set(3 * mb) // another process filled the disk
	g.tick()
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reserve not released: %v", err)
	}
	// The reserve's blocks are the metadata's, not the tenants': with
	// 7 MiB free after the release (more than the 5 MiB mark), growth is
	// refused until there is room to make the reserve again.
	d.set(7 * mb)
	now = now.Add(DefaultRefresh)
	if got := g.Admit(mb, 0); got.Errno != syscall.ENOSPC {
		t.Fatalf("growth into the released reserve: %v", got)
	}
	d.set(9 * mb) // not enough to make it again without refusing growth
	g.tick()
	if allocated(p) != 0 {
		t.Fatal("reserve made without room for it")
	}
	d.set(10 * mb)
	g.tick()
	if allocated(p) != 4*mb {
		t.Fatal("reserve not made again")
	}
	now = now.Add(DefaultRefresh)
	if got := g.Admit(mb, 0); !got.Allowed() {
		t.Fatalf("growth with the reserve made again: %v", got)
	}

	// A disk too full to open the store: the reserve goes first.
	d.set(mb)
	g2, err := Open(dir, opts)
	if err == nil || !errors.Is(err, ErrFull) {
		t.Fatalf("Open of a full disk: %v, %v", g2, err)
	}
	if allocated(p) != 0 {
		t.Fatal("Open kept the reserve of a full disk")
	}
	d.set(5 * mb)
	g.mu.Lock()
	g.makeReserveLocked(4 * mb)
	g.mu.Unlock()
	d.set(3 * mb) // 3 MiB + the reserve's 4 would do
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	opts.statfs = func(path string, st *unix.Statfs_t) error {
		if err := d.statfs(path, st); err != nil {
			return err
		}
		if allocated(p) == 0 {
			st.Bavail += 4 * mb / 1024
		}
		return nil
	}
	if _, err := Open(dir, opts); err != nil {
		t.Fatalf("Open with the reserve to release: %v", err)
	}
	if allocated(p) != 0 {
		t.Fatal("reserve not released by Open")
	}
}

func TestStartClose(t *testing.T) {
	d := &fakeDisk{free: 100 * mb}
	g, err := Open(t.TempDir(), Options{Headroom: func() int64 { return mb }, Tick: time.Millisecond, statfs: d.statfs})
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	deadline := time.Now().Add(5 * time.Second)
	for g.Figures().Reserve == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	g.Close()
	g.Close()
	if g.Figures().Reserve != mb {
		t.Fatal("the loop made no reserve")
	}
}

// TestReserveReleasedByMeasurement: a measurement made for growth or for
// Short that finds less free than the headroom releases the reserve at
// once; the metadata engine must not wait a tick for its blocks.
func TestReserveReleasedByMeasurement(t *testing.T) {
	for _, ask := range []struct {
		name string
		ask  func(g *Guard)
	}{
		{"Admit", func(g *Guard) { g.Admit(mb, 0) }},
		{"Short", func(g *Guard) { g.Short() }},
	} {
		t.Run(ask.name, func(t *testing.T) {
			dir := t.TempDir()
			d := &fakeDisk{free: 100 * mb}
			now := time.Unix(1000, 0)
			g, err := Open(dir, Options{
				Headroom: func() int64 { return 4 * mb },
				Slack:    mb,
				statfs:   d.statfs,
				now:      func() time.Time { return now },
			})
			if err != nil {
				t.Fatal(err)
			}
			g.tick()
			p := filepath.Join(dir, ReserveName)
			if allocated(p) != 4*mb {
				t.Fatal("no reserve made")
			}
			d.set(3 * mb) // another process filled the disk
			ask.ask(g)
			if allocated(p) != 4*mb {
				t.Fatal("reserve released before the measurement was stale")
			}
			now = now.Add(DefaultRefresh)
			ask.ask(g)
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("reserve not released by a fresh measurement: %v", err)
			}
			if f := g.Figures(); f.Reserve != 0 || f.Keep != 4*mb+mb+4*mb {
				t.Fatalf("figures after the release: %+v", f)
			}
			if !g.Short() {
				t.Error("Short: false with 3 MiB free and 4 MiB needed")
			}
		})
	}
}
