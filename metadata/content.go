package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/shedfs/shedfs"
)

// The content records of docs/design.md, "Content: checksums and scanning": per inode, the digest
// and scan verdict of its content ('H'), the mark that its content changed
// and awaits both ('P', the persisted work queue), and the quarantine
// index of infected files ('F'). Each is written in a small transaction of
// its own, except the pending mark, which a content change writes in the
// same transaction as the size it persists (UpdateWritten), so that no
// crash can leave a changed file looking verified.

// Content is shedfs.Content.
type Content = shedfs.Content

// contentRecord is the 'H' value.
type contentRecord struct {
	Gen    uint64           `json:"g,omitempty"` // the pending mark the digest was made for
	SHA256 string           `json:"d,omitempty"`
	State  shedfs.ScanState `json:"s"`
	Detail string           `json:"x,omitempty"`
}

// pendingRecord is the 'P' value.
type pendingRecord struct {
	Gen    uint64 `json:"g"`
	Writer string `json:"w,omitempty"`
}

// Pending is one entry of the persisted content queue.
type Pending struct {
	Ino    uint64
	Gen    uint64
	Writer string
}

func contentKey(ino uint64) []byte    { return inoKey(pContent, ino) }
func pendingKey(ino uint64) []byte    { return inoKey(pPending, ino) }
func quarantineKey(ino uint64) []byte { return inoKey(pQuarantine, ino) }

// getRecord reads a JSON record, reporting whether it exists.
func getRecord(tx Txn, key []byte, what string, v any) (bool, error) {
	err := getJSON(tx, key, what, v)
	if errors.Is(err, syscall.ENOENT) {
		return false, nil
	}
	return err == nil, err
}

// markPending records that ino's content changed, by writer's view.
func (o *op) markPending(ino uint64, writer string) error {
	var p pendingRecord
	if _, err := getRecord(o.tx, pendingKey(ino), "pending record", &p); err != nil {
		return err
	}
	p.Gen = max(p.Gen+1, uint64(o.now.UnixNano()))
	p.Writer = writer
	return setJSON(o.tx, pendingKey(ino), p)
}

// UpdateWritten is Update for a change of a file's content (a write
// persisted, a truncate): in the same transaction it marks the content
// pending, by the view of writer, for the digest and the scan.
func (s *Store) UpdateWritten(ino uint64, writer string, fn func(n *shedfs.Inode) error, admit func(u shedfs.Usage, l shedfs.Limit, delta int64) error) (*shedfs.Inode, error) {
	return s.updateInode(ino, fn, admit, func(o *op) error { return o.markPending(ino, writer) })
}

// UpdateWrittenKnown is UpdateWritten for a change whose digest and
// verdict c are known as it is persisted (a file hashed as it was written,
// in a zone no scanner examines): the same transaction records them in
// place of the pending mark, so that nothing needs to read the file back,
// and a pending mark of an earlier change goes (its verdict, if the worker
// still finds one, is then stale and not stored).
func (s *Store) UpdateWrittenKnown(ino uint64, c Content, fn func(n *shedfs.Inode) error, admit func(u shedfs.Usage, l shedfs.Limit, delta int64) error) (*shedfs.Inode, error) {
	return s.updateInode(ino, fn, admit, func(o *op) error { return o.setKnown(ino, c) })
}

// setKnown stores c as the verdict of a new change of ino's content.
func (o *op) setKnown(ino uint64, c Content) error {
	var p pendingRecord
	hasP, err := getRecord(o.tx, pendingKey(ino), "pending record", &p)
	if err != nil {
		return err
	}
	gen := max(p.Gen+1, uint64(o.now.UnixNano()))
	if err := o.putContent(ino, contentRecord{Gen: gen, SHA256: c.SHA256, State: c.State, Detail: c.Detail}); err != nil {
		return err
	}
	if !hasP {
		return nil
	}
	return o.tx.Delete(pendingKey(ino))
}

// MarkPending marks ino's content pending on its own, for a content
// change made outside a view (an import's replaced content).
func (s *Store) MarkPending(ino uint64, writer string) error {
	return s.update(func(o *op) error { return o.markPending(ino, writer) })
}

// Content returns what is known of ino's content. A pending file carries
// its writer, and its digest only when it was made for the latest change.
func (s *Store) Content(ino uint64) (Content, error) {
	var c Content
	err := s.kv.View(func(tx Txn) error {
		var h contentRecord
		var p pendingRecord
		hasH, err := getRecord(tx, contentKey(ino), "content record", &h)
		if err != nil {
			return err
		}
		hasP, err := getRecord(tx, pendingKey(ino), "pending record", &p)
		if err != nil {
			return err
		}
		switch {
		case hasP:
			c = Content{State: shedfs.ScanPending, Writer: p.Writer}
			if hasH && h.Gen == p.Gen {
				c.SHA256 = h.SHA256
			}
		case hasH:
			c = Content{SHA256: h.SHA256, State: h.State, Detail: h.Detail}
		}
		return nil
	})
	return c, err
}

// PendingContent lists up to limit entries of the content queue with an
// inode number above after, in inode order.
func (s *Store) PendingContent(after uint64, limit int) ([]Pending, error) {
	var out []Pending
	if after == ^uint64(0) {
		return nil, nil
	}
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pPending}, pendingKey(after+1), func(k, v []byte) error {
			var p pendingRecord
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("decode pending record: %w", err)
			}
			out = append(out, Pending{Ino: keyIno(k), Gen: p.Gen, Writer: p.Writer})
			if len(out) >= limit {
				return errStopScan
			}
			return nil
		})
	})
	return out, err
}

// PendingGen returns the generation of ino's pending mark, 0 if none.
func (s *Store) PendingGen(ino uint64) (uint64, error) {
	var p pendingRecord
	err := s.kv.View(func(tx Txn) error {
		_, err := getRecord(tx, pendingKey(ino), "pending record", &p)
		return err
	})
	return p.Gen, err
}

// SetDigest stores the digest made for pending mark gen, unless the
// content changed again meanwhile; it reports whether it did.
func (s *Store) SetDigest(ino, gen uint64, sha string) (bool, error) {
	stored := false
	err := s.update(func(o *op) error {
		stored = false
		var p pendingRecord
		hasP, err := getRecord(o.tx, pendingKey(ino), "pending record", &p)
		if err != nil || !hasP || p.Gen != gen {
			return err
		}
		var h contentRecord
		if _, err := getRecord(o.tx, contentKey(ino), "content record", &h); err != nil {
			return err
		}
		h.Gen, h.SHA256 = gen, sha
		stored = true
		return setJSON(o.tx, contentKey(ino), h)
	})
	return stored, err
}

// SetVerdict ends pending mark gen with its digest and verdict, unless
// the content changed again meanwhile (it then reports false). gen 0
// writes the record whatever is pending (an import before it is named).
func (s *Store) SetVerdict(ino, gen uint64, c Content) (bool, error) {
	stored, err := s.SetVerdicts([]Verdict{{Ino: ino, Gen: gen, Content: c}})
	if err != nil {
		return false, err
	}
	return stored[0], nil
}

// Verdict is the digest and scan result for one pending mark.
type Verdict struct {
	Ino, Gen uint64
	Content  Content
}

// SetVerdicts is SetVerdict for several files in one transaction (the
// worker's batch): stored[i] reports whether vs[i] was still current.
func (s *Store) SetVerdicts(vs []Verdict) (stored []bool, err error) {
	stored = make([]bool, len(vs))
	err = s.update(func(o *op) error {
		for i, v := range vs {
			ok, err := o.setVerdict(v)
			if err != nil {
				return err
			}
			stored[i] = ok
		}
		return nil
	})
	return stored, err
}

func (o *op) setVerdict(v Verdict) (bool, error) {
	var p pendingRecord
	hasP, err := getRecord(o.tx, pendingKey(v.Ino), "pending record", &p)
	if err != nil {
		return false, err
	}
	if v.Gen != 0 && (!hasP || p.Gen != v.Gen) {
		return false, nil
	}
	if v.Gen == 0 {
		if _, err := o.inode(v.Ino); err != nil {
			return false, err
		}
	}
	c := v.Content
	if err := o.putContent(v.Ino, contentRecord{Gen: v.Gen, SHA256: c.SHA256, State: c.State, Detail: c.Detail}); err != nil {
		return false, err
	}
	if !hasP {
		return true, nil
	}
	return true, o.tx.Delete(pendingKey(v.Ino))
}

// putContent writes an 'H' record and keeps the quarantine index in step
// (a tombstone only when it held the inode).
func (o *op) putContent(ino uint64, h contentRecord) error {
	var old contentRecord
	had, err := getRecord(o.tx, contentKey(ino), "content record", &old)
	if err != nil {
		return err
	}
	if err := setJSON(o.tx, contentKey(ino), h); err != nil {
		return err
	}
	switch {
	case h.State == shedfs.ScanInfected:
		return o.tx.Set(quarantineKey(ino), []byte(h.Detail))
	case had && old.State == shedfs.ScanInfected:
		return o.tx.Delete(quarantineKey(ino))
	}
	return nil
}

// Quarantined is one infected file.
type Quarantined struct {
	Ino       uint64
	Signature string
}

// Quarantine lists the infected files.
func (s *Store) Quarantine() ([]Quarantined, error) {
	var out []Quarantined
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pQuarantine}, nil, func(k, v []byte) error {
			out = append(out, Quarantined{Ino: keyIno(k), Signature: string(v)})
			return nil
		})
	})
	return out, err
}

// Release ends the quarantine of ino: the admin decided it is clean. It
// is ENOENT when ino is not quarantined.
func (s *Store) Release(ino uint64) error {
	return s.update(func(o *op) error {
		var h contentRecord
		has, err := getRecord(o.tx, contentKey(ino), "content record", &h)
		if err != nil {
			return err
		}
		if !has || h.State != shedfs.ScanInfected {
			return fmt.Errorf("inode %d is not quarantined: %w", ino, ErrNotQuarantined)
		}
		h.State, h.Detail = shedfs.ScanClean, "released"
		return o.putContent(ino, h)
	})
}

// ErrNotQuarantined is Release of a file that is not infected.
var ErrNotQuarantined = errors.New("not quarantined")

// Digests calls fn for every inode whose digest is current (no change
// pending), for fsck --verify-content.
func (s *Store) Digests(fn func(ino uint64, sha string) error) error {
	return s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{pContent}, nil, func(k, v []byte) error {
			var h contentRecord
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("decode content record: %w", err)
			}
			ino := keyIno(k)
			if h.SHA256 == "" {
				return nil
			}
			if _, err := tx.Get(pendingKey(ino)); err == nil {
				return nil
			}
			return fn(ino, h.SHA256)
		})
	})
}

// deleteContent removes an inode's content records with the inode.
func (o *op) deleteContent(ino uint64) error {
	for _, k := range [][]byte{contentKey(ino), pendingKey(ino), quarantineKey(ino)} {
		if err := o.tx.Delete(k); err != nil {
			return fmt.Errorf("delete content of %d: %w", ino, err)
		}
	}
	return nil
}

// Name is one directory entry naming an inode, and the entry's path from
// its zone root ("dir/file").
type Name struct {
	Parent uint64
	Name   string
	Path   string
}

// NamesOf finds every entry naming ino, with its path in its zone. It
// scans every directory entry of the store: it serves the quarantine
// commands, which are rare, and keeps the hot schema free of back links.
func (s *Store) NamesOf(ino uint64) ([]Name, error) {
	type up struct {
		parent uint64
		name   string
	}
	dirs := map[uint64]up{}
	var out []Name
	err := s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{s.keys.pEntry}, nil, func(k, v []byte) error {
			child, mode, err := decodeEntry(v)
			if err != nil || len(k) < 9 {
				return nil
			}
			parent, name := s.keys.ino(k), string(k[9:])
			if mode == syscall.S_IFDIR {
				dirs[child] = up{parent, name}
			}
			if child == ino {
				out = append(out, Name{Parent: parent, Name: name})
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		p := out[i].Name
		for d, ok := dirs[out[i].Parent]; ok; d, ok = dirs[d.parent] {
			p = d.name + "/" + p
		}
		out[i].Path = p
	}
	return out, nil
}
