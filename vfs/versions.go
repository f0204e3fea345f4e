package vfs

import "sync"

// A view's kernel keeps the pages of a file, and the listing of a
// directory, across opens (FOPEN_KEEP_CACHE, FOPEN_CACHE_DIR) when they
// cannot have changed since that view last opened it. contentVersions
// numbers the changes: every change of an inode's content or entries takes
// a new number from one clock, and each view's node remembers the number
// it last handed its kernel. Invalidations to the other views remove stale
// pages at once; the version makes the next open drop them too should one
// ever be lost.
//
// The table is bounded: when it grows past maxVersions it is emptied and
// floor raised to the clock, so every inode it no longer lists counts as
// changed at floor. That may drop a cache that was still good, never keep
// one that was not: a change always takes a number above every number a
// view saw before it.
type contentVersions struct {
	mu    sync.Mutex
	clock uint64
	floor uint64
	m     map[uint64]uint64
}

// maxVersions bounds the table (about 40 bytes an entry).
const maxVersions = 1 << 16

func newContentVersions() *contentVersions {
	// Nodes start at 0, which no version ever is: a view's first open
	// of an inode never keeps a cache.
	return &contentVersions{clock: 1, floor: 1, m: make(map[uint64]uint64)}
}

// current is ino's version now.
func (c *contentVersions) current(ino uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.currentLocked(ino)
}

func (c *contentVersions) currentLocked(ino uint64) uint64 {
	if v, ok := c.m[ino]; ok {
		return v
	}
	return c.floor
}

// bump records a change of ino and returns its version before and after.
func (c *contentVersions) bump(ino uint64) (before, after uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before = c.currentLocked(ino)
	if len(c.m) >= maxVersions {
		clear(c.m)
		c.floor = c.clock
	}
	c.clock++
	c.m[ino] = c.clock
	return before, c.clock
}

// bumpAll records a change of every inode (the feed lost track).
func (c *contentVersions) bumpAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.clock++
	c.floor = c.clock
}

// BumpAllContent records a change of every inode's content, for a door
// that lost track of the changes (a shared store's change feed).
func (c *Core) BumpAllContent() { c.versions.bumpAll() }
