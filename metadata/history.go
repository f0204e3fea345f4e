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
//	'r' nanos ino      journal: JSON {zone, kind, from, to, dir, of} (paths within the zone)

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

// The journal keeps what a restore to a point in time must undo and
// neither the trash nor the births tell (docs/design.md, "Trash and
// point-in-time restore"): every change of a name of an existing inode.
// A new inode's name needs no record (its birth says it was not there
// before), nor does a file kept in the trash while its trash record
// lasts (the record says where it was, and when it left); a file that
// leaves the trash by a restore leaves that record in the journal
// instead, dated when the file was removed.
const (
	// JournalRename: the entry moved from From to To.
	JournalRename = ""
	// JournalAdd: a new name To for an inode that already was: a hard
	// link, a file restored from the trash.
	JournalAdd = "add"
	// JournalRemove: name From went with no trash record to say so: one
	// link of several, a directory (Dir), or a kept file since restored
	// (the record its trash record became).
	JournalRemove = "rm"
	// JournalVersion: the inode was the content of inode Of, at From,
	// until then (a version kept by a truncate, since restored).
	JournalVersion = "ver"
	// JournalExchange: the entries at From and To swapped
	// (RENAME_EXCHANGE).
	JournalExchange = "x"
)

// RenameNote is what the journal keeps of a change of names: its kind,
// the paths within the zone involved, and for a version the inode it was
// the content of.
type RenameNote struct {
	Kind string `json:"k,omitempty"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	Dir  bool   `json:"d,omitempty"`
	Of   uint64 `json:"of,omitempty"`
	// Born is when a removed directory was made, unix nanos (its birth
	// record goes with it): a directory made and removed since a time
	// was not there then.
	Born int64 `json:"b,omitempty"`
	// at is the record's time, unix nanos (stamped from the trash
	// clock, so that journal and trash records of one change are in
	// the order the change made them).
	at int64
}

// RenameRecord is one journal record.
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

// stampedJournal is a copy of note with a time of its own, or nil.
func (s *Store) stampedJournal(note *RenameNote) *RenameNote {
	if note == nil {
		return nil
	}
	c := *note
	c.at = s.trashTime()
	return &c
}

// journalRename records the change note says of n (zone z).
func (o *op) journalRename(n *shedfs.Inode, note *RenameNote) error {
	return o.journal(n.Zone, n.Ino, note)
}

// journal writes a journal record of inode ino of zone z.
func (o *op) journal(z shedfs.Zone, ino uint64, note *RenameNote) error {
	v, err := json.Marshal(renameValue{Zone: z.String(), RenameNote: *note})
	if err != nil {
		return err
	}
	at := note.at
	if at == 0 {
		at = o.now.UnixNano()
	}
	return o.tx.Set(renameKey(at, ino), v)
}

// journalRemoved records that n lost name path (within its zone) with no
// trash record to say so: a directory, or a link of several. Nothing
// without a path (the trash off).
func (o *op) journalRemoved(n *shedfs.Inode, note *TrashNote) error {
	if note == nil {
		return nil
	}
	if !n.IsDir() && Keepable(n) && n.Nlink == 0 {
		return nil // its trash record says it
	}
	rec := &RenameNote{Kind: JournalRemove, From: note.Path, Dir: n.IsDir(), at: note.at}
	if n.IsDir() {
		b, err := o.birth(n.Ino)
		if err != nil {
			return err
		}
		if !b.IsZero() {
			rec.Born = b.UnixNano()
		}
	}
	return o.journal(n.Zone, n.Ino, rec)
}

// RenamesSince returns the journal records of zone z since t, oldest
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
