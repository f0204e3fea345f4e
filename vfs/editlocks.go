package vfs

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// Edit locks (acl.EditLock) are kept in the store, so that they outlive a
// restart and bind every daemon of a shared store. Every change of a file
// through any door asks CheckEditLock; on a store of one daemon the core
// answers from memory (every lock of the store was taken or released
// through it, or loaded when it started), and a store without edit locks
// costs one atomic load per check. On a shared store, where another
// daemon may have taken one, the check reads the record — but only for
// the changes that name a file (an open for writing, a truncate, a rename,
// a delete), never for each write through a handle already open, which
// answers from memory.

// editLocks is the core's copy of the store's edit locks.
type editLocks struct {
	once sync.Once
	// live is len(byIno), read without the lock on the hot path.
	live  atomic.Int32
	mu    sync.RWMutex
	byIno map[uint64]acl.EditLock
}

// loadEditLocks fills the copy from the store, once.
func (c *Core) loadEditLocks() {
	c.edits.once.Do(func() {
		c.edits.byIno = map[uint64]acl.EditLock{}
		ls, err := c.store.ListEditLocks()
		if err != nil {
			c.log.Error("read edit locks: files locked before the start are not protected until their lock is taken again", "err", err)
			return
		}
		now := time.Now()
		for _, l := range ls {
			if now.Before(l.Expires) {
				c.edits.byIno[l.Ino] = acl.EditLock{User: l.User, Session: l.Session, Expires: l.Expires}
			}
		}
		c.edits.live.Store(int32(len(c.edits.byIno)))
	})
}

func (c *Core) rememberEditLock(ino uint64, l *acl.EditLock) {
	c.edits.mu.Lock()
	if l == nil {
		delete(c.edits.byIno, ino)
	} else {
		c.edits.byIno[ino] = *l
	}
	c.edits.live.Store(int32(len(c.edits.byIno)))
	c.edits.mu.Unlock()
}

// EditLockOf returns the edit lock the core knows on ino, nil if none or
// expired. It never reads the store.
func (c *Core) EditLockOf(ino uint64) *acl.EditLock {
	c.loadEditLocks()
	if c.edits.live.Load() == 0 {
		return nil
	}
	c.edits.mu.RLock()
	l, ok := c.edits.byIno[ino]
	c.edits.mu.RUnlock()
	if !ok || !l.Held(time.Now()) {
		return nil
	}
	return &l
}

// CheckEditLock decides a change by a of file ino (a write through a
// handle already open, from memory).
func (c *Core) CheckEditLock(ino uint64, a acl.Actor) acl.Decision {
	return acl.CheckEditLock(c.EditLockOf(ino), a, time.Now())
}

// CheckEditLockNamed decides a change by a that names file ino (an open
// for writing, a truncate, a rename, a delete): from memory on a store of
// one daemon, from the store's record on a shared one.
func (c *Core) CheckEditLockNamed(ino uint64, a acl.Actor) acl.Decision {
	if !c.store.Shared() {
		return c.CheckEditLock(ino, a)
	}
	l, err := c.store.GetEditLock(ino)
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) {
			c.log.Warn("read edit lock", "ino", ino, "err", err)
		}
		return c.CheckEditLock(ino, a)
	}
	return acl.CheckEditLock(&acl.EditLock{User: l.User, Session: l.Session, Expires: l.Expires}, a, time.Now())
}

// TakeEditLock takes, or renews, the edit lock of a on file ino for ttl.
// door and path are recorded for listings. When another holder has it,
// the answer is that lock and metadata.ErrEditLocked.
func (c *Core) TakeEditLock(ino uint64, a acl.Actor, door, path string, ttl time.Duration) (*metadata.EditLock, error) {
	c.loadEditLocks()
	now := time.Now()
	l, err := c.store.TakeEditLock(metadata.EditLock{
		Ino: ino, User: a.User, Session: a.Session, Door: door, Path: path, Taken: now, Expires: now.Add(ttl),
	}, now)
	if err != nil {
		if l != nil {
			c.rememberEditLock(ino, &acl.EditLock{User: l.User, Session: l.Session, Expires: l.Expires})
		}
		return l, err
	}
	c.rememberEditLock(ino, &acl.EditLock{User: l.User, Session: l.Session, Expires: l.Expires})
	return l, nil
}

// ReleaseEditLock releases the edit lock on ino. may decides, given the
// lock, whether the caller may (nil: always, the administrator); its
// refusal is answered as an error wrapping its errno. ENOENT if there is
// no lock.
func (c *Core) ReleaseEditLock(ino uint64, may func(acl.EditLock) acl.Decision) (*metadata.EditLock, error) {
	c.loadEditLocks()
	var refused acl.Decision
	l, err := c.store.ReleaseEditLock(ino, func(l metadata.EditLock) error {
		if may == nil {
			return nil
		}
		refused = may(acl.EditLock{User: l.User, Session: l.Session, Expires: l.Expires})
		return refused.Err()
	})
	if refused.Refused() {
		return l, fmt.Errorf("release the edit lock of %d: %s: %w", ino, refused.Reason, refused.Errno)
	}
	if err == nil || errors.Is(err, syscall.ENOENT) {
		c.rememberEditLock(ino, nil)
	}
	return l, err
}

// editLocked decides a change by v of file ino: from memory, where the
// answer for a file without a lock costs no more than an atomic load;
// named (an open for writing, a truncate, a rename, a delete) reads the
// store's record on a shared store.
func (v *View) editLocked(ino uint64, named bool) acl.Decision {
	c := v.c
	if named && c.store.Shared() {
		return c.CheckEditLockNamed(ino, v.Actor())
	}
	l := c.EditLockOf(ino)
	if l == nil {
		return acl.Decision{}
	}
	return acl.CheckEditLock(l, v.Actor(), time.Now())
}

// PurgeEditLocks deletes the records of edit locks expired at now and
// drops them from the core's copy, so that a store whose locks all ended
// answers checks again with one atomic load. It returns how many
// records went.
func (c *Core) PurgeEditLocks(now time.Time) (int, error) {
	c.loadEditLocks()
	n, err := c.store.PurgeEditLocks(now)
	c.edits.mu.Lock()
	for ino, l := range c.edits.byIno {
		if !l.Held(now) {
			delete(c.edits.byIno, ino)
		}
	}
	c.edits.live.Store(int32(len(c.edits.byIno)))
	c.edits.mu.Unlock()
	return n, err
}
