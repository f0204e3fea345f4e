package metadata

import (
	"fmt"
	"sort"
	"syscall"

	"github.com/shedfs/shedfs"
)

// Usage returns what a holder stores now: its usage counters and the
// bytes only its snapshots still hold (snapshots.go).
func (s *Store) Usage(h shedfs.Holder) (shedfs.Usage, error) {
	var u shedfs.Usage
	err := s.kv.View(func(tx Txn) error {
		var err error
		if u, err = readUsage(tx, h); err != nil {
			return err
		}
		held, err := readSnapshotHeld(tx, h)
		u.Bytes += held
		return err
	})
	return u, err
}

// GetLimit returns a holder's quota (zero values mean unlimited).
func (s *Store) GetLimit(h shedfs.Holder) (shedfs.Limit, error) {
	var l shedfs.Limit
	err := s.kv.View(func(tx Txn) error {
		var err error
		l, err = readLimit(tx, h)
		return err
	})
	return l, err
}

// SetLimit sets a holder's quota. Negative values are EINVAL.
func (s *Store) SetLimit(h shedfs.Holder, l shedfs.Limit) error {
	if l.Bytes < 0 || l.Inodes < 0 {
		return fmt.Errorf("limit of %s: negative value: %w", h, syscall.EINVAL)
	}
	return s.update(func(o *op) error {
		return o.tx.Set(limitKey(h), encodePair(l.Bytes, l.Inodes))
	})
}

// Holders lists every holder with a usage or limit record, sorted.
func (s *Store) Holders() ([]shedfs.Holder, error) {
	seen := map[shedfs.Holder]bool{}
	err := s.kv.View(func(tx Txn) error {
		for _, p := range []byte{pUsage, pLimit} {
			if err := tx.Scan([]byte{p}, nil, func(k, _ []byte) error {
				seen[shedfs.Holder(k[1:])] = true
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]shedfs.Holder, 0, len(seen))
	for h := range seen {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}
