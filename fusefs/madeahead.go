package fusefs

import (
	"os"
	"sync"

	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
)

// aheadBlobs is how many blobs the FS keeps made ahead of its creates: a
// burst of creates longer than that finds the pool empty and creates its
// blobs as it would without one, so the pool only needs to cover the
// time its goroutine takes to make one.
const aheadBlobs = 32

// madeAhead hands the blobs of a store's pool (blobs.Pool) to the creates
// of every view: newChild takes one and creates the inode under its
// number, and the create's first open (acquire) finds its descriptor
// here instead of creating the blob on the host. One pool per store, not
// per view. A store shared with other daemons has none: their checks
// could take a pooled blob for a stray one.
type madeAhead struct {
	pool *blobs.Pool

	mu    sync.Mutex
	taken map[uint64]*os.File // created inodes whose blob acquire has not opened yet
}

func newMadeAhead(store *metadata.Store, d *blobs.Dir, f *FS) *madeAhead {
	m := &madeAhead{taken: make(map[uint64]*os.File)}
	if !store.Shared() {
		m.pool = d.NewPool(aheadBlobs, store.AllocIno, f.log)
	}
	return m
}

// take is a blob made ahead for a create whose file is opened at once
// (open), or the zero Made (not opened, no pool, or none ready): the
// create then allocates its number itself.
func (m *madeAhead) take(open bool) blobs.Made {
	if !open {
		return blobs.Made{}
	}
	b, _ := m.pool.Take()
	return b
}

// drop gives up a blob taken for a create that failed.
func (m *madeAhead) drop(b blobs.Made) {
	if m.pool != nil {
		m.pool.Drop(b)
	}
}

// created keeps the blob of inode b.Ino, just created, for its first open.
func (m *madeAhead) created(b blobs.Made) {
	if b.File == nil {
		return
	}
	m.mu.Lock()
	m.taken[b.Ino] = b.File
	m.mu.Unlock()
}

// open returns the blob made ahead for ino, or nil.
func (m *madeAhead) open(ino uint64) *os.File {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.taken[ino]
	delete(m.taken, ino)
	return f
}

// close stops the pool, removing its blobs, and closes what no open took.
func (m *madeAhead) close() {
	m.pool.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	for ino, f := range m.taken {
		f.Close()
		delete(m.taken, ino)
	}
}

// openBlob opens the blob of ino for acquire: the one made ahead for a
// file just created, else the host file (created if create is set).
func (f *FS) openBlob(ino uint64, create bool) (*os.File, error) {
	if b := f.ahead.open(ino); b != nil {
		return b, nil
	}
	return f.blobs.OpenFile(ino, create)
}
