package metadata

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shedfs/shedfs"
)

// History is what a restore to a point in time needs beyond the trash:
// when each inode was made (its birth, which no POSIX time keeps: ctime
// moves with every change), and a journal of renames with the paths they
// moved between. Both are written in the transaction of the change; the
// journal is pruned with the trash's retention.
//
//	'b' ino            birth, unix nanos u64 BE
//	'r' nanos ino      rename: JSON {zone, from, to} (paths within the zone)

const (
	pBirth  = 'b'
	pRename = 'r'
)

func birthKey(ino uint64) []byte { return inoKey(pBirth, ino) }

func renameKey(nanos int64, ino uint64) []byte {
	k := []byte{pRename}
	k = binary.BigEndian.AppendUint64(k, uint64(nanos))
	return binary.BigEndian.AppendUint64(k, ino)
}

// setBirth records when ino was made.
func (o *op) setBirth(ino uint64, t time.Time) error {
	return o.tx.Set(birthKey(ino), encodeU64(uint64(t.UnixNano())))
}

// birth returns when ino was made; the zero time when unknown (an inode
// made before births were kept), which counts as long ago.
func (o *op) birth(ino uint64) (time.Time, error) {
	v, err := o.tx.Get(birthKey(ino))
	if errors.Is(err, ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	n, err := decodeU64(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("birth of %d: %w", ino, err)
	}
	return time.Unix(0, int64(n)), nil
}

// Birth returns when ino was made (the zero time when unknown).
func (s *Store) Birth(ino uint64) (time.Time, error) {
	var t time.Time
	err := s.view(func(o *op) error {
		var err error
		t, err = o.birth(ino)
		return err
	})
	return t, err
}

// RenameNote is what the journal keeps of a rename: the paths within the
// zone that the entry moved from and to.
type RenameNote struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// RenameRecord is one journaled rename.
type RenameRecord struct {
	Time time.Time
	Ino  uint64
	Zone shedfs.Zone
	RenameNote
}

type renameValue struct {
	Zone string `json:"z"`
	RenameNote
}

// journalRename records that n moved as note says.
func (o *op) journalRename(n *shedfs.Inode, note *RenameNote) error {
	v, err := json.Marshal(renameValue{Zone: n.Zone.String(), RenameNote: *note})
	if err != nil {
		return err
	}
	return o.tx.Set(renameKey(o.now.UnixNano(), n.Ino), v)
}

// RenamesSince returns the journaled renames in zone z since t, oldest
// first.
func (s *Store) RenamesSince(z shedfs.Zone, t time.Time) ([]RenameRecord, error) {
	var out []RenameRecord
	start := renameKey(t.UnixNano(), 0)
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pRename}, start, func(k, v []byte) error {
			if len(k) != 17 {
				return nil
			}
			var rv renameValue
			if err := json.Unmarshal(v, &rv); err != nil {
				return fmt.Errorf("rename journal %x: %w", k, ErrCorrupt)
			}
			if rv.Zone != z.String() {
				return nil
			}
			out = append(out, RenameRecord{
				Time: time.Unix(0, int64(binary.BigEndian.Uint64(k[1:9]))),
				Ino:  binary.BigEndian.Uint64(k[9:]), Zone: z, RenameNote: rv.RenameNote,
			})
			return nil
		})
	})
	return out, err
}

// pruneRenames drops journal records older than cutoff.
func (s *Store) pruneRenames(cutoff time.Time) error {
	var keys [][]byte
	end := renameKey(cutoff.UnixNano(), 0)
	if err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pRename}, nil, func(k, _ []byte) error {
			if string(k) >= string(end) {
				return errStopScan
			}
			keys = append(keys, slices.Clone(k))
			return nil
		})
	}); err != nil {
		return err
	}
	for batch := range slices.Chunk(keys, 1000) {
		if err := s.update(func(o *op) error {
			for _, k := range batch {
				if err := o.tx.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
