package fusefs

import (
	"runtime"
	"runtime/debug"
	"sync"
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

// memLimit keeps the process's soft memory limit at a base plus the
// read buffers of the mounted views.
type memLimit struct {
	mu      sync.Mutex
	base    int64 // 0: the FS does not set the limit
	views   int64
	running bool // scavenge runs
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
		debug.SetMemoryLimit(m.base + m.views*perViewReserve())
	}
	if m.views > 0 && !m.running {
		m.running = true
		go m.scavenge()
	}
}

// scavenge returns freed memory to the system while views are mounted.
func (m *memLimit) scavenge() {
	t := time.NewTicker(scavengeEvery)
	defer t.Stop()
	for range t.C {
		m.mu.Lock()
		debug.SetMemoryLimit(m.base + m.views*perViewReserve())
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
