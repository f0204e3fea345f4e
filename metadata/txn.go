package metadata

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// op is the state of one attempt of one read-write transaction: the inodes
// it has read (so that two roles of the same inode share one copy, as when
// a parent is also the replaced entry's parent) and which of them to write
// back. A fresh op is made for every retry.
type op struct {
	tx     Txn
	k      *keyCodec // the store's keys (layout.go)
	now    time.Time
	inodes map[uint64]*shedfs.Inode
	dirty  []uint64
	trash  trashDelta // what it changed in the trash (trashtally.go)
}

// update runs fn as one read-write transaction and writes back every inode
// fn marked dirty.
func (s *Store) update(fn func(o *op) error) error {
	if s.readOnly {
		return syscall.EROFS
	}
	var last *op
	err := s.kv.Update(func(tx Txn) error {
		o := &op{tx: tx, k: &s.keys, now: time.Now(), inodes: make(map[uint64]*shedfs.Inode, 4)}
		last = o
		if err := fn(o); err != nil {
			return err
		}
		return o.flush()
	})
	if err == nil {
		s.commits.Add(1)
		s.trash.apply(last.trash)
	}
	return err
}

// view runs fn in a read-only snapshot.
func (s *Store) view(fn func(o *op) error) error {
	return s.kv.View(func(tx Txn) error {
		return fn(&op{tx: tx, k: &s.keys, inodes: make(map[uint64]*shedfs.Inode, 2)})
	})
}

// inode reads an inode (once per op), ENOENT if it does not exist.
func (o *op) inode(ino uint64) (*shedfs.Inode, error) {
	if n, ok := o.inodes[ino]; ok {
		if n == nil {
			return nil, syscall.ENOENT
		}
		return n, nil
	}
	n, err := getInode(o.tx, o.k, ino)
	if err != nil {
		return nil, err
	}
	o.inodes[ino] = n
	return n, nil
}

// getInode reads one inode record from a transaction.
func getInode(tx Txn, k *keyCodec, ino uint64) (*shedfs.Inode, error) {
	v, err := tx.Get(k.inode(ino))
	if errors.Is(err, ErrNotFound) {
		return nil, syscall.ENOENT
	}
	if err != nil {
		return nil, fmt.Errorf("read inode %d: %w", ino, err)
	}
	return decodeInode(ino, v)
}

// dir reads a live directory: ENOENT if missing or already removed, ENOTDIR
// if it is something else.
func (o *op) dir(ino uint64) (*shedfs.Inode, error) {
	n, err := o.inode(ino)
	if err != nil {
		return nil, err
	}
	if !n.IsDir() {
		return nil, syscall.ENOTDIR
	}
	if n.Nlink == 0 {
		return nil, syscall.ENOENT
	}
	return n, nil
}

// put records a new or changed inode for write-back at commit.
func (o *op) put(n *shedfs.Inode) {
	if _, ok := o.inodes[n.Ino]; !ok {
		o.inodes[n.Ino] = n
	}
	for _, d := range o.dirty {
		if d == n.Ino {
			return
		}
	}
	o.dirty = append(o.dirty, n.Ino)
}

// forget drops an inode from write-back (it was deleted).
func (o *op) forget(ino uint64) {
	o.inodes[ino] = nil
	for i, d := range o.dirty {
		if d == ino {
			o.dirty = append(o.dirty[:i], o.dirty[i+1:]...)
			return
		}
	}
}

func (o *op) flush() error {
	for _, ino := range o.dirty {
		if err := o.tx.Set(o.k.inode(ino), encodeInode(o.inodes[ino])); err != nil {
			return fmt.Errorf("write inode %d: %w", ino, err)
		}
	}
	o.dirty = nil
	return nil
}

// entry looks up a directory entry: child inode and file type.
func (o *op) entry(parent uint64, name string) (uint64, uint32, error) {
	v, err := o.tx.Get(o.k.entry(parent, name))
	if errors.Is(err, ErrNotFound) {
		return 0, 0, syscall.ENOENT
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read entry %d/%q: %w", parent, name, err)
	}
	return decodeEntry(v)
}

func (o *op) setEntry(parent uint64, name string, child *shedfs.Inode) error {
	return o.tx.Set(o.k.entry(parent, name), entryValue(child.Ino, child.Mode))
}

// isEmptyDir reports whether a directory has no entries.
func (o *op) isEmptyDir(ino uint64) (bool, error) {
	empty := true
	err := o.tx.Scan(o.k.entryPrefix(ino), nil, func(_, _ []byte) error {
		empty = false
		return errStopScan
	})
	return empty, err
}

// usage reads a holder's usage counters.
func (o *op) usage(h shedfs.Holder) (shedfs.Usage, error) {
	return readUsage(o.tx, h)
}

func readUsage(tx Txn, h shedfs.Holder) (shedfs.Usage, error) {
	v, err := tx.Get(usageKey(h))
	if errors.Is(err, ErrNotFound) {
		return shedfs.Usage{}, nil
	}
	if err != nil {
		return shedfs.Usage{}, fmt.Errorf("read usage of %s: %w", h, err)
	}
	b, i, err := decodePair(v)
	if err != nil {
		return shedfs.Usage{}, fmt.Errorf("usage of %s: %w", h, err)
	}
	return shedfs.Usage{Bytes: b, Inodes: i}, nil
}

// quota reads h's usage and limit in the transaction, for an admission
// decided with the change that needs it; for a holder nested in another
// (a session in its user), the tighter of the two (shedfs.Tighter).
func (o *op) quota(h shedfs.Holder) (shedfs.Usage, shedfs.Limit, error) {
	u, err := o.usage(h)
	if err != nil {
		return shedfs.Usage{}, shedfs.Limit{}, err
	}
	l, err := readLimit(o.tx, h)
	if err != nil {
		return u, l, err
	}
	if outer, ok := shedfs.OuterHolder(h); ok {
		ou, err := o.usage(outer)
		if err != nil {
			return u, l, err
		}
		ol, err := readLimit(o.tx, outer)
		if err != nil {
			return u, l, err
		}
		u, l = shedfs.Tighter(u, l, ou, ol)
	}
	return u, l, nil
}

func readLimit(tx Txn, h shedfs.Holder) (shedfs.Limit, error) {
	v, err := tx.Get(limitKey(h))
	if errors.Is(err, ErrNotFound) {
		return shedfs.Limit{}, nil
	}
	if err != nil {
		return shedfs.Limit{}, fmt.Errorf("read limit of %s: %w", h, err)
	}
	b, i, err := decodePair(v)
	if err != nil {
		return shedfs.Limit{}, fmt.Errorf("limit of %s: %w", h, err)
	}
	return shedfs.Limit{Bytes: b, Inodes: i}, nil
}

// charge moves a holder's usage by the given deltas, and that of the
// holder it nests in (a session's user) by the same.
func (o *op) charge(h shedfs.Holder, bytes, inodes int64) error {
	if bytes == 0 && inodes == 0 {
		return nil
	}
	if outer, ok := shedfs.OuterHolder(h); ok {
		if err := o.charge(outer, bytes, inodes); err != nil {
			return err
		}
	}
	return o.chargeOnly(h, bytes, inodes)
}

// chargeOnly moves h's usage alone, not that of the holder it nests in:
// for a charge that moves from a session to its user, who had it
// already.
func (o *op) chargeOnly(h shedfs.Holder, bytes, inodes int64) error {
	u, err := o.usage(h)
	if err != nil {
		return err
	}
	u.Bytes += bytes
	u.Inodes += inodes
	return o.tx.Set(usageKey(h), encodePair(u.Bytes, u.Inodes))
}

// chargeOf is what an inode costs its holder in bytes: only regular files
// have contents.
func chargeOf(n *shedfs.Inode) int64 {
	if n.IsRegular() {
		return shedfs.Charge(n.Size)
	}
	return 0
}

// dropLink removes one name of n (all of them for a directory, whose only
// name is going) and leaves an orphan record when none remain.
func (o *op) dropLink(n *shedfs.Inode) error {
	o.loseLink(n)
	if n.Nlink == 0 {
		return o.tx.Set(orphanKey(n.Ino), []byte{})
	}
	return nil
}

// loseLink is dropLink without marking an inode left without links as an
// orphan.
func (o *op) loseLink(n *shedfs.Inode) {
	if n.IsDir() || n.Nlink <= 1 {
		n.Nlink = 0
	} else {
		n.Nlink--
	}
	n.Ctime = o.now
	o.put(n)
}

// touchDir sets a directory's mtime and ctime to now.
func (o *op) touchDir(d *shedfs.Inode) {
	d.Mtime, d.Ctime = o.now, o.now
	o.put(d)
}
