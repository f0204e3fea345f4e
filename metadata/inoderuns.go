package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/shedfs/shedfs"
)

// Inode records are keyed by allocation order (layout.go), so the
// children of a directory made together lie together in the engine's key
// space. getInodes reads several records in one transaction with one
// engine scan per run of nearby keys instead of a point read each: a
// badger Get probes every level's tables for its key, a scan seeks once
// and steps through adjacent blocks; on etcd a run is one range request
// instead of a round trip per record. A listing's READDIRPLUS reads its
// entries' records this way (LookupNames), so that a walk of a store of
// any size reads sequential pages.

// runGap is the largest distance in allocation order between two records
// read by one scan: a scan steps over at most runGap-1 records nobody
// asked for (there is one key per order under the inode prefix), which
// costs less than a point read each.
const runGap = 8

// getInodes reads the records of inos as getInode would each: recs[i] is
// inos[i]'s record, nil where it is missing. Reads the metadata cache can
// serve are served from it, and records read from the engine are cached,
// as a Get's are.
func getInodes(tx Txn, k *keyCodec, inos []uint64) ([]*shedfs.Inode, error) {
	recs := make([]*shedfs.Inode, len(inos))
	var misses []keyWanted
	for i, ino := range inos {
		key := k.inode(ino)
		vt, cached := tx.(*viewTxn)
		if cached && vt.snap == nil {
			// Served from the cache until its first miss opens
			// the snapshot; the rest are read in runs.
			n, err := getInode(tx, k, ino)
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				return nil, err
			}
			recs[i] = n
			continue
		}
		if cached {
			v, absent, ok := vt.cached(key)
			if ok {
				if absent {
					continue
				}
				n, err := decodeInode(ino, v)
				if err != nil {
					return nil, err
				}
				recs[i] = n
				continue
			}
		}
		misses = append(misses, keyWanted{key: key, i: i})
	}
	if len(misses) == 0 {
		return recs, nil
	}
	slices.SortFunc(misses, func(a, b keyWanted) int { return bytes.Compare(a.key, b.key) })
	src, fill := tx, func([]byte, []byte) {}
	if vt, ok := tx.(*viewTxn); ok {
		src = vt.snap
		fill = func(key, val []byte) { vt.fillRead(key, val, false) }
	}
	for len(misses) > 0 {
		n := runLength(misses)
		if err := readRun(src, k, misses[:n], inos, recs, fill); err != nil {
			return nil, err
		}
		misses = misses[n:]
	}
	return recs, nil
}

// keyWanted is a key getInodes reads and where its record goes.
type keyWanted struct {
	key []byte
	i   int
}

// runLength is how many of the sorted keys, from the first, one scan
// reads: those each within runGap of the one before.
func runLength(ks []keyWanted) int {
	n := 1
	for n < len(ks) && keyIno(ks[n].key)-keyIno(ks[n-1].key) <= runGap {
		n++
	}
	return n
}

// readRun reads the records of run (sorted keys under the inode prefix)
// from src into recs, with a point read for a run of one and a scan from
// its first key to its last otherwise, handing each value read to fill.
func readRun(src Txn, k *keyCodec, run []keyWanted, inos []uint64, recs []*shedfs.Inode, fill func(key, val []byte)) error {
	if len(run) == 1 {
		w := run[0]
		v, err := src.Get(w.key)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read inode %d: %w", inos[w.i], err)
		}
		fill(w.key, v)
		recs[w.i], err = decodeInode(inos[w.i], v)
		return err
	}
	first, last := run[0].key, run[len(run)-1].key
	// The keys' common prefix bounds the scan: on etcd its range request
	// reads a page from first to the end of that prefix, not of every
	// inode record after first.
	prefix := first[:1+sharedLen(first[1:], last[1:])]
	err := src.Scan(slices.Clone(prefix), first, func(key, v []byte) error {
		if bytes.Compare(key, last) > 0 {
			return errStopScan
		}
		for len(run) > 0 && bytes.Compare(run[0].key, key) < 0 {
			run = run[1:] // absent
		}
		if len(run) == 0 || !bytes.Equal(run[0].key, key) {
			return nil
		}
		v = bytes.Clone(v)
		fill(run[0].key, v)
		// Two names of one directory may name one inode.
		for len(run) > 0 && bytes.Equal(run[0].key, key) {
			n, err := decodeInode(inos[run[0].i], v)
			if err != nil {
				return err
			}
			recs[run[0].i] = n
			run = run[1:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read inodes %d to %d: %w", k.ino(first), k.ino(last), err)
	}
	return nil
}

// sharedLen is the length of the common prefix of a and b.
func sharedLen(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
