package metadata

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Every commit lands in the memtable log (*.mem), a file badger extends
// sparse to twice memTableSize and writes through a memory map. The first
// write to each of its pages asks the filesystem for a block, and when
// something outside the daemon has just filled the disk (before the space
// guard released the reserve) there is none: the kernel answers the page
// fault with SIGBUS and the daemon dies in badger's writer goroutine,
// whatever the commit was (a delete, an audit batch). So the blocks a log
// can ever take are allocated as soon as the log exists: at open for the
// logs there are, and for a new one when inotify reports it, a few
// microseconds after badger made it. A commit then writes only into blocks
// the log already owns.
//
// The blocks are allocated with FALLOC_FL_KEEP_SIZE, which never changes
// the file's size or contents: badger decides that a log is new by its
// size, and it may still be extending it when the allocation runs.
//
// What is left, and what the space guard's headroom and reserve cover:
// the few writes badger makes to a new log before the allocation, and the
// tables a flush or compaction writes (*.sst, written whole right after
// they are made).
const (
	memLogExt = ".mem"
	// memLogAlloc is what a log can take before badger starts the next:
	// it does so once the log holds memTableSize, so the last batch can
	// pass that by up to maxBatch. One more page covers the log's header.
	memLogAlloc = memTableSize + maxBatch + 4096
)

// memLogPreallocator allocates the blocks of badger's memtable logs in
// one directory until close.
type memLogPreallocator struct {
	dir    string
	logger *slog.Logger
	file   *os.File // the inotify descriptor, nil when watching failed
	done   chan struct{}

	mu     sync.Mutex
	failed bool // an allocation failed since the last success (logged once)
}

// startMemLogPreallocator allocates the logs in dir now and watches dir
// for new ones. Without inotify it still allocates the logs of the open
// (and logs why the later ones are not).
func startMemLogPreallocator(dir string, logger *slog.Logger) *memLogPreallocator {
	p := &memLogPreallocator{dir: dir, logger: logger, done: make(chan struct{})}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err == nil {
		if _, err = unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		logger.Warn("metadata: cannot watch for new memtable logs; their blocks are allocated as badger writes them",
			"dir", dir, "err", err)
		close(p.done)
	} else {
		// Non-blocking and through the runtime's poller, so that close
		// ends the read below.
		p.file = os.NewFile(uintptr(fd), "inotify "+dir)
		go p.watch()
	}
	p.allocateAll()
	return p
}

// allocateAll allocates every log in dir.
func (p *memLogPreallocator) allocateAll() {
	des, err := os.ReadDir(p.dir)
	if err != nil {
		p.report(fmt.Errorf("list %s: %w", p.dir, err))
		return
	}
	for _, de := range des {
		if strings.HasSuffix(de.Name(), memLogExt) {
			p.report(allocateMemLog(filepath.Join(p.dir, de.Name())))
		}
	}
}

// watch allocates each log inotify reports, until the descriptor closes.
func (p *memLogPreallocator) watch() {
	defer close(p.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := p.file.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				p.logger.Warn("metadata: watching for new memtable logs stopped", "dir", p.dir, "err", err)
			}
			return
		}
		names, overflow := inotifyNames(buf[:n])
		if overflow {
			p.allocateAll()
			continue
		}
		for _, name := range names {
			if strings.HasSuffix(name, memLogExt) {
				p.report(allocateMemLog(filepath.Join(p.dir, name)))
			}
		}
	}
}

// inotifyNames returns the names in a buffer of inotify events, and
// whether the kernel's queue overflowed (events, and so names, were lost).
func inotifyNames(buf []byte) (names []string, overflow bool) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		start := off + unix.SizeofInotifyEvent
		end := start + int(ev.Len)
		if end > len(buf) {
			break
		}
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			overflow = true
		}
		if ev.Len > 0 {
			name := string(buf[start:end])
			if i := strings.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			names = append(names, name)
		}
		off = end
	}
	return names, overflow
}

// allocateMemLog allocates the blocks a memtable log can take. A log
// badger already deleted again is no error.
func allocateMemLog(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("allocate memtable log: %w", err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, memLogAlloc); err != nil {
		return fmt.Errorf("allocate memtable log %s: %w", path, err)
	}
	return nil
}

// report logs the first failure after a success (a full disk fails every
// allocation until space is freed).
func (p *memLogPreallocator) report(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.failed = false
		return
	}
	if !p.failed {
		p.failed = true
		p.logger.Warn("metadata: cannot allocate a memtable log's blocks", "err", err)
	}
}

// close stops watching and waits for the watcher.
func (p *memLogPreallocator) close() {
	if p == nil {
		return
	}
	if p.file != nil {
		p.file.Close()
	}
	<-p.done
}
