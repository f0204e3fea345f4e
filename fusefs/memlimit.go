package fusefs

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// go-fuse gives every reader of a view's /dev/fuse a buffer as large as
// the biggest request (MaxWrite plus headers, about 1 MiB), and keeps two
// or three readers blocked on each mounted view. The kernel only writes
// the request into it, so an idle view's buffers are hardly resident, but
// the Go heap counts all of them: 1,000 views hold about 3 GiB of heap and
// 20 MiB of RSS. Against a fixed soft memory limit that heap is always
// over the limit, and the collector runs without pause (it took half the
// daemon's CPU with 1,000 views). So the limit is raised by what the
// mounted views' readers reserve, and keeps bounding everything else.
//
// A buffer go-fuse allocates anew in memory the heap freed before is
// zeroed, and so made resident, where one in memory returned to the
// system is not. Without the collector's pressure little is returned, so
// with scavengeViews views or more, every scavengeEvery the freed memory
// is handed back (a full collection and scavenge): with 1,000 views RSS
// after creating and writing in share/ stayed at 197 MiB, against 256 MiB
// with a 5 s period and 730 MiB with none.

// The kernel of a view holds an inode for as long as it caches a name of
// it, and go-fuse keeps a node for each such inode (its Inode, the
// identity table's entries, the parent's child map, and shedfs's node):
// about perNodeReserve bytes. A walk of a large tree makes the
// kernel hold every inode it passed until memory pressure or a cache drop
// makes it forget them, so a walk of 1,000,000 files holds some 390 MB
// of live heap. Against the fixed limit the collector then ran without
// pause and took 60% of the daemon's CPU (docs/performance.md). So the
// limit is raised by what go-fuse holds per kernel entry as well, up to a
// ceiling: past it, the heap is held near the ceiling at the cost of
// collecting often, and the daemon cannot grow without bound.
//
// The count is what go-fuse counts: every entry of a reply that names a
// node (LOOKUP, CREATE, MKDIR, MKNOD, SYMLINK, LINK, TMPFILE, and each
// entry of READDIRPLUS) adds one, a FORGET takes back its count
// (forgetCounter). That is the kernel's lookup count summed over the
// inodes it holds: one per inode after a walk, more for an inode found
// by several names or listed again.

// memLimit keeps the process's soft memory limit at a base plus the
// read buffers of the mounted views and the nodes their kernels hold.
type memLimit struct {
	// entries is the kernel entries every view holds; raiseAt is the
	// count past which the limit set no longer covers them.
	entries atomic.Int64
	raiseAt atomic.Int64

	mu      sync.Mutex
	base    int64 // 0: the FS does not set the limit
	ceiling int64 // the most base plus the nodes may raise it to; 0: none
	views   int64
	running bool // scavenge runs
	set     int64
	gauge   func(entries, limit int64) // metrics; nil: none
}

// newMemLimit is the limit keeper of opts, which feeds opts' metrics.
func newMemLimit(opts Options) *memLimit {
	m := &memLimit{base: opts.MemoryLimit, ceiling: opts.MemoryLimitMax}
	if mt := opts.Metrics; mt != nil {
		m.gauge = func(entries, limit int64) {
			mt.kernelEntries.Set(float64(entries))
			mt.memoryLimit.Set(float64(limit))
		}
	}
	m.raiseAt.Store(entryStep)
	return m
}

// perNodeReserve is the heap one kernel-held node costs, measured in the
// heap profile of a 300,000-file walk (docs/performance.md, "The limit
// follows the kernel"): shedfs's node with go-fuse's Inode inside it (a
// 176-byte struct; 164 bytes a node in the profile), the identity table's
// entry and map slots (128), the parent's child map (95); 387 bytes,
// rounded up.
const perNodeReserve = 400

// entryStep is how far the limit is raised ahead of the entries counted,
// so that a walk sets it once per entryStep lookups, not at each.
const entryStep = 4096

// limitFor is the soft limit for base, views and kernel entries: the
// views' buffers always (they are reserved, not resident), the nodes up to
// the ceiling.
func limitFor(base, ceiling, views, entries int64) int64 {
	l := base + max(entries, 0)*perNodeReserve
	if ceiling > 0 && l > ceiling {
		l = max(ceiling, base)
	}
	return l + views*perViewReserve()
}

// added counts n kernel entries in (n > 0) or out (n < 0). A count past
// the one the limit covers raises the limit at once; a lower one lowers
// it at the next scavenge, once the forgotten nodes are garbage.
func (m *memLimit) added(n int64) {
	if c := m.entries.Add(n); n > 0 && c > m.raiseAt.Load() {
		m.update()
	}
}

// update sets the limit for the views and entries counted now, with room
// for entryStep more entries.
func (m *memLimit) update() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.updateLocked()
}

func (m *memLimit) updateLocked() {
	c := m.entries.Load()
	ahead := (max(c, 0)/entryStep + 1) * entryStep
	m.raiseAt.Store(ahead)
	if m.base != 0 {
		if l := limitFor(m.base, m.ceiling, m.views, ahead); l != m.set {
			m.set = l
			debug.SetMemoryLimit(l)
		}
	}
	if m.gauge != nil {
		m.gauge(c, m.set)
	}
}

// defaultMaxThreads is the Go runtime's default thread limit.
const defaultMaxThreads = 10000

// scavengeEvery is how often freed memory goes back to the system.
const scavengeEvery = time.Second

// scavengeViews is how many views it takes for scavenge to run: with few,
// the buffers are a small part of the heap and the limit does the work.
const scavengeViews = 64

// readersPerView is how many readers go-fuse keeps per mount at most
// while idle: its maxReaders (GOMAXPROCS, at least 2, at most 16) plus
// the one it starts when the last reader takes a request.
func readersPerView() int64 {
	return int64(min(max(runtime.GOMAXPROCS(0), 2), 16)) + 1
}

// perViewReserve is the memory one mounted view's readers hold: their
// buffers, and the stacks of go-fuse's goroutines (about 115 KiB a view
// measured with 1,000 views).
func perViewReserve() int64 {
	const headers = 4096 + 4096 // request headers, and the alignment slack
	const stacks = 256 << 10
	return readersPerView()*(int64(viewMaxWrite)+headers) + stacks
}

// mounted counts a view in (+1) or out (-1). A view mounted raises the
// limit at once; one unmounted lowers it at the next scavenge, once its
// buffers are garbage: lowered at once, below a heap that still holds
// them, the limit would set the collector running without pause while
// many views stop.
func (m *memLimit) mounted(delta int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.views += delta
	if delta > 0 {
		// Each blocked reader holds a thread: past the Go runtime's
		// 10,000 (some 3,400 views) the daemon would die.
		debug.SetMaxThreads(int(max(defaultMaxThreads, 1000+m.views*readersPerView())))
	}
	if m.base == 0 {
		return
	}
	if delta > 0 {
		m.updateLocked()
	}
	if m.views > 0 && !m.running {
		m.running = true
		go m.scavenge()
	}
}

// scavenge returns freed memory to the system while views are mounted,
// and lowers the limit to what the views and their kernels hold now.
func (m *memLimit) scavenge() {
	t := time.NewTicker(scavengeEvery)
	defer t.Stop()
	for range t.C {
		m.mu.Lock()
		m.updateLocked()
		if m.views == 0 {
			m.running = false
			m.mu.Unlock()
			return
		}
		many := m.views >= scavengeViews
		m.mu.Unlock()
		if many {
			debug.FreeOSMemory()
		}
	}
}

// viewMaxWrite is the largest write the kernel sends a view in one request.
const viewMaxWrite = 1 << 20
