package metadata

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// A snapshot is a frozen subtree of a user's view: one header record and
// one record per entry (its path in the subtree, type, mode, owner, size,
// times, link target and the inode it was). Its regular files' content is
// shared with the live files by blob links (blobs/snapshot.go), so the
// records are all that a snapshot writes: time proportional to its
// entries, never to its bytes. The records are the snapshot's own and
// read-only; nothing in the namespace points at them, so no check of the
// namespace sees them.
//
// Keys (see doc.go):
//
//	'Y' user 0x00 name   snapshot header (JSON)
//	'y' id 0x00 path     one entry of snapshot id (JSON), in path order
//
// The entries are written first, in batches, and the header last: a
// create cut short leaves entries no header names, which Delete of the
// same id (or a create that reuses the name) removes.
const (
	pSnapshot      = 'Y'
	pSnapshotEntry = 'y'
)

// Snapshot is the header of one snapshot.
type Snapshot struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	User    string `json:"user"`
	Session string `json:"session,omitempty"`
	Path    string `json:"path"`
	// Holder is who is charged for the bytes only it holds: the holder
	// of the zone it was taken in.
	Holder  shedfs.Holder `json:"holder"`
	Created time.Time     `json:"created"`
	// Expires is when the snapshot goes by itself (zero: never).
	Expires time.Time `json:"expires,omitzero"`
	Entries int       `json:"entries"`
	Bytes   int64     `json:"bytes"`
	// Open lists the files that were open for writing when it was
	// taken: it holds their last flushed content.
	Open []string `json:"open,omitempty"`
	// Unlisted keeps it out of the listing of snapshots/ in its view
	// (a session's start, which git status there would otherwise
	// report); it is still found by name.
	Unlisted bool `json:"unlisted,omitempty"`
}

// SnapEntry is one entry of a snapshot. Path is relative to the
// snapshot's root ("" for the root itself).
type SnapEntry struct {
	Path   string    `json:"p"`
	Ino    uint64    `json:"i"`
	Mode   uint32    `json:"m"`
	Uid    uint32    `json:"u,omitempty"`
	Gid    uint32    `json:"g,omitempty"`
	Size   int64     `json:"s,omitempty"`
	Mtime  time.Time `json:"t"`
	Target string    `json:"l,omitempty"`
	Nlink  uint32    `json:"n,omitempty"`
}

// ErrSnapshotExists is the error of a create under a name in use.
var ErrSnapshotExists = errors.New("snapshot exists")

func snapshotKey(user, name string) []byte {
	return append(append(strKey(pSnapshot, user), 0), name...)
}

func snapshotEntryPrefix(id string) []byte { return append(strKey(pSnapshotEntry, id), 0) }

// snapshotBatch is how many entries one transaction writes or deletes,
// within badger's transaction size and etcd's --max-txn-ops.
const snapshotBatch = 100

// PutSnapshotEntries writes the entries of snapshot id, in batches.
func (s *Store) PutSnapshotEntries(id string, es []SnapEntry) error {
	if s.readOnly {
		return syscall.EROFS
	}
	for len(es) > 0 {
		n := min(len(es), snapshotBatch)
		batch := es[:n]
		es = es[n:]
		if err := s.kv.Update(func(tx Txn) error {
			for _, e := range batch {
				v, err := json.Marshal(e)
				if err != nil {
					return err
				}
				if err := tx.Set(append(snapshotEntryPrefix(id), e.Path...), v); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("write snapshot entries: %w", err)
		}
	}
	return nil
}

// PutSnapshot writes the header of a snapshot whose entries are written,
// ErrSnapshotExists if its user has one of that name already.
func (s *Store) PutSnapshot(sn Snapshot) error {
	if s.readOnly {
		return syscall.EROFS
	}
	v, err := json.Marshal(sn)
	if err != nil {
		return err
	}
	k := snapshotKey(sn.User, sn.Name)
	return s.kv.Update(func(tx Txn) error {
		if _, err := tx.Get(k); err == nil {
			return ErrSnapshotExists
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		return tx.Set(k, v)
	})
}

// GetSnapshot returns user's snapshot name (ENOENT if none).
func (s *Store) GetSnapshot(user, name string) (*Snapshot, error) {
	var sn *Snapshot
	err := s.kv.View(func(tx Txn) error {
		v, err := tx.Get(snapshotKey(user, name))
		if errors.Is(err, ErrNotFound) {
			return syscall.ENOENT
		} else if err != nil {
			return err
		}
		sn = &Snapshot{}
		return json.Unmarshal(v, sn)
	})
	return sn, err
}

// ListSnapshots returns the snapshots of user (of everyone if user is
// empty), by user and name.
func (s *Store) ListSnapshots(user string) ([]Snapshot, error) {
	prefix := []byte{pSnapshot}
	if user != "" {
		prefix = append(strKey(pSnapshot, user), 0)
	}
	var out []Snapshot
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan(prefix, nil, func(_, v []byte) error {
			var sn Snapshot
			if err := json.Unmarshal(v, &sn); err != nil {
				return fmt.Errorf("decode snapshot: %w", err)
			}
			out = append(out, sn)
			return nil
		})
	})
	return out, err
}

// SnapshotEntries returns the entries of snapshot id, in path order.
func (s *Store) SnapshotEntries(id string) ([]SnapEntry, error) {
	var out []SnapEntry
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan(snapshotEntryPrefix(id), nil, func(_, v []byte) error {
			var e SnapEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode snapshot entry: %w", err)
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// DeleteSnapshot removes the header of user's snapshot name (if any) and
// then the entries of id, in batches.
func (s *Store) DeleteSnapshot(user, name, id string) error {
	if s.readOnly {
		return syscall.EROFS
	}
	if err := s.kv.Update(func(tx Txn) error { return tx.Delete(snapshotKey(user, name)) }); err != nil {
		return fmt.Errorf("delete snapshot: %w", err)
	}
	prefix := snapshotEntryPrefix(id)
	for {
		var keys [][]byte
		if err := s.kv.View(func(tx Txn) error {
			return tx.Scan(prefix, nil, func(k, _ []byte) error {
				keys = append(keys, append([]byte(nil), k...))
				if len(keys) == snapshotBatch {
					return errStopScan
				}
				return nil
			})
		}); err != nil {
			return fmt.Errorf("delete snapshot entries: %w", err)
		}
		if len(keys) == 0 {
			return nil
		}
		if err := s.kv.Update(func(tx Txn) error {
			for _, k := range keys {
				if err := tx.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("delete snapshot entries: %w", err)
		}
	}
}

// pSnapshotHeld keys, per holder, the bytes (charged) that only
// snapshots still hold: 'Z' holder -> int64. Store.Usage adds them to the
// holder's usage, so admission counts them; the namespace's usage
// counters (and the check of them) do not.
const pSnapshotHeld = 'Z'

func snapshotHeldKey(h shedfs.Holder) []byte { return strKey(pSnapshotHeld, string(h)) }

func readSnapshotHeld(tx Txn, h shedfs.Holder) (int64, error) {
	v, err := tx.Get(snapshotHeldKey(h))
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("snapshot bytes of %s: bad record", h)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// SnapshotHeld returns the bytes that only h's snapshots still hold.
func (s *Store) SnapshotHeld(h shedfs.Holder) (int64, error) {
	var n int64
	err := s.kv.View(func(tx Txn) error {
		var err error
		n, err = readSnapshotHeld(tx, h)
		return err
	})
	return n, err
}

// AddSnapshotHeld adds delta to the bytes only h's snapshots hold (a
// copy-up made a shared blob theirs alone); set replaces the figure (a
// recount).
func (s *Store) AddSnapshotHeld(h shedfs.Holder, delta int64, set bool) error {
	if s.readOnly {
		return syscall.EROFS
	}
	return s.kv.Update(func(tx Txn) error {
		n := delta
		if !set {
			old, err := readSnapshotHeld(tx, h)
			if err != nil {
				return err
			}
			n += old
		}
		n = max(n, 0)
		if n == 0 {
			return tx.Delete(snapshotHeldKey(h))
		}
		return tx.Set(snapshotHeldKey(h), binary.BigEndian.AppendUint64(nil, uint64(n)))
	})
}
