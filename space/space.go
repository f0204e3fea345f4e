// Package space keeps the disk that holds a store from running out under
// the daemon. The metadata engine writes through memory maps, and a page
// without disk space behind it kills the process with SIGBUS, which no Go
// code can catch; so growth of the store (file data, creates, xattrs) is
// refused with ENOSPC while the disk has less free than the engine may
// need (metadata.Headroom), and a preallocated reserve file stands by for
// the case where something outside the daemon fills the disk: it is
// released then, so that deletes can still run and free space, and made
// again once there is room.
//
// It is a package of its own because this is host I/O on the store's
// filesystem (statfs, a preallocated file) that belongs to neither the
// pure rules (acl decides, from the figures measured here), the metadata
// engine nor the blob store, and because every writer of the store shares
// one Guard: the FUSE callbacks, imports and the admin API, and the
// opening of a store by every command.
package space

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/acl"
)

// ReserveName is the reserve file in the store directory.
const ReserveName = "reserve"

// ErrFull means the store's disk has less free space than the metadata
// engine needs to be opened for writing, even with the reserve released.
var ErrFull = errors.New("the store's disk is full")

// Defaults of Options.
const (
	DefaultSlack        = 2 << 20
	DefaultKeepInodes   = 64
	DefaultRefresh      = 5 * time.Millisecond
	DefaultRefreshBytes = 1 << 20
	DefaultTick         = 250 * time.Millisecond
)

// Options tunes a Guard. Zero fields take the defaults.
type Options struct {
	// Headroom is the free space the metadata engine needs now
	// (metadata.Headroom of the store's meta/ directory). It is asked at
	// Open and on every tick of the background loop.
	Headroom func() int64
	// Slack is kept free above Headroom for the growth of others: the
	// filesystem's own blocks and what is written between two
	// measurements.
	Slack int64
	// KeepInodes is how many free inodes growth leaves on the disk.
	KeepInodes int64
	// Refresh and RefreshBytes bound how stale the measured free space
	// may be when growth is admitted: statfs runs again after Refresh, or
	// once RefreshBytes were admitted since the last one; in between,
	// admitted growth is subtracted from what was measured.
	Refresh      time.Duration
	RefreshBytes int64
	// Tick is how often the background loop (Start) measures the disk and
	// releases or makes the reserve.
	Tick   time.Duration
	Logger *slog.Logger

	// statfs measures the disk (unix.Statfs; tests fake a disk).
	statfs func(path string, st *unix.Statfs_t) error
	// now is the clock (tests move it).
	now func() time.Time
}

func (o *Options) defaults() {
	if o.Headroom == nil {
		o.Headroom = func() int64 { return 0 }
	}
	if o.Slack <= 0 {
		o.Slack = DefaultSlack
	}
	if o.KeepInodes <= 0 {
		o.KeepInodes = DefaultKeepInodes
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.RefreshBytes <= 0 {
		o.RefreshBytes = DefaultRefreshBytes
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.statfs == nil {
		o.statfs = unix.Statfs
	}
	if o.now == nil {
		o.now = time.Now
	}
}

// Guard admits growth of one store by the free space of its disk, and
// keeps the store's reserve file. It is safe for concurrent use.
type Guard struct {
	dir     string
	reserve string
	opts    Options

	mu sync.Mutex
	// free and freeInodes are what statfs said at at; since and
	// sinceInodes what was admitted after it.
	free, freeInodes   int64
	since, sinceInodes int64
	at                 time.Time
	headroom           int64
	// reserved is how many bytes the reserve file has allocated.
	reserved int64
	// remake is what growth leaves free beyond the mark after the
	// reserve was released, so that it can be made again; 0 otherwise.
	remake int64

	stop chan struct{}
	done chan struct{}
}

// Open measures the disk of the store in dir. When it has less free than
// the metadata engine needs, the reserve is released at once, so that the
// store can be opened and its files deleted; if even then too little is
// free, Open fails with ErrFull (opening the metadata for writing could
// kill the process), and read-only access is what is left.
func Open(dir string, opts Options) (*Guard, error) {
	opts.defaults()
	g := &Guard{dir: dir, reserve: filepath.Join(dir, ReserveName), opts: opts}
	g.reserved = allocated(g.reserve)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.headroom = opts.Headroom()
	if err := g.measureLocked(opts.now()); err != nil {
		return nil, err
	}
	if g.free < g.headroom && g.reserved > 0 {
		g.releaseLocked()
		if err := g.measureLocked(opts.now()); err != nil {
			return nil, err
		}
	}
	if g.free < g.headroom {
		return nil, fmt.Errorf("%w: %s free on the disk of %s, the metadata needs %s: free space there, or use read-only commands (status, quota show)",
			ErrFull, mib(g.free), dir, mib(g.headroom))
	}
	return g, nil
}

// allocated is how many bytes file p has on disk, 0 if it is missing.
func allocated(p string) int64 {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return 0
	}
	return min(st.Blocks*512, st.Size)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// measureLocked runs statfs. g.mu must be held.
func (g *Guard) measureLocked(now time.Time) error {
	var st unix.Statfs_t
	if err := g.opts.statfs(g.dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", g.dir, err)
	}
	g.free = int64(min(st.Bavail*uint64(st.Bsize), math.MaxInt64/2))
	g.freeInodes = math.MaxInt64 / 2
	if st.Files > 0 {
		// A filesystem without an inode limit reports no inodes at all.
		g.freeInodes = int64(min(st.Ffree, math.MaxInt64/2))
	}
	g.since, g.sinceInodes, g.at = 0, 0, now
	return nil
}

// spaceLocked is what acl needs to decide growth by others than the
// metadata engine. After the reserve was released, growth also leaves
// room to make it again (remake): releasing it must not hand its blocks to
// the tenants that filled the disk. g.mu must be held.
func (g *Guard) spaceLocked() acl.Space {
	return acl.Space{
		FreeBytes:  g.free - g.since,
		FreeInodes: g.freeInodes - g.sinceInodes,
		KeepBytes:  g.headroom + g.opts.Slack + g.remake,
		KeepInodes: g.opts.KeepInodes,
	}
}

// freshLocked measures again when the last measurement is stale. A
// failing statfs keeps the last figures (and is retried after Refresh).
// A measurement that finds less free than the metadata engine needs
// releases the reserve at once instead of at the next tick: every write
// of the engine until then may need a block the disk no longer has.
func (g *Guard) freshLocked() {
	now := g.opts.now()
	if now.Sub(g.at) < g.opts.Refresh && g.since < g.opts.RefreshBytes {
		return
	}
	if err := g.measureLocked(now); err != nil {
		g.at = now
		g.opts.Logger.Error("measure the store's disk", "err", err)
		return
	}
	if reserveStep(g.free, g.reserved, g.headroom, g.opts.Slack) == 0 && g.reserved > 0 {
		g.releaseForMetadataLocked(g.headroom)
	}
}

// releaseForMetadataLocked releases the reserve because less than the
// headroom h is free, and measures again. g.mu must be held.
func (g *Guard) releaseForMetadataLocked(h int64) {
	free := g.free
	g.releaseLocked()
	g.remake = h
	g.opts.Logger.Warn("the store's disk is nearly full: reserve released for the metadata; growth is refused until space is freed",
		"free", free, "needed", h)
	if err := g.measureLocked(g.opts.now()); err != nil {
		g.opts.Logger.Error("measure the store's disk", "err", err)
	}
}

// Admit decides growing the store by bytes of data and inodes (acl
// AdmitSpace): ENOSPC (store_full) when the disk would be left with less
// than the metadata engine needs. What it admits counts as used until the
// next measurement. Growth of nothing is always admitted.
func (g *Guard) Admit(bytes, inodes int64) acl.Decision {
	if bytes <= 0 && inodes <= 0 {
		return acl.Decision{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.freshLocked()
	d := acl.AdmitSpace(g.spaceLocked(), bytes, inodes)
	if d.Allowed() {
		g.since += max(bytes, 0)
		g.sinceInodes += max(inodes, 0)
	}
	return d
}

// Short reports whether the disk has less free than the metadata engine
// needs: the daemon's own optional writes (the audit trail) stop then,
// and leave the rest to deletes.
func (g *Guard) Short() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.freshLocked()
	return g.free-g.since < g.headroom
}

// Figures are the guard's view of the disk, for status.
type Figures struct {
	Free, FreeInodes int64
	// Keep is the free space below which growth is refused.
	Keep int64
	// Reserve is the size of the reserve file (0: released).
	Reserve int64
}

// Figures returns what the guard measures now.
func (g *Guard) Figures() Figures {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.freshLocked()
	s := g.spaceLocked()
	return Figures{Free: s.FreeBytes, FreeInodes: s.FreeInodes, Keep: s.KeepBytes, Reserve: g.reserved}
}

// reserveStep is what the background loop does with the reserve, given
// the free space (the reserve not counted), the reserve's size and the
// headroom h the metadata engine needs: release it when less than h is
// free (something outside the daemon filled the disk, since growth stops
// at h+slack), and make it h bytes when that still leaves h plus twice
// the slack free, so that growth is not refused at once and the two
// thresholds never chase each other. It returns the reserve's new size.
func reserveStep(free, reserved, h, slack int64) int64 {
	switch {
	case reserved > 0 && free < h:
		return 0
	case reserved < h && free-(h-reserved) >= h+2*slack:
		return h
	}
	return reserved
}

// tick is one round of the background loop.
func (g *Guard) tick() {
	h := g.opts.Headroom()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.headroom = h
	if err := g.measureLocked(g.opts.now()); err != nil {
		g.opts.Logger.Error("measure the store's disk", "err", err)
		return
	}
	switch want := reserveStep(g.free, g.reserved, h, g.opts.Slack); {
	case want == 0 && g.reserved > 0:
		g.releaseForMetadataLocked(h)
	case want > g.reserved:
		if err := g.makeReserveLocked(want); err != nil {
			g.opts.Logger.Warn("make the store's reserve", "err", err)
		}
		if err := g.measureLocked(g.opts.now()); err != nil {
			g.opts.Logger.Error("measure the store's disk", "err", err)
		}
	}
}

// releaseLocked deletes the reserve file, giving its blocks back.
func (g *Guard) releaseLocked() {
	if err := os.Remove(g.reserve); err != nil && !errors.Is(err, os.ErrNotExist) {
		g.opts.Logger.Error("release the store's reserve", "err", err)
		return
	}
	g.reserved = 0
}

// makeReserveLocked allocates the reserve file to size bytes: really
// allocated (fallocate), not sparse, or it would reserve nothing.
func (g *Guard) makeReserveLocked(size int64) error {
	f, err := os.OpenFile(g.reserve, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("reserve %s: %w", g.reserve, err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		g.reserved = allocated(g.reserve)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EOPNOTSUPP) {
			// Never leave half a reserve standing in the way.
			g.releaseLocked()
		}
		return fmt.Errorf("reserve %s: %w", g.reserve, err)
	}
	g.reserved = size
	g.remake = 0
	g.opts.Logger.Info("store reserve made", "bytes", size)
	return nil
}

// Start runs the background loop until Close: the headroom is asked
// again, the disk measured, and the reserve released or made.
func (g *Guard) Start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stop != nil {
		return
	}
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	go g.loop(g.stop, g.done)
}

func (g *Guard) loop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	g.tick()
	t := time.NewTicker(g.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			g.tick()
		case <-stop:
			return
		}
	}
}

// Close stops the background loop. The reserve file stays for the next
// process.
func (g *Guard) Close() {
	g.mu.Lock()
	stop, done := g.stop, g.done
	g.stop = nil
	g.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}
