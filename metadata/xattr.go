package metadata

import (
	"errors"
	"fmt"
	"syscall"
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
			if _, err := getInode(tx, ino); err != nil {
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

// SetXattr sets an extended attribute. flags XattrCreate (EEXIST if present)
// or XattrReplace (ENODATA if absent). ERANGE for a name over
// MaxXattrNameLen, E2BIG for a value over MaxXattrValueLen. ctime becomes now.
func (s *Store) SetXattr(ino uint64, name string, value []byte, flags int) error {
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
		_, err = o.tx.Get(xattrKey(ino, name))
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if flags&XattrCreate != 0 && exists {
			return syscall.EEXIST
		}
		if flags&XattrReplace != 0 && !exists {
			return syscall.ENODATA
		}
		n.Ctime = o.now
		o.put(n)
		return o.tx.Set(xattrKey(ino, name), append([]byte{}, value...))
	})
}

// ListXattr returns the names of an inode's extended attributes, sorted.
func (s *Store) ListXattr(ino uint64) ([]string, error) {
	var out []string
	err := s.kv.View(func(tx Txn) error {
		if _, err := getInode(tx, ino); err != nil {
			return err
		}
		return tx.Scan(xattrPrefix(ino), nil, func(k, _ []byte) error {
			out = append(out, string(k[9:]))
			return nil
		})
	})
	return out, err
}

// RemoveXattr deletes an extended attribute, ENODATA if absent.
func (s *Store) RemoveXattr(ino uint64, name string) error {
	if err := validXattrName(name); err != nil {
		return err
	}
	return s.update(func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		if _, err := o.tx.Get(xattrKey(ino, name)); errors.Is(err, ErrNotFound) {
			return syscall.ENODATA
		} else if err != nil {
			return err
		}
		n.Ctime = o.now
		o.put(n)
		return o.tx.Delete(xattrKey(ino, name))
	})
}
