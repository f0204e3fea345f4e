package metadata

import (
	"errors"
	"syscall"
)

// LookupNames resolves several names of directory parent in one read
// transaction, each as Lookup would: a listing that hands the kernel every
// entry with its attributes (READDIRPLUS) then opens one transaction per
// batch of names instead of one per name. recs[i] is the record names[i]
// names, or nil where Lookup would fail (absent, an invalid name, an entry
// whose inode is missing): the caller asks Lookup for those, which says
// why.
func (s *Store) LookupNames(parent uint64, names []string) ([]*Inode, error) {
	recs := make([]*Inode, len(names))
	err := s.view(func(o *op) error {
		// A View may run this twice; each run starts afresh.
		clear(recs)
		for i, name := range names {
			if lookupName(name) != nil {
				continue
			}
			child, _, err := o.entry(parent, name)
			if errors.Is(err, syscall.ENOENT) {
				continue
			}
			if err != nil {
				return err
			}
			n, err := getInode(o.tx, child)
			if errors.Is(err, syscall.ENOENT) {
				continue
			}
			if err != nil {
				return err
			}
			recs[i] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}
