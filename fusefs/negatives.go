package fusefs

import (
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// A new name in a shared directory changes nothing any other kernel holds
// but a negative entry of that very name: a view whose kernel was told
// "no such name" must be told it exists now; a view that never looked the
// name up has nothing to drop. negativeEntries keeps, per name of a shared
// directory, the views whose kernel caches it as absent, so that a create
// tells those and not every view that holds the directory.
//
// An entry is taken before the store is read, as knownInodes' counts are:
// a create committed after the read finds the view and tells it; one
// committed before is what the read saw. A lookup that finds the name
// takes the entry back. The table is bounded: when it is full, a miss is
// answered without a negative entry the kernel may keep (it asks again
// next time), so nothing cached is ever left untracked. Entries go when
// the name is created (the views are told), when the view's kernel drops
// the directory (FORGET), when the view goes, and when the negative
// timeout has passed.

// maxNegatives bounds the table (about 100 bytes an entry).
const maxNegatives = 1 << 16

// negativeEntries is, per name of a shared directory, the views whose
// kernel holds it as absent, with when their kernel stops believing it.
type negativeEntries struct {
	ttl    time.Duration
	shards [knownShards]negShard
}

// negShard holds the directories of one shard: directory, name, view.
type negShard struct {
	mu sync.Mutex
	m  map[uint64]map[string]map[*View]time.Time
	n  int // names held
}

func newNegativeEntries(ttl time.Duration) *negativeEntries {
	n := &negativeEntries{ttl: ttl}
	for i := range n.shards {
		n.shards[i].m = make(map[uint64]map[string]map[*View]time.Time)
	}
	return n
}

// Shards go by directory, so that dropping a directory looks at one.
func (n *negativeEntries) shard(dir uint64) *negShard { return &n.shards[dir%knownShards] }

// expect records that v's kernel is about to be told name is absent from
// dir. It returns false when the table is full: the answer must then not
// be cached.
func (n *negativeEntries) expect(v *View, dir uint64, name string, now time.Time) bool {
	s := n.shard(dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.m[dir]
	views := names[name]
	if views == nil {
		if s.n >= maxNegatives/knownShards && !s.pruneLocked(now) {
			return false
		}
		if names == nil {
			names = make(map[string]map[*View]time.Time)
			s.m[dir] = names
		}
		views = make(map[*View]time.Time, 1)
		names[name] = views
		s.n++
	}
	views[v] = now.Add(n.ttl)
	return true
}

// pruneLocked drops the entries whose timeout has passed and reports
// whether that made room.
func (s *negShard) pruneLocked(now time.Time) bool {
	for dir, names := range s.m {
		for name, views := range names {
			for v, until := range views {
				if now.After(until) {
					delete(views, v)
				}
			}
			if len(views) == 0 {
				delete(names, name)
				s.n--
			}
		}
		if len(names) == 0 {
			delete(s.m, dir)
		}
	}
	return s.n < maxNegatives/knownShards
}

// dropLocked removes v from name in dir, or every view when v is nil.
func (s *negShard) dropLocked(dir uint64, name string, v *View) {
	names := s.m[dir]
	views, ok := names[name]
	if !ok {
		return
	}
	if v != nil {
		delete(views, v)
		if len(views) > 0 {
			return
		}
	}
	delete(names, name)
	s.n--
	if len(names) == 0 {
		delete(s.m, dir)
	}
}

// found takes back what expect recorded: the name exists, or the lookup
// failed otherwise.
func (n *negativeEntries) found(v *View, dir uint64, name string) {
	s := n.shard(dir)
	s.mu.Lock()
	s.dropLocked(dir, name, v)
	s.mu.Unlock()
}

// take appends to into the views other than except whose kernel holds
// name as absent from dir, and forgets them: they are about to be told.
func (n *negativeEntries) take(dir uint64, name string, except *View, into []*View) []*View {
	s := n.shard(dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	for v := range s.m[dir][name] {
		if v != except {
			into = append(into, v)
		}
	}
	s.dropLocked(dir, name, nil)
	return into
}

// dropDir forgets v's negative entries in dir: its kernel dropped dir,
// and the entries below it with it.
func (n *negativeEntries) dropDir(v *View, dir uint64) {
	s := n.shard(dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.m[dir] {
		s.dropLocked(dir, name, v)
	}
}

// dropView forgets everything of v: it is unmounted.
func (n *negativeEntries) dropView(v *View) {
	for i := range n.shards {
		s := &n.shards[i]
		s.mu.Lock()
		for dir, names := range s.m {
			for name := range names {
				s.dropLocked(dir, name, v)
			}
		}
		s.mu.Unlock()
	}
}

// expectAbsent records, before a lookup of name in a shared directory
// reads the store, that this view's kernel may be told name is absent. It
// reports whether it did.
func (n *node) expectAbsent(name string) bool {
	if !shared(n.zone) {
		return false
	}
	return n.v.fs.negatives.expect(n.v, n.ino, name, time.Now())
}

// missed settles a lookup of name that failed with e: a miss of a shared
// directory the table could not record is answered uncached; any other
// failure takes back what expectAbsent recorded.
func (n *node) missed(name string, recorded bool, e syscall.Errno, out *fuse.EntryOut) {
	if !shared(n.zone) {
		return
	}
	if e != syscall.ENOENT {
		if recorded {
			n.v.fs.negatives.found(n.v, n.ino, name)
		}
		return
	}
	if !recorded {
		// A timeout set here is kept, and a failure with one set
		// is passed on as such: the kernel caches nothing.
		out.SetEntryTimeout(time.Nanosecond)
	}
}
