package metadata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
)

// The key layout of inode records and directory entries.
//
// Inode numbers are permuted (inos.go) so that they reveal nothing, which
// spreads the numbers of inodes made one after another over the whole
// 64-bit space. Keyed by that number, every new inode record landed at a
// random place in the engine's key space: a create rewrote a random table
// block at every compaction level, and a walk of a directory's files read
// one table block per file, from anywhere. So the records are keyed by
// allocation order instead: the key of inode ino holds the permutation's
// inverse of ino, the counter value it was made from (plus 2^32; the
// sequential numbers of stores made before numbers were permuted stay as
// they are, and sort first). The permutation being a bijection, the key
// still names exactly one number, and ino is the permutation of the key.
// Only the key changes: the records hold, and everything outside this
// package sees, the permuted numbers (the kernel, xattrs, the API).
// Directory entries are keyed by their directory's allocation order too,
// so the entries of directories made together lie together.
//
// Schema version 1 kept the same records keyed by inode number, under
// other prefix bytes (pInodeV1, pEntryV1). A writable open of such a store
// moves every record to its new key, a batch at a time, each batch one
// transaction (a record is at its old key or at its new one, never both or
// neither), and writes the schema version last: a migration cut short is
// finished by the next writable open, which moves what is left. A
// read-only open of a version 1 store reads it as it is
// (formatV1Codec); one of a store that holds records of both forms (a
// migration cut short) is flagged, and Check reports it and nothing else.

// keyCodec makes and reads the keys of inode records and directory
// entries of one store.
type keyCodec struct {
	// perm turns allocation order into inode numbers; nil keys records
	// by number (schema version 1, and stores without a number key).
	perm           *inoPerm
	pInode, pEntry byte
	// memo keeps the order of recently keyed numbers (nil: none).
	memo *orderMemo
}

// orderMemo remembers the order of the numbers keyed lately: the
// permutation costs eight AES blocks, about 0.3 µs, and a create or a
// lookup keys its directory's number several times (its entry, its
// record) and the new inode's twice; without it the permutation took 9% of
// the CPU of BenchmarkCreateLookup. Each slot holds an immutable pair, so
// a reader needs no lock; a miss computes the order and replaces the slot.
type orderMemo struct {
	slots [orderMemoSlots]atomic.Pointer[[2]uint64]
}

// orderMemoSlots is the memo's size: 8 KiB of pointers, plus 16 bytes a
// filled slot.
const orderMemoSlots = 1024

func newKeyCodec(perm *inoPerm) keyCodec {
	return keyCodec{perm: perm, pInode: pInode, pEntry: pEntry, memo: &orderMemo{}}
}

// formatV1Codec reads a store of schema version 1.
var formatV1Codec = keyCodec{pInode: pInodeV1, pEntry: pEntryV1}

// order is the position of ino in the key space: the counter value it was
// made from, plus 2^32, for a permuted number; the number itself for the
// others (the sequential numbers of older stores, and the reserved ones no
// counter value yields).
func (k *keyCodec) order(ino uint64) uint64 {
	if k.perm == nil || reservedIno(ino) {
		return ino
	}
	if k.memo == nil {
		return cycleWalk(ino, k.perm.backward, reservedIno)
	}
	// Permuted numbers are spread evenly: their low bits pick the slot.
	slot := &k.memo.slots[ino%orderMemoSlots]
	if p := slot.Load(); p != nil && p[0] == ino {
		return p[1]
	}
	ord := cycleWalk(ino, k.perm.backward, reservedIno)
	slot.Store(&[2]uint64{ino, ord})
	return ord
}

// number inverts order.
func (k *keyCodec) number(ord uint64) uint64 {
	if k.perm == nil || reservedIno(ord) {
		return ord
	}
	return cycleWalk(ord, k.perm.forward, reservedIno)
}

func (k *keyCodec) inode(ino uint64) []byte { return inoKey(k.pInode, k.order(ino)) }
func (k *keyCodec) entry(parent uint64, name string) []byte {
	return inoNameKey(k.pEntry, k.order(parent), name)
}
func (k *keyCodec) entryPrefix(parent uint64) []byte { return inoKey(k.pEntry, k.order(parent)) }

// ino reads the inode number of an inode record's or an entry's key (the
// directory's, for an entry).
func (k *keyCodec) ino(key []byte) uint64 { return k.number(keyIno(key)) }

// layoutState is what an open found of the two layouts.
type layoutState struct {
	version  uint64
	old, new bool // records keyed the version 1 way, the version 2 way
}

// readLayout looks for records of either layout.
func readLayout(kv KV, version uint64) (layoutState, error) {
	st := layoutState{version: version}
	err := kv.View(func(tx Txn) error {
		for _, p := range []struct {
			prefix byte
			found  *bool
		}{{pInodeV1, &st.old}, {pEntryV1, &st.old}, {pInode, &st.new}, {pEntry, &st.new}} {
			if *p.found {
				continue
			}
			if err := tx.Scan([]byte{p.prefix}, nil, func(_, _ []byte) error {
				*p.found = true
				return errStopScan
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return st, err
}

// needsMigration reports whether a writable open must move records.
func (st layoutState) needsMigration() bool { return st.version == schemaVersionV1 || st.old }

// halfMigrated reports whether the store holds records of both layouts, or
// of the new one under the old version: a migration was cut short.
func (st layoutState) halfMigrated() bool {
	return (st.old && st.new) || (st.version == schemaVersionV1 && st.new) || (st.version == schemaVersion && st.old)
}

// migrateBatchStart is how many records one migration transaction moves
// at first: two writes each, within badger's transaction size and the
// --max-txn-ops the README asks etcd for. A batch too big for the engine
// is halved.
const migrateBatchStart = 1024

// migrateLayout moves every record of the version 1 layout to its key in
// the version 2 one, then writes the schema version. Only a writable open
// calls it, before anything else uses the store: on badger the directory
// lock keeps every other process out; on etcd the caller has made sure
// no other daemon serves the store.
func migrateLayout(kv KV, codec *keyCodec) (moved int, err error) {
	batch := migrateBatchStart
	for _, p := range [][2]byte{{pInodeV1, pInode}, {pEntryV1, pEntry}} {
		// Each batch starts after the last key the one before moved:
		// from the prefix itself, it would step over the tombstones of
		// every record moved so far, again and again.
		var start []byte
		for {
			n, last, err := migrateBatch(kv, codec, p[0], p[1], start, batch)
			if err != nil && isTxnTooBig(err) && batch > 1 {
				batch /= 2
				continue
			}
			if err != nil {
				return moved, fmt.Errorf("move %c records: %w", p[0], err)
			}
			moved += n
			if n == 0 {
				break
			}
			start = append(last, 0)
		}
	}
	if err := kv.Update(func(tx Txn) error { return tx.Set(versionKey(), encodeU64(schemaVersion)) }); err != nil {
		return moved, fmt.Errorf("write the schema version: %w", err)
	}
	return moved, kv.Sync()
}

// migrateBatch moves up to max records of prefix from, from start on (nil:
// the first), to prefix to, in one transaction, and says how many it
// moved (0: none left) and the last key it moved.
func migrateBatch(kv KV, codec *keyCodec, from, to byte, start []byte, max int) (int, []byte, error) {
	var n int
	var last []byte
	err := kv.Update(func(tx Txn) error {
		type rec struct{ k, v []byte }
		var recs []rec
		n, last = 0, nil
		if err := tx.Scan([]byte{from}, start, func(k, v []byte) error {
			recs = append(recs, rec{bytes.Clone(k), bytes.Clone(v)})
			if len(recs) >= max {
				return errStopScan
			}
			return nil
		}); err != nil {
			return err
		}
		for _, r := range recs {
			if err := tx.Set(migratedKey(codec, to, r.k), r.v); err != nil {
				return err
			}
			if err := tx.Delete(r.k); err != nil {
				return err
			}
		}
		n = len(recs)
		if n > 0 {
			last = recs[n-1].k
		}
		return nil
	})
	return n, last, err
}

// migratedKey is the version 2 key of the version 1 key k: the prefix
// byte to, the order of the number k holds, and the rest of k (an entry's
// name). A key too short to hold a number keeps its bytes, for Check to
// judge.
func migratedKey(codec *keyCodec, to byte, k []byte) []byte {
	if len(k) < 9 {
		return append([]byte{to}, k[1:]...)
	}
	out := make([]byte, 9, len(k))
	out[0] = to
	binary.BigEndian.PutUint64(out[1:], codec.order(binary.BigEndian.Uint64(k[1:9])))
	return append(out, k[9:]...)
}

// openLayout picks the key layout of the store being opened, migrating a
// version 1 store (or finishing a migration cut short) on a writable open.
func (s *Store) openLayout(kv KV, dir string, version uint64, fresh bool) error {
	v2 := newKeyCodec(s.inos)
	if fresh {
		s.keys = v2
		return nil
	}
	st, err := readLayout(kv, version)
	if err != nil {
		return fmt.Errorf("open store %s: read the key layout: %w", dir, err)
	}
	switch {
	case s.readOnly && st.halfMigrated():
		s.keys, s.halfMigrated = v2, true
		s.log.Warn("metadata store is half way through its layout migration; a writable open finishes it", "dir", dir)
		return nil
	case s.readOnly && version == schemaVersionV1:
		s.keys = formatV1Codec
		return nil
	case s.readOnly || !st.needsMigration():
		if s.inos == nil {
			return fmt.Errorf("open store %s: no inode number key: %w", dir, ErrCorrupt)
		}
		s.keys = v2
		return nil
	}
	if e, ok := kv.(*etcdKV); ok {
		peers, err := e.peers()
		if err != nil {
			return fmt.Errorf("open store %s: migrate the key layout: %w", dir, err)
		}
		if len(peers) > 0 {
			return fmt.Errorf("open store %s: the store has the key layout of version %d and %d daemon(s) of an older shedfs serve it: stop them, then start one daemon to migrate it: %w", dir, version, len(peers), ErrSchema)
		}
	}
	start := time.Now()
	moved, err := migrateLayout(kv, &v2)
	if err != nil {
		return fmt.Errorf("open store %s: migrate the key layout (a later open resumes it): %w", dir, err)
	}
	s.log.Info("metadata store migrated to keys in allocation order", "dir", dir, "records", moved, "took", time.Since(start).Round(time.Millisecond))
	s.keys = v2
	return nil
}

// countLayout counts the records of both layouts, for Check's report of a
// half-migrated store.
func countLayout(kv KV) (old, new int, err error) {
	err = kv.View(func(tx Txn) error {
		for _, p := range []struct {
			prefix byte
			n      *int
		}{{pInodeV1, &old}, {pEntryV1, &old}, {pInode, &new}, {pEntry, &new}} {
			if err := tx.Scan([]byte{p.prefix}, nil, func(_, _ []byte) error {
				*p.n++
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return old, new, err
}
