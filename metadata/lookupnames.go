package metadata

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/shedfs/shedfs"
)

// LookupNames resolves several names of directory parent in one read
// transaction, each as Lookup would: a listing that hands the kernel every
// entry with its attributes (READDIRPLUS) then opens one transaction per
// batch of names instead of one per name. recs[i] is the record names[i]
// names, or nil where Lookup would fail (absent, an invalid name, an entry
// whose inode is missing): the caller asks Lookup for those, which says
// why.
//
// The entries come from the cache while it has them; once the
// transaction reads from the engine, the rest of the batch's entries are
// read with one scan of their range instead of a point read each, and
// their inodes' records with one scan per run of nearby keys (getInodes).
func (s *Store) LookupNames(parent uint64, names []string) ([]*shedfs.Inode, error) {
	var recs []*shedfs.Inode
	err := s.view(func(o *op) error {
		// A View may run this twice; each run starts afresh.
		var scanned map[string]uint64
		children := make([]uint64, 0, len(names))
		at := make([]int, 0, len(names))
		for i, name := range names {
			if lookupName(name) != nil {
				continue
			}
			if scanned == nil && i < len(names)-1 && fromEngine(o.tx) {
				var err error
				if scanned, err = scanEntries(o.tx, o.k, parent, names[i:]); err != nil {
					return err
				}
			}
			var child uint64
			if scanned != nil {
				ino, ok := scanned[name]
				if !ok {
					continue
				}
				child = ino
			} else {
				ino, _, err := o.entry(parent, name)
				if errors.Is(err, syscall.ENOENT) {
					continue
				}
				if err != nil {
					return err
				}
				child = ino
			}
			children = append(children, child)
			at = append(at, i)
		}
		got, err := getInodes(o.tx, o.k, children)
		if err != nil {
			return err
		}
		recs = make([]*shedfs.Inode, len(names))
		for j, n := range got {
			recs[at[j]] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// fromEngine reports whether tx's further reads go to the engine rather
// than the metadata cache.
func fromEngine(tx Txn) bool {
	vt, ok := tx.(*viewTxn)
	return !ok || vt.snap != nil
}

// scanEntries reads the entries of parent from the least to the greatest
// of names (the valid ones), by name.
func scanEntries(tx Txn, k *keyCodec, parent uint64, names []string) (map[string]uint64, error) {
	var lo, hi string
	any := false
	for _, name := range names {
		if lookupName(name) != nil {
			continue
		}
		if !any || name < lo {
			lo = name
		}
		if !any || name > hi {
			hi = name
		}
		any = true
	}
	out := make(map[string]uint64, len(names))
	if !any {
		return out, nil
	}
	err := tx.Scan(k.entryPrefix(parent), k.entry(parent, lo), func(k, v []byte) error {
		name := string(k[9:])
		if name > hi {
			return errStopScan
		}
		ino, _, err := decodeEntry(v)
		if err != nil {
			return fmt.Errorf("directory %d: %w", parent, err)
		}
		out[name] = ino
		return nil
	})
	return out, err
}
