package metadata

import (
	"encoding/json"
	"fmt"
	"sync"
	"syscall"

	"github.com/shedfs/shedfs"
)

// trashTally keeps each holder's trash usage (TrashUsage) in memory once
// it has been counted, kept exact by the store's own commits, so that a
// statfs (df, and the fstatfs of every rm -rf) does not scan a trash that
// grows with every delete: with 10,000 kept files the scan cost an
// rm -rf 0.4 s before its first unlink (docs/performance.md, "The delete path").
//
// A commit that adds or drops trash records applies its change after it
// committed; a count made by a scan is kept only if no such change was
// applied while it ran (gen), so a count never misses a commit. On a
// store shared with other daemons (etcd) their changes do not pass here,
// so the tally is off and every call scans.
type trashTally struct {
	mu  sync.Mutex
	off bool
	gen uint64
	m   map[shedfs.Holder]shedfs.Usage
}

// trashDelta is what one transaction changed in the trash, per holder.
type trashDelta map[shedfs.Holder]shedfs.Usage

// get returns h's count when known; otherwise the generation a scan
// starting now must hand back to put.
func (t *trashTally) get(h shedfs.Holder) (u shedfs.Usage, gen uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.off {
		return shedfs.Usage{}, 0, false
	}
	u, ok = t.m[h]
	return u, t.gen, ok
}

// put keeps a count made by a scan that began at gen, unless a change
// was applied since.
func (t *trashTally) put(h shedfs.Holder, u shedfs.Usage, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.off || gen != t.gen {
		return
	}
	if t.m == nil {
		t.m = map[shedfs.Holder]shedfs.Usage{}
	}
	t.m[h] = u
}

// apply adds a committed transaction's change to the counts it knows.
func (t *trashTally) apply(d trashDelta) {
	if len(d) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	for h, du := range d {
		if u, ok := t.m[h]; ok {
			t.m[h] = shedfs.Usage{Bytes: u.Bytes + du.Bytes, Inodes: u.Inodes + du.Inodes}
		}
	}
}

// reset forgets every count, after a change that did not pass through
// addTrash or dropTrash (a repair).
func (t *trashTally) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	t.m = nil
}

// trashCharge is what one trash record counts in its holder's trash
// usage: its bytes for a regular file, and one inode.
func trashCharge(k, v []byte) (shedfs.Usage, error) {
	var r trashRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return shedfs.Usage{}, fmt.Errorf("trash record %x: %w", k, ErrCorrupt)
	}
	return keptCharge(r.Mode, r.Size), nil
}

// keptCharge is what a kept file of this mode and size counts.
func keptCharge(mode uint32, size uint64) shedfs.Usage {
	u := shedfs.Usage{Inodes: 1}
	if mode&syscall.S_IFMT == syscall.S_IFREG {
		u.Bytes = shedfs.Charge(size)
	}
	return u
}

// countTrash notes in the transaction that h's trash changed by sign
// times u.
func (o *op) countTrash(h shedfs.Holder, u shedfs.Usage, sign int64) {
	if o.trash == nil {
		o.trash = trashDelta{}
	}
	d := o.trash[h]
	o.trash[h] = shedfs.Usage{Bytes: d.Bytes + sign*u.Bytes, Inodes: d.Inodes + sign*u.Inodes}
}

// TrashUsage is what h's trash holds: the charge of its files and their
// number. It is part of h's usage, and free for admission: eviction makes
// room for a charge that would not fit otherwise.
func (s *Store) TrashUsage(h shedfs.Holder) (shedfs.Usage, error) {
	u, gen, ok := s.trash.get(h)
	if ok {
		return u, nil
	}
	u, err := s.scanTrashUsage(h)
	if err != nil {
		return u, err
	}
	s.trash.put(h, u, gen)
	return u, nil
}

// scanTrashUsage counts h's trash record by record.
func (s *Store) scanTrashUsage(h shedfs.Holder) (shedfs.Usage, error) {
	var u shedfs.Usage
	err := s.kv.View(func(tx Txn) error {
		u = shedfs.Usage{}
		return tx.Scan(trashHolderPrefix(h), nil, func(k, v []byte) error {
			c, err := trashCharge(k, v)
			u.Bytes += c.Bytes
			u.Inodes += c.Inodes
			return err
		})
	})
	return u, err
}
