package vfs

import (
	"errors"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// keepVersion truncates regular file rec to zero after moving its content
// to a new inode in the trash: the blob is renamed to the new number (no
// copy) and the live file gets a fresh, empty one, which every handle
// open on it uses from now on. It reports false, having done nothing,
// when the trash is off, the file is empty or may not be truncated by
// this view, or the holder has no inode to spare even after eviction; the
// caller then truncates as usual.
func (v *View) keepVersion(at At, rec *shedfs.Inode) bool {
	c := v.c
	if rec.Size == 0 || !rec.IsRegular() {
		return false
	}
	note := v.TrashNote(at, metadata.TrashTruncate, "")
	if note == nil || !acl.Truncate(v.Actor(), acl.EntryOf(rec), acl.Quota{}, rec.Size, 0).Allowed() {
		return false
	}
	oi, e := c.acquire(rec, false)
	if e != 0 {
		return false
	}
	defer c.release(oi, nil)
	oi.mu.Lock()
	defer oi.mu.Unlock()
	if oi.size == 0 || c.persistLocked(oi) != 0 {
		return false
	}
	unlock := c.acct.Lock(oi.holder)
	defer unlock()
	version, err := c.store.AllocIno()
	if err != nil {
		return false
	}
	if err := c.blobs.Move(oi.ino, version); err != nil {
		c.log.Error("keep version", "ino", oi.ino, "err", err)
		return false
	}
	blob, err := c.blobs.OpenFile(oi.ino, true)
	if err != nil {
		c.undoMove(oi.ino, version)
		return false
	}
	_, err = c.store.KeepVersion(oi.ino, version, note)
	if err == syscall.EDQUOT && c.makeRoom(oi.holder, 0, 1, acl.Decision{Errno: syscall.EDQUOT}) {
		_, err = c.store.KeepVersion(oi.ino, version, note)
	}
	if err != nil {
		blob.Close()
		c.undoMove(oi.ino, version)
		if errors.Is(err, syscall.EDQUOT) {
			// No inode for the version even with the holder's trash
			// evicted: the truncate goes on unversioned, and the
			// trail says so (README, "Trash and restore").
			v.changed(opVersionNotKept, at, "", int64(oi.size))
		}
		return false
	}
	// Handles may still be splicing from the old descriptor: it stays
	// open, holding the version's content, until the last release.
	oi.retired = append(oi.retired, oi.blob)
	oi.blob = blob
	oi.newBlob = true
	oi.size, oi.persisted, oi.mtime = 0, 0, time.Now()
	c.TrashChanged()
	return true
}

// opVersionNotKept is the audit operation of a truncate whose previous
// content could not be kept for the holder's inode limit.
const opVersionNotKept = "version_not_kept"

// undoMove puts a blob moved by keepVersion back.
func (c *Core) undoMove(ino, version uint64) {
	if err := c.blobs.Move(version, ino); err != nil {
		c.log.Error("undo keep version", "ino", ino, "err", err)
	}
}
