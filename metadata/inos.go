package metadata

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"syscall"
)

// Inode numbers are visible to every process in a view (stat, readdir), so
// they must not tell a user anything about what others do: numbers handed
// out in sequence would let carol count, from the gap between two of her
// files, how many files alice created meanwhile in a group carol cannot
// see. The store therefore keeps a sequential allocation counter (leased in
// ranges, see allocIno) and turns each counter value into an inode number
// with a keyed permutation of the 64-bit space; the key is a random secret
// kept in the store. Numbers stay unique (a permutation of distinct counter
// values) and stable (they are stored, never recomputed), and without the
// key two of them reveal nothing about how far apart they were allocated.
const (
	// SyntheticIno is never assigned by the store, so a view can give it to
	// a directory of its own that has no record (groups/).
	SyntheticIno = math.MaxUint64 - 1
	// permutedBase is the lowest number the permutation yields. Below it
	// are FUSE's root node ID 1, the numbers a view keeps for itself
	// (below FirstIno), and the sequential numbers that stores made before
	// numbers were permuted assigned from FirstIno up (the counter itself),
	// which stay valid: the two kinds never meet.
	permutedBase = 1 << 32
	// inoKeyLen is the size of the permutation key (AES-128).
	inoKeyLen = 16
	// feistelRounds is the number of Feistel rounds over 32-bit halves,
	// comfortably above the four a pseudorandom permutation needs.
	feistelRounds = 8
	// maxInoCounter bounds the counter so that every counter value maps
	// into the permuted range.
	maxInoCounter = SyntheticIno - permutedBase - 1
)

// reservedIno reports whether the permutation must never yield ino: the
// range below permutedBase and the top two values (SyntheticIno and
// MaxUint64).
func reservedIno(ino uint64) bool { return ino < permutedBase || ino >= SyntheticIno }

// inoPerm is the keyed permutation from allocation counter values to inode
// numbers: a Feistel network over 32-bit halves with AES as round function,
// cycle-walked so that it maps the non-reserved numbers onto themselves.
type inoPerm struct {
	block cipher.Block
}

func newInoPerm(key []byte) (*inoPerm, error) {
	if len(key) != inoKeyLen {
		return nil, fmt.Errorf("inode number key: %d bytes, want %d: %w", len(key), inoKeyLen, ErrCorrupt)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("inode number key: %w", err)
	}
	return &inoPerm{block: b}, nil
}

// round is the Feistel round function of round i; buf is scratch space of
// two AES blocks.
func (p *inoPerm) round(buf []byte, i int, half uint32) uint32 {
	in, out := buf[:aes.BlockSize], buf[aes.BlockSize:2*aes.BlockSize]
	clear(in)
	in[0] = byte(i)
	binary.BigEndian.PutUint32(in[1:], half)
	p.block.Encrypt(out, in)
	return binary.BigEndian.Uint32(out)
}

// forward is one pass of the permutation over the whole 64-bit space.
func (p *inoPerm) forward(x uint64) uint64 {
	buf := make([]byte, 2*aes.BlockSize)
	l, r := uint32(x>>32), uint32(x)
	for i := range feistelRounds {
		l, r = r, l^p.round(buf, i, r)
	}
	return uint64(l)<<32 | uint64(r)
}

// backward inverts forward.
func (p *inoPerm) backward(y uint64) uint64 {
	buf := make([]byte, 2*aes.BlockSize)
	l, r := uint32(y>>32), uint32(y)
	for i := feistelRounds - 1; i >= 0; i-- {
		l, r = r^p.round(buf, i, l), l
	}
	return uint64(l)<<32 | uint64(r)
}

// cycleWalk applies step until the result is not reserved. For a
// permutation step and a start x that is not reserved itself, this is a
// permutation of the non-reserved values (walking the other way with the
// inverse step undoes it); it ends because x's own cycle comes back to x.
func cycleWalk(x uint64, step func(uint64) uint64, reserved func(uint64) bool) uint64 {
	y := step(x)
	for reserved(y) {
		y = step(y)
	}
	return y
}

// number is the inode number of counter value c (c <= maxInoCounter).
func (p *inoPerm) number(c uint64) uint64 {
	return cycleWalk(c+permutedBase, p.forward, reservedIno)
}

// counter is the counter value that ino was assigned from: ino itself for
// a sequential number of an older store, and false for a reserved number
// no counter value yields.
func (p *inoPerm) counter(ino uint64) (uint64, bool) {
	switch {
	case ino < FirstIno || ino >= SyntheticIno:
		return 0, false
	case ino < permutedBase:
		return ino, true
	case p == nil:
		return 0, false
	}
	return cycleWalk(ino, p.backward, reservedIno) - permutedBase, true
}

// loadInoKey reads the permutation key, or makes one: a fresh store writes
// the returned key in its first transaction (initFresh), an older store
// without one gets it at once. A read-only open of an older store has no
// permutation and allocates nothing.
func (s *Store) loadInoKey(fresh bool) ([]byte, error) {
	var key []byte
	err := s.kv.View(func(tx Txn) error {
		v, err := tx.Get(stateKey(stateInoKey))
		if err == nil {
			key = append([]byte(nil), v...)
			return nil
		}
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read inode number key: %w", err)
	}
	if key == nil {
		if s.readOnly {
			return nil, nil
		}
		key = make([]byte, inoKeyLen)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("make inode number key: %w", err)
		}
		if !fresh {
			if err := s.kv.Update(func(tx Txn) error { return tx.Set(stateKey(stateInoKey), key) }); err != nil {
				return nil, fmt.Errorf("store inode number key: %w", err)
			}
		}
	}
	if s.inos, err = newInoPerm(key); err != nil {
		return nil, err
	}
	return key, nil
}

// nextIno turns the next counter value of the current lease into an inode
// number. s.inoMu must be held and the lease not used up.
func (s *Store) nextIno() (uint64, error) {
	c := s.inoNext
	if c > maxInoCounter {
		return 0, fmt.Errorf("inode numbers used up: %w", syscall.ENOSPC)
	}
	s.inoNext++
	if s.inos == nil {
		return 0, fmt.Errorf("no inode number key: %w", syscall.EROFS)
	}
	return s.inos.number(c), nil
}

// checkInoLease is the part of Check that keeps future numbers unique:
// the persisted counter lease ('N') must lie beyond the counter value of
// every inode, else a later allocation would hand out a number in use
// again. A repair raises the lease past the highest one.
func (s *Store) checkInoLease(inos []uint64) ([]Problem, []func(o *op) error, error) {
	var next uint64 = FirstIno
	err := s.kv.View(func(tx Txn) error {
		v, err := tx.Get(nextInoKey())
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		next, err = decodeU64(v)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read inode lease: %w", err)
	}
	var high uint64
	found := false
	for _, ino := range inos {
		c, ok := s.inos.counter(ino)
		if ok && c >= next && (!found || c > high) {
			high, found = c, true
		}
	}
	if !found {
		return nil, nil, nil
	}
	p := Problem{Kind: KindInoLease,
		Detail: fmt.Sprintf("inode counter leased up to %d, but counter value %d is in use", next, high)}
	fix := func(o *op) error {
		// The lease in memory may come from the bad counter: drop it,
		// so the next allocation leases from the repaired one.
		s.inoMu.Lock()
		s.inoNext = s.inoEnd
		s.inoMu.Unlock()
		return o.tx.Set(nextInoKey(), encodeU64(high+1))
	}
	return []Problem{p}, []func(o *op) error{fix}, nil
}
