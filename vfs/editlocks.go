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
// through any door asks the core, which answers from its copy of the
// store's locks: a store without edit locks costs one atomic load per
// check. The copy is loaded once, kept by every take and release through
// this core, and, on a store other daemons share, by theirs through the
// store's feed (FollowEditLocks): a lock taken on another host binds here
// as soon as the feed brings it, milliseconds later, without a read of
// the store per check.

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
		c.store.FollowEditLocks(c.editLockChanged)
		c.reloadEditLocks()
	})
}

// reloadEditLocks reads every live edit lock of the store into the copy.
func (c *Core) reloadEditLocks() {
	ls, err := c.store.ListEditLocks()
	if err != nil {
		c.log.Error("read edit locks: files locked before the start are not protected until their lock is taken again", "err", err)
		return
	}
	now := time.Now()
	fresh := map[uint64]acl.EditLock{}
	for _, l := range ls {
		if now.Before(l.Expires) {
			fresh[l.Ino] = acl.EditLock{User: l.User, Session: l.Session, Expires: l.Expires}
		}
	}
	c.edits.mu.Lock()
	c.edits.byIno = fresh
	c.edits.live.Store(int32(len(fresh)))
	c.edits.mu.Unlock()
}

// editLockChanged takes in a change another daemon made to the edit lock
// of ino (all: to any), as the store's feed tells it.
func (c *Core) editLockChanged(ino uint64, all bool) {
	if all {
		c.reloadEditLocks()
		return
	}
	l, err := c.store.GetEditLock(ino)
	switch {
	case err == nil:
		c.rememberEditLock(ino, &acl.EditLock{User: l.User, Session: l.Session, Expires: l.Expires})
	case errors.Is(err, syscall.ENOENT):
		c.rememberEditLock(ino, nil)
	default:
		c.log.Warn("read an edit lock another daemon changed", "ino", ino, "err", err)
	}
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
// for writing, a truncate, a rename, a delete): as CheckEditLock, from the
// core's copy.
func (c *Core) CheckEditLockNamed(ino uint64, a acl.Actor) acl.Decision {
	return c.CheckEditLock(ino, a)
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

// editLocked decides a change by v of file ino from the core's copy: the
// answer for a file without a lock costs no more than an atomic load.
func (v *View) editLocked(ino uint64, named bool) acl.Decision {
	l := v.c.EditLockOf(ino)
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
