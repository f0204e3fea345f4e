package metadata

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/shedfs/shedfs"
)

// A store on etcd is written by several daemons. Each follows the others'
// commits (etcdFeed), drops them from its metadata cache at once, and
// hands them, decoded, to whoever serves views of the store (Follow), so
// that the kernels of its views drop them too.

// Change is what other daemons changed in one batch of the feed.
type Change struct {
	// Inodes are the inodes whose record changed or went.
	Inodes []uint64
	// Entries are the directory entries made, changed or removed.
	Entries []EntryRef
	// Users and Groups are the principals added, changed or removed
	// (a group's members live in its record).
	Users, Groups []string
	// All means the feed lost track: anything may have changed.
	All bool
	// At is when the batch arrived.
	At time.Time
}

// EntryRef names one directory entry.
type EntryRef struct {
	Dir  uint64
	Name string
}

// follower is the Store's end of the feed.
type follower struct {
	fn   atomic.Pointer[func(Change)]
	gone atomic.Pointer[func()]
	// locks is FollowLocks's fn.
	locks atomic.Pointer[func(uint64)]
	// wants is FollowWants's fn.
	wants atomic.Pointer[func(shedfs.Holder)]
	// edits is FollowEditLocks's fn.
	edits atomic.Pointer[func(ino uint64, all bool)]
}

// FollowEditLocks makes fn run (on the feed's goroutine) whenever another
// daemon takes or releases an edit lock, with the file's inode, or with
// all when the feed lost track and every lock must be read again. It does
// nothing on an embedded store.
func (s *Store) FollowEditLocks(fn func(ino uint64, all bool)) {
	s.follow.edits.Store(&fn)
}

// FollowDepartures makes fn run (on a goroutine of the feed) whenever
// another daemon serving the store stops or dies, so that the orphans it
// held open, its markers gone with its lease, are reclaimed. It does
// nothing on an embedded store.
func (s *Store) FollowDepartures(fn func()) {
	s.follow.gone.Store(&fn)
}

// Follow makes fn receive every change other daemons commit to a shared
// store from now on, after the metadata cache has dropped it; fn runs on
// the feed's goroutine, one batch at a time. It does nothing on an
// embedded store, which no other process writes.
func (s *Store) Follow(fn func(Change)) {
	s.follow.fn.Store(&fn)
}

// Shared reports whether other daemons may serve the store at the same
// time (a store on etcd).
func (s *Store) Shared() bool {
	_, ok := s.engine().(*etcdKV)
	return ok
}

// Peers lists the other daemons serving the store (host, pid and start
// time of each; every daemon, for a read-only open, which is none); none
// for an embedded store.
func (s *Store) Peers() ([]string, error) {
	if e, ok := s.engine().(*etcdKV); ok {
		return e.peers()
	}
	return nil, nil
}

// engine is the KV under the cache.
func (s *Store) engine() KV {
	if c, ok := s.kv.(*cachedKV); ok {
		return c.KV
	}
	return s.kv
}

// startFeed follows the changes of other daemons on a shared store opened
// for writing: into the cache, then to Follow's fn.
func (s *Store) startFeed() {
	e, ok := s.engine().(*etcdKV)
	if !ok || e.lease == 0 {
		return
	}
	c, _ := s.kv.(*cachedKV)
	e.follow(func(keys [][]byte, lost bool) {
		if c != nil {
			if lost {
				c.c.reset()
			} else {
				c.Invalidate(keys...)
			}
		}
		if fn := s.follow.edits.Load(); fn != nil {
			if lost {
				(*fn)(0, true)
			}
			for _, k := range keys {
				if len(k) == 9 && k[0] == pEditLock {
					(*fn)(binary.BigEndian.Uint64(k[1:]), false)
				}
			}
		}
		fn := s.follow.fn.Load()
		if fn == nil {
			return
		}
		ch := Change{All: lost, At: time.Now()}
		for _, k := range keys {
			switch {
			case len(k) == 9 && k[0] == pInode:
				ch.Inodes = append(ch.Inodes, s.keys.ino(k))
			case len(k) >= 9 && k[0] == pEntry:
				ch.Entries = append(ch.Entries, EntryRef{Dir: s.keys.ino(k), Name: string(k[9:])})
			case len(k) > 1 && k[0] == pUser:
				ch.Users = append(ch.Users, string(k[1:]))
			case len(k) > 1 && k[0] == pGroup:
				ch.Groups = append(ch.Groups, string(k[1:]))
			}
		}
		if ch.All || len(ch.Inodes) > 0 || len(ch.Entries) > 0 || len(ch.Users) > 0 || len(ch.Groups) > 0 {
			(*fn)(ch)
		}
	}, func() {
		if fn := s.follow.gone.Load(); fn != nil {
			(*fn)()
		}
	}, func(ino uint64) {
		if fn := s.follow.locks.Load(); fn != nil {
			(*fn)(ino)
		}
	}, func(h shedfs.Holder) {
		if fn := s.follow.wants.Load(); fn != nil {
			(*fn)(h)
		}
	})
}
