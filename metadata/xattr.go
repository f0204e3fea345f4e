package metadata

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/shedfs/shedfs"
)

// validXattrName applies the kernel's limits to an attribute name.
func validXattrName(name string) error {
	if name == "" || len(name) > MaxXattrNameLen {
		return syscall.ERANGE
	}
	return nil
}

// GetXattr returns an extended attribute, ENODATA if absent (ENOENT if the
// inode itself is gone).
func (s *Store) GetXattr(ino uint64, name string) ([]byte, error) {
	if err := validXattrName(name); err != nil {
		return nil, err
	}
	var out []byte
	err := s.kv.View(func(tx Txn) error {
		v, err := tx.Get(xattrKey(ino, name))
		if errors.Is(err, ErrNotFound) {
			if _, err := getInode(tx, &s.keys, ino); err != nil {
				return err
			}
			return syscall.ENODATA
		}
		if err != nil {
			return fmt.Errorf("read xattr %q of %d: %w", name, ino, err)
		}
		out = append([]byte{}, v...)
		return nil
	})
	return out, err
}

// xattrKeyCost is XattrCost of a stored xattr record.
func xattrKeyCost(k, v []byte) int64 {
	return int64(shedfs.XattrOverhead + len(k) - len(xattrPrefix(0)) + len(v))
}

// XattrChange is what admitting an xattr change needs to know: the total
// XattrCost of the inode's attributes before and after, and the usage and
// limit of the inode's holder before it.
type XattrChange struct {
	Holder        shedfs.Holder
	Before, After int64
	Usage         shedfs.Usage
	Limit         shedfs.Limit
}

// SetXattr sets an extended attribute. flags XattrCreate (EEXIST if present)
// or XattrReplace (ENODATA if absent). ERANGE for a name over
// MaxXattrNameLen, E2BIG for a value over MaxXattrValueLen. ctime becomes now.
// The inode's holder is charged the change in XattrCost; admit, when not
// nil, decides it inside the transaction (its error is returned, nothing
// changed), so concurrent changes never pass a limit together.
func (s *Store) SetXattr(ino uint64, name string, value []byte, flags int, admit func(XattrChange) error) error {
	if err := validXattrName(name); err != nil {
		return err
	}
	if len(value) > MaxXattrValueLen {
		return syscall.E2BIG
	}
	if flags&^(XattrCreate|XattrReplace) != 0 || flags == XattrCreate|XattrReplace {
		return syscall.EINVAL
	}
	return s.update(func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		before, old, err := o.xattrCosts(ino, name)
		if err != nil {
			return err
		}
		exists := old > 0
		if flags&XattrCreate != 0 && exists {
			return syscall.EEXIST
		}
		if flags&XattrReplace != 0 && !exists {
			return syscall.ENODATA
		}
		after := before - old + shedfs.XattrCost(name, len(value))
		if err := o.admitXattr(n, before, after, admit); err != nil {
			return err
		}
		n.Ctime = o.now
		o.put(n)
		return o.tx.Set(xattrKey(ino, name), append([]byte{}, value...))
	})
}

// xattrCosts sums the XattrCost of ino's attributes, and returns that of
// name alone (0 if absent).
func (o *op) xattrCosts(ino uint64, name string) (total, named int64, err error) {
	key := xattrKey(ino, name)
	err = o.tx.Scan(xattrPrefix(ino), nil, func(k, v []byte) error {
		c := xattrKeyCost(k, v)
		total += c
		if string(k) == string(key) {
			named = c
		}
		return nil
	})
	return total, named, err
}

// admitXattr asks admit about n's attributes going from before to after
// bytes, then charges the difference to n's holder.
func (o *op) admitXattr(n *shedfs.Inode, before, after int64, admit func(XattrChange) error) error {
	h := shedfs.HolderOf(n.Zone)
	if admit != nil {
		u, l, err := o.admission(h)
		if err != nil {
			return err
		}
		if err := admit(XattrChange{Holder: h, Before: before, After: after, Usage: u, Limit: l}); err != nil {
			return err
		}
	}
	return o.charge(h, after-before, 0)
}

// ListXattr returns the names of an inode's extended attributes, sorted.
func (s *Store) ListXattr(ino uint64) ([]string, error) {
	var out []string
	err := s.kv.View(func(tx Txn) error {
		if _, err := getInode(tx, &s.keys, ino); err != nil {
			return err
		}
		return tx.Scan(xattrPrefix(ino), nil, func(k, _ []byte) error {
			out = append(out, string(k[9:]))
			return nil
		})
	})
	return out, err
}

// RemoveXattr deletes an extended attribute, ENODATA if absent, and
// uncharges its XattrCost.
func (s *Store) RemoveXattr(ino uint64, name string) error {
	if err := validXattrName(name); err != nil {
		return err
	}
	return s.update(func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		v, err := o.tx.Get(xattrKey(ino, name))
		if errors.Is(err, ErrNotFound) {
			return syscall.ENODATA
		} else if err != nil {
			return err
		}
		n.Ctime = o.now
		o.put(n)
		if err := o.charge(shedfs.HolderOf(n.Zone), -shedfs.XattrCost(name, len(v)), 0); err != nil {
			return err
		}
		return o.tx.Delete(xattrKey(ino, name))
	})
}
