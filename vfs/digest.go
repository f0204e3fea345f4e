package vfs

import (
	"crypto/sha256"
	"hash"

	"github.com/shedfs/shedfs"
)

// runningDigest is the SHA-256 of an open file's content while it is
// written in order from its first byte (tar, cp, a compiler, git): at
// close the daemon then knows the file's digest without reading it back,
// and records it with the size it persists (docs/design.md, "Content: checksums and scanning").
// Any other change (a write elsewhere, a truncate but to zero, fallocate)
// drops it, and the file goes to the content worker as before.
type runningDigest struct {
	h hash.Hash
	n uint64 // the content's first n bytes are hashed
}

// wroteLocked follows a write of data at off to oi, whose size was old
// before it. oi.mu must be held.
func (c *Core) wroteLocked(oi *openFile, off int64, old uint64, data []byte) {
	d := oi.digest
	switch {
	case len(data) == 0:
		return
	case d != nil && d.n == old && uint64(off) == old:
	case off == 0 && old == 0 && c.content != nil && !c.store.Shared():
		// Another daemon may write the same blob; only a file this
		// daemon alone writes is hashed here.
		d = &runningDigest{h: sha256.New()}
	default:
		oi.digest = nil
		return
	}
	d.h.Write(data)
	d.n += uint64(len(data))
	oi.digest = d
}

// resizedLocked follows a size change of oi other than a write: only an
// empty file keeps a digest (of nothing). oi.mu must be held.
func (c *Core) resizedLocked(oi *openFile, size uint64) {
	oi.digest = nil
	if size == 0 && c.content != nil && !c.store.Shared() {
		oi.digest = &runningDigest{h: sha256.New()}
	}
}

// knownLocked is the content of oi as the writes hashed it, when the
// content service needs nothing more (content.Service.Known). oi.mu must
// be held.
func (c *Core) knownLocked(oi *openFile) (shedfs.Content, bool) {
	d := oi.digest
	if d == nil || d.n != oi.size || c.content == nil {
		return shedfs.Content{}, false
	}
	return c.content.Known(oi.entry.Zone, oi.size, d.h.Sum(nil))
}

// persistWritten stores a change of oi's content with fn: with its known
// digest and verdict in the same transaction when there is one (then
// oi.known is set and the content worker is not asked), else with a
// pending mark for the worker. oi.mu must be held.
func (c *Core) persistWritten(oi *openFile, fn func(n *shedfs.Inode) error) error {
	known, ok := c.knownLocked(oi)
	if !ok {
		oi.known = nil
		_, err := c.store.UpdateWritten(oi.ino, oi.writer, fn, nil)
		return err
	}
	if _, err := c.store.UpdateWrittenKnown(oi.ino, known, fn, nil); err != nil {
		return err
	}
	oi.known = &known
	return nil
}
