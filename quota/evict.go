package quota

import "github.com/shedfs/shedfs"

// Evictor frees kept files (the trash) of h, oldest first, until bytes
// and inodes more fit h's stored usage under its limit, and reports
// whether it freed anything. The process that serves views sets one that
// knows which files are open; the store's own (metadata.Store.EvictTrash
// with blob removal) serves when none is.
type Evictor func(h shedfs.Holder, bytes, inodes int64) bool

// SetEvictor sets what MakeRoom evicts with.
func (a *Accountant) SetEvictor(e Evictor) {
	a.mu.Lock()
	a.evictor = e
	a.mu.Unlock()
}

// MakeRoom is asked, under h's lock, when an admission of bytes and
// inodes more would fail: the trash never causes EDQUOT, so h's oldest
// kept files go first, and the caller decides again when it reports that
// anything went. This is the one place where eviction for quota happens.
// On a store other daemons share, a charge that fits beside what is
// stored and pending here was refused for the others' allotments, which
// a store transaction counts as used (an xattr, a size set): they are
// asked for the room they hold and do not use (reclaimFor), as a write's
// allotment does (Cover).
func (a *Accountant) MakeRoom(h shedfs.Holder, bytes, inodes int64) bool {
	a.mu.Lock()
	e := a.evictor
	a.mu.Unlock()
	if e != nil && e(h, max(bytes, 0)+a.Pending(h), max(inodes, 0)) {
		return true
	}
	return bytes > 0 && a.reclaimFor(h, bytes, inodes)
}
