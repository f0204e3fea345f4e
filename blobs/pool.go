package blobs

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Made is a blob made ahead of its create: an empty file, open, named by
// an inode number that no inode has yet.
type Made struct {
	Ino  uint64
	File *os.File
}

// Pool keeps a few blobs made ahead of their creates, so that a CREATE
// takes a number and an open descriptor without a host syscall on its
// path: the host's create (and the shard directory's mkdir) happen in a
// goroutine of the pool meanwhile. Numbers come from alloc, the store's
// allocator, so none is ever handed out twice, pooled or not. A blob the
// pool holds is empty and no inode names it: quotas do not see it, and a
// check after a crash removes it as an unused blob, not as damage.
//
// A pool holds at most size+1 descriptors (one in the making) and stops
// with Close, which removes the blobs nobody took.
type Pool struct {
	dir   *Dir
	alloc func() (uint64, error)
	log   *slog.Logger

	ready chan Made
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// poolRetry is how long the pool waits after a failure (a full disk, a
// store that allocates no numbers) before it tries again.
const poolRetry = time.Second

// NewPool starts a pool of size blobs of d, numbered by alloc.
func (d *Dir) NewPool(size int, alloc func() (uint64, error), log *slog.Logger) *Pool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{
		dir:   d,
		alloc: alloc,
		log:   log,
		ready: make(chan Made, size),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go p.fill()
	return p
}

// fill makes blobs until the pool stops, one ahead of what the pool
// holds: its send waits for a Take.
func (p *Pool) fill() {
	defer close(p.done)
	for {
		m, err := p.make()
		if err != nil {
			p.log.Warn("make a blob ahead", "err", err)
			select {
			case <-time.After(poolRetry):
				continue
			case <-p.stop:
				return
			}
		}
		select {
		case p.ready <- m:
		case <-p.stop:
			p.Drop(m)
			return
		}
	}
}

func (p *Pool) make() (Made, error) {
	ino, err := p.alloc()
	if err != nil {
		return Made{}, fmt.Errorf("inode number: %w", err)
	}
	f, err := p.dir.OpenFile(ino, true)
	if err != nil {
		return Made{}, err
	}
	return Made{Ino: ino, File: f}, nil
}

// Take hands out a blob made ahead, or false when none is ready (the
// caller then allocates and creates as without a pool). A nil pool has
// none.
func (p *Pool) Take() (Made, bool) {
	if p == nil {
		return Made{}, false
	}
	select {
	case m := <-p.ready:
		return m, true
	default:
		return Made{}, false
	}
}

// Drop closes and removes a blob taken but not used (its create failed):
// its number is never handed out again.
func (p *Pool) Drop(m Made) {
	if m.File == nil {
		return
	}
	m.File.Close()
	if err := p.dir.Remove(m.Ino); err != nil {
		p.log.Warn("remove a blob made ahead", "ino", m.Ino, "err", err)
	}
}

// Close stops the pool and removes the blobs nobody took. It waits for
// the pool's goroutine, so call it before the store that allocates the
// numbers closes.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		close(p.stop)
		<-p.done
		for {
			select {
			case m := <-p.ready:
				p.Drop(m)
			default:
				return
			}
		}
	})
}

// Ready is how many blobs the pool holds now.
func (p *Pool) Ready() int {
	if p == nil {
		return 0
	}
	return len(p.ready)
}
