package metadata

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// The trash keeps a regular file or symlink that leaves the namespace
// (its last link unlinked or renamed over) and the previous content of a
// file truncated to zero, with no copy of data: the inode stays where it
// is, under the same number (so its blob stays too), and loses its
// directory entry; a trash record takes the place of the orphan record in
// the same transaction. The inode stays charged to its holder until it is
// purged, evicted or restored.
//
// Keys (see doc.go):
//
//	'T' holder 0x00 nanos ino   trash record (JSON), oldest first per holder
//	't' ino                     the 'T' key of the inode's record

// DefaultTrashRetention is how long the trash keeps a file unless the
// store's settings say otherwise.
const DefaultTrashRetention = 7 * 24 * time.Hour

// TrashRetention is how long the trash keeps a file; 0 means the trash is
// off.
func (st Settings) TrashRetention() time.Duration {
	if st.TrashRetentionSeconds == nil {
		return DefaultTrashRetention
	}
	return time.Duration(max(*st.TrashRetentionSeconds, 0)) * time.Second
}

// Why an entry went to the trash.
const (
	TrashUnlink     = "unlink"
	TrashRenameOver = "rename-over"
	TrashTruncate   = "truncate"
	TrashRestore    = "restore"
)

const (
	pTrash    = 'T'
	pTrashIno = 't'
)

// TrashNote is what the caller knows of a removal that the store does
// not: who removed the entry, why, and its path within its zone as the
// remover's view named it ("reports/q3.csv", no leading slash).
type TrashNote struct {
	By   string
	Why  string
	Path string
	// at is the record's time, unix nanos (stamped).
	at int64
	// of is, for a version (TrashTruncate), the inode it was the
	// content of.
	of uint64
}

// stamped is a copy of note with a trash time of its own, or nil.
func (s *Store) stamped(note *TrashNote) *TrashNote {
	if note == nil {
		return nil
	}
	c := *note
	c.at = s.trashTime()
	return &c
}

// TrashEntry is one kept file: the inode, where it was, and who removed it
// when and why. Time is unique within a holder, so that names built from
// it never collide.
type TrashEntry struct {
	Ino     uint64         `json:"ino"`
	Zone    shedfs.Zone    `json:"-"`
	Holder  shedfs.Holder  `json:"holder"`
	Owner   string         `json:"owner,omitempty"`
	OwnMode shedfs.OwnMode `json:"-"`
	Path    string         `json:"path"`
	By      string         `json:"by"`
	Why     string         `json:"why"`
	Time    time.Time      `json:"time"`
	Size    uint64         `json:"size"`
	Mode    uint32         `json:"mode"`
	// Of is, for a version kept by a truncate, the inode it was the
	// content of: the file, whichever of its names the truncate came
	// through (the kernel does not say, so Path is one of them).
	Of uint64 `json:"of,omitempty"`
}

// trashRecord is the stored form of a TrashEntry.
type trashRecord struct {
	Zone    string `json:"z"`
	Owner   string `json:"o,omitempty"`
	OwnMode uint8  `json:"m,omitempty"`
	Path    string `json:"p"`
	By      string `json:"b"`
	Why     string `json:"w"`
	Size    uint64 `json:"s"`
	Mode    uint32 `json:"f"`
	Of      uint64 `json:"v,omitempty"`
}

func trashHolderPrefix(h shedfs.Holder) []byte {
	k := strKey(pTrash, string(h))
	return append(k, 0)
}

func trashKey(h shedfs.Holder, nanos int64, ino uint64) []byte {
	k := trashHolderPrefix(h)
	k = binary.BigEndian.AppendUint64(k, uint64(nanos))
	return binary.BigEndian.AppendUint64(k, ino)
}

func trashInoKey(ino uint64) []byte { return inoKey(pTrashIno, ino) }

// trashKeyHolder is the holder in trash key k; false when k is too
// short to be one.
func trashKeyHolder(k []byte) (shedfs.Holder, bool) {
	if len(k) < 1+1+16 {
		return "", false
	}
	return shedfs.Holder(k[1 : len(k)-17]), true
}

// decodeTrash reads a trash record and its key.
func decodeTrash(k, v []byte) (TrashEntry, error) {
	var e TrashEntry
	h, ok := trashKeyHolder(k)
	if !ok {
		return e, fmt.Errorf("trash key %x: %w", k, ErrCorrupt)
	}
	tail := k[len(k)-16:]
	e.Holder = h
	e.Time = time.Unix(0, int64(binary.BigEndian.Uint64(tail[:8]))).UTC()
	e.Ino = binary.BigEndian.Uint64(tail[8:])
	var r trashRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return e, fmt.Errorf("trash record of %d: %w", e.Ino, ErrCorrupt)
	}
	z, err := shedfs.ParseZone(r.Zone)
	if err != nil {
		return e, fmt.Errorf("trash record of %d: %w", e.Ino, err)
	}
	e.Zone, e.Owner, e.OwnMode = z, r.Owner, shedfs.OwnMode(r.OwnMode)
	e.Path, e.By, e.Why, e.Size, e.Mode, e.Of = r.Path, r.By, r.Why, r.Size, r.Mode, r.Of
	return e, nil
}

// Keepable reports whether n goes to the trash when it leaves the
// namespace: regular files and symlinks do; directories, fifos and
// sockets hold nothing worth keeping.
func Keepable(n *shedfs.Inode) bool {
	t := n.Mode & syscall.S_IFMT
	return t == syscall.S_IFREG || t == syscall.S_IFLNK
}

// keep moves n, which just lost its last link, from the orphans to the
// trash.
func (o *op) keep(n *shedfs.Inode, note *TrashNote) error {
	if err := o.tx.Delete(orphanKey(n.Ino)); err != nil {
		return err
	}
	return o.addTrash(n, note)
}

// dropLinkKeep is dropLink, and keep when n loses its last link and note
// keeps it (kept). A kept inode goes to the trash without passing through
// the orphans: an orphan mark set and deleted in one transaction still
// writes a tombstone into the engine, one per unlink.
func (o *op) dropLinkKeep(n *shedfs.Inode, note *TrashNote) (kept bool, err error) {
	if note == nil || !Keepable(n) {
		return false, o.dropLink(n)
	}
	o.loseLink(n)
	if n.Nlink > 0 {
		return false, nil
	}
	return true, o.addTrash(n, note)
}

// trashTime is the time of a new trash record: now, or a nanosecond
// after the last one, so that every record has a time of its own.
func (s *Store) trashTime() int64 {
	now := time.Now().UnixNano()
	for {
		last := s.trashClock.Load()
		t := max(now, last+1)
		if s.trashClock.CompareAndSwap(last, t) {
			return t
		}
	}
}

// addTrash writes n's trash record.
func (o *op) addTrash(n *shedfs.Inode, note *TrashNote) error {
	h := shedfs.HolderOf(n.Zone)
	nanos := note.at
	if nanos == 0 {
		nanos = o.now.UnixNano()
	}
	v, err := json.Marshal(trashRecord{Zone: n.Zone.String(), Owner: n.Owner, OwnMode: uint8(n.OwnMode),
		Path: note.Path, By: note.By, Why: note.Why, Size: n.Size, Mode: n.Mode, Of: note.of})
	if err != nil {
		return err
	}
	k := trashKey(h, nanos, n.Ino)
	if err := o.tx.Set(k, v); err != nil {
		return err
	}
	o.countTrash(h, keptCharge(n.Mode, n.Size), 1)
	return o.tx.Set(trashInoKey(n.Ino), k)
}

// trashOf returns the trash record of ino and its key; ENOENT when ino is
// not in the trash.
func (o *op) trashOf(ino uint64) (TrashEntry, []byte, error) {
	k, err := o.tx.Get(trashInoKey(ino))
	if errors.Is(err, ErrNotFound) {
		return TrashEntry{}, nil, syscall.ENOENT
	}
	if err != nil {
		return TrashEntry{}, nil, err
	}
	k = slices.Clone(k)
	v, err := o.tx.Get(k)
	if err != nil {
		return TrashEntry{}, nil, fmt.Errorf("trash record of %d: %w", ino, err)
	}
	e, err := decodeTrash(k, v)
	return e, k, err
}

// dropTrash deletes ino's trash record, leaving the inode.
func (o *op) dropTrash(ino uint64, k []byte) error {
	v, err := o.tx.Get(k)
	if err != nil {
		return fmt.Errorf("trash record of %d: %w", ino, err)
	}
	h, ok := trashKeyHolder(k)
	if !ok {
		return fmt.Errorf("trash key %x: %w", k, ErrCorrupt)
	}
	u, err := trashCharge(k, v)
	if err != nil {
		return err
	}
	o.countTrash(h, u, -1)
	if err := o.tx.Delete(k); err != nil {
		return err
	}
	return o.tx.Delete(trashInoKey(ino))
}

// free deletes an inode without links and uncharges its holder.
func (o *op) free(n *shedfs.Inode) error {
	xattrs, err := o.deleteInode(n)
	if err != nil {
		return err
	}
	return o.charge(shedfs.HolderOf(n.Zone), -chargeOf(n)-xattrs, -1)
}

// InTrash reports whether ino is a kept file.
func (s *Store) InTrash(ino uint64) bool {
	found := false
	_ = s.kv.View(func(tx Txn) error {
		_, err := tx.Get(trashInoKey(ino))
		found = err == nil
		return nil
	})
	return found
}

// TrashEntryOf returns the trash record of ino, ENOENT if it has none.
func (s *Store) TrashEntryOf(ino uint64) (TrashEntry, error) {
	var e TrashEntry
	err := s.view(func(o *op) error {
		var err error
		e, _, err = o.trashOf(ino)
		return err
	})
	return e, err
}

// UnlinkTrash is UnlinkFree that keeps a regular file or symlink losing
// its last link in the trash (note says by whom, why and where) instead of
// leaving an orphan or freeing it; kept tells that it did. A nil note
// keeps nothing.
func (s *Store) UnlinkTrash(parent uint64, name string, dir bool, unused func(ino uint64) bool, note *TrashNote) (n *shedfs.Inode, freed, kept bool, err error) {
	return s.UnlinkTrashUnhold(parent, name, dir, unused, note, 0)
}

// UnlinkTrashUnhold is UnlinkTrash that also takes back, in the same
// transaction, this daemon's open marker of inode unhold (0: none) on a
// store other daemons share: one kept after the last close here
// (vfs/marks.go) that the caller knows nothing here needs any more. It
// costs no request of its own, and a kept file that another daemon still
// reads then goes at that daemon's last close, not once the marker here
// would have gone idle.
func (s *Store) UnlinkTrashUnhold(parent uint64, name string, dir bool, unused func(ino uint64) bool, note *TrashNote, unhold uint64) (n *shedfs.Inode, freed, kept bool, err error) {
	if err := lookupName(name); err != nil {
		return nil, false, false, err
	}
	note = s.stamped(note)
	err = s.update(func(o *op) error {
		freed, kept = false, false
		var e error
		n, freed, kept, e = o.unlink(parent, name, dir, unused, note)
		if e == nil && unhold != 0 {
			o.unholdOwn(unhold)
		}
		return e
	})
	if err != nil {
		return nil, false, false, err
	}
	return n, freed, kept, nil
}

// RenameTrash is Rename that keeps the replaced file in the trash when it
// loses its last link (see UnlinkTrash); kept tells that it did, and the
// caller then has nothing to reclaim.
func (s *Store) RenameTrash(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32, note *TrashNote, journal *RenameNote) (replaced *shedfs.Inode, kept bool, err error) {
	return s.RenameTrashUnhold(oldParent, oldName, newParent, newName, flags, note, journal, 0)
}

// RenameTrashUnhold is RenameTrash that also takes back, in the same
// transaction, this daemon's open marker of inode unhold (0: none) when
// the rename takes that inode's last link: UnlinkTrashUnhold for a file
// replaced by a rename.
func (s *Store) RenameTrashUnhold(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32, note *TrashNote, journal *RenameNote, unhold uint64) (replaced *shedfs.Inode, kept bool, err error) {
	note = s.stamped(note)
	journal = s.stampedJournal(journal) // after the replaced file left
	replaced, err = s.rename(oldParent, oldName, newParent, newName, flags, func(o *op, dst *shedfs.Inode) (bool, error) {
		if unhold != 0 && dst.Ino == unhold && dst.Nlink == 0 {
			o.unholdOwn(unhold)
		}
		if note == nil || dst.Nlink != 0 || !Keepable(dst) {
			return false, o.journalRemoved(dst, note)
		}
		return true, o.keep(dst, note)
	}, journal)
	if err != nil {
		return nil, false, err
	}
	kept = replaced != nil && note != nil && replaced.Nlink == 0 && Keepable(replaced)
	return replaced, kept, nil
}

// AllocIno hands out a fresh inode number, for a version made by
// KeepVersion (the caller moves the blob to it first).
func (s *Store) AllocIno() (uint64, error) { return s.allocIno() }

// KeepVersion truncates regular file ino to zero and keeps its content in
// the trash as inode version, a copy of its record without links: the
// caller has already moved ino's blob to version's name, so no byte is
// copied. Bytes move from the live file to the version (no net charge);
// the version costs one inode, admitted against the holder's inode limit
// (EDQUOT, nothing changed). Returns the live file after the change.
func (s *Store) KeepVersion(ino, version uint64, note *TrashNote) (*shedfs.Inode, error) {
	note = s.stamped(note)
	if note != nil {
		note.of = ino
	}
	var out *shedfs.Inode
	err := s.update(func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		if !n.IsRegular() {
			return fmt.Errorf("keep version of %d: not a regular file: %w", ino, syscall.EINVAL)
		}
		h := shedfs.HolderOf(n.Zone)
		u, l, err := o.quota(h)
		if err != nil {
			return err
		}
		if l.Inodes > 0 && u.Inodes >= l.Inodes {
			return syscall.EDQUOT
		}
		v := *n
		v.Ino = version
		v.Nlink = 0
		v.Ctime = o.now
		o.put(&v)
		// The version is the content the file had since it was made.
		b, err := o.birth(ino)
		if err != nil {
			return err
		}
		if !b.IsZero() {
			if err := o.setBirth(version, b); err != nil {
				return err
			}
		}
		if err := o.addTrash(&v, note); err != nil {
			return err
		}
		n.Size = 0
		n.Mtime, n.Ctime = o.now, o.now
		o.put(n)
		out = n
		return o.charge(h, 0, 1)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListTrash returns the trash of the given holders (all when nil), oldest
// first within each holder.
func (s *Store) ListTrash(holders []shedfs.Holder) ([]TrashEntry, error) {
	var out []TrashEntry
	scan := func(tx Txn, prefix []byte) error {
		return tx.Scan(prefix, nil, func(k, v []byte) error {
			e, err := decodeTrash(k, v)
			if err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	}
	err := s.kv.View(func(tx Txn) error {
		if holders == nil {
			return scan(tx, []byte{pTrash})
		}
		for _, h := range holders {
			if err := scan(tx, trashHolderPrefix(h)); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// PurgeTrash deletes kept inode ino for good. When unused(ino) says
// nothing here holds it open, and no other daemon sharing the store does
// (their open marks, read in the transaction), it goes at once (freed,
// its charge too; the caller removes the blob); otherwise it becomes an
// orphan, still charged, that goes with its last handle, on whichever
// daemon that is. ENOENT when ino is not in the trash.
func (s *Store) PurgeTrash(ino uint64, unused func(uint64) bool) (n *shedfs.Inode, freed bool, err error) {
	err = s.update(func(o *op) error {
		freed = false
		_, k, err := o.trashOf(ino)
		if err != nil {
			return err
		}
		if n, err = o.inode(ino); err != nil {
			return err
		}
		if err := o.dropTrash(ino, k); err != nil {
			return err
		}
		if unused == nil || unused(ino) {
			held, err := o.heldOpen(ino, true)
			if err != nil {
				return err
			}
			if !held {
				freed = true
				return o.free(n)
			}
		}
		return o.tx.Set(orphanKey(ino), []byte{})
	})
	return n, freed, err
}

// EvictTrash purges h's oldest kept files, skipping those still open
// (unused says which are not here; the open marks, which other daemons
// sharing the store do: evictable), until h's usage with bytes and inodes more
// fits its limit, or its trash is empty; it returns what it freed, for
// the caller to remove the blobs. Nothing is evicted when the charge fits
// already or h has no limit.
func (s *Store) EvictTrash(h shedfs.Holder, bytes, inodes int64, unused func(uint64) bool) ([]*shedfs.Inode, error) {
	var out []*shedfs.Inode
	err := s.update(func(o *op) error {
		out = nil
		u, l, err := o.quota(h)
		if err != nil {
			return err
		}
		fits := func() bool {
			return (l.Bytes <= 0 || bytes <= 0 || u.Bytes+bytes <= l.Bytes) &&
				(l.Inodes <= 0 || inodes <= 0 || u.Inodes+inodes <= l.Inodes)
		}
		if fits() {
			return nil
		}
		victims, keys, err := o.evictionOrder(h)
		if err != nil {
			return err
		}
		for i, e := range victims {
			if fits() {
				break
			}
			if unused != nil && !unused(e.Ino) {
				continue
			}
			if ok, err := o.evictable(e.Ino); err != nil {
				return err
			} else if !ok {
				continue
			}
			n, err := o.inode(e.Ino)
			if err != nil {
				return err
			}
			if err := o.dropTrash(e.Ino, keys[i]); err != nil {
				return err
			}
			if err := o.free(n); err != nil {
				return err
			}
			u.Bytes -= chargeOf(n)
			u.Inodes--
			out = append(out, n)
		}
		return nil
	})
	return out, err
}

// evictionOrder lists what EvictTrash may free for h, oldest first, with
// the keys: h's kept files and those of the holders nested in h (a
// user's sessions), which are charged to h too, so that the trash of a
// session never causes EDQUOT in its user's other views (issue 24).
func (o *op) evictionOrder(h shedfs.Holder) ([]TrashEntry, [][]byte, error) {
	prefixes := [][]byte{trashHolderPrefix(h)}
	if nested, ok := shedfs.NestedPrefix(h); ok {
		prefixes = append(prefixes, strKey(pTrash, nested))
	}
	var victims []TrashEntry
	var keys [][]byte
	for _, p := range prefixes {
		if err := o.tx.Scan(p, nil, func(k, v []byte) error {
			e, err := decodeTrash(k, v)
			if err != nil {
				return err
			}
			victims = append(victims, e)
			keys = append(keys, slices.Clone(k))
			return nil
		}); err != nil {
			return nil, nil, err
		}
	}
	if len(prefixes) > 1 {
		idx := make([]int, len(victims))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return victims[a].Time.Compare(victims[b].Time) })
		sv, sk := make([]TrashEntry, len(idx)), make([][]byte, len(idx))
		for i, j := range idx {
			sv[i], sk[i] = victims[j], keys[j]
		}
		victims, keys = sv, sk
	}
	return victims, keys, nil
}

// ExpireTrash purges kept files removed before cutoff, and then, oldest
// first across holders, as many as needed to bring the trash of the
// holders capped (those without a byte limit) under capBytes (0: no cap).
// Open ones are skipped. It works in batches and returns what it freed.
//
// Trash keys are in time order within a holder, so the expired files are
// each holder's first ones: the sweep reads those and stops, and reads the
// whole trash only when the capped holders' trash (their tallies,
// TrashUsage) is over capBytes. It used to read and decode the whole trash
// every minute: with the 150,000 files three rounds of the benchmark
// keep, 5% of the daemon's CPU.
func (s *Store) ExpireTrash(cutoff time.Time, capped func(shedfs.Holder) bool, capBytes int64, unused func(uint64) bool) ([]*shedfs.Inode, error) {
	victims, overCap, err := s.expiredTrash(cutoff, capped, capBytes, unused)
	if err != nil {
		return nil, err
	}
	if overCap {
		if victims, err = s.trashToExpire(cutoff, capped, capBytes, unused); err != nil {
			return nil, err
		}
	}
	if err := s.pruneRenames(cutoff); err != nil {
		return nil, err
	}
	return s.purgeEntries(victims, unused)
}

// expiredTrash returns the kept files removed before cutoff, not open,
// reading only those (and one more per holder), and whether the capped
// holders' trash, less them, is still over capBytes.
func (s *Store) expiredTrash(cutoff time.Time, capped func(shedfs.Holder) bool, capBytes int64, unused func(uint64) bool) (victims []TrashEntry, overCap bool, err error) {
	holders, err := s.trashHolders()
	if err != nil {
		return nil, false, err
	}
	var capTotal int64
	for _, h := range holders {
		isCapped := capped != nil && capped(h)
		if capBytes > 0 && isCapped {
			u, err := s.TrashUsage(h)
			if err != nil {
				return nil, false, err
			}
			capTotal += u.Bytes
		}
		err := s.kv.View(func(tx Txn) error {
			return tx.Scan(trashHolderPrefix(h), nil, func(k, v []byte) error {
				e, err := decodeTrash(k, v)
				if err != nil {
					return err
				}
				if !e.Time.Before(cutoff) {
					return errStopScan
				}
				if unused != nil && !unused(e.Ino) {
					return nil
				}
				if isCapped {
					capTotal -= keptCharge(e.Mode, e.Size).Bytes
				}
				victims = append(victims, e)
				return nil
			})
		})
		if err != nil {
			return nil, false, err
		}
	}
	return victims, capBytes > 0 && capTotal > capBytes, nil
}

// trashHolders lists the holders that have a trash, one short scan each.
func (s *Store) trashHolders() ([]shedfs.Holder, error) {
	var out []shedfs.Holder
	start := []byte{pTrash}
	for {
		var next []byte
		err := s.kv.View(func(tx Txn) error {
			return tx.Scan([]byte{pTrash}, start, func(k, _ []byte) error {
				h, ok := trashKeyHolder(k)
				if !ok {
					return fmt.Errorf("trash key %x: %w", k, ErrCorrupt)
				}
				out = append(out, h)
				// Past every key of h: its prefix ends in 0, so
				// the prefix with 1 in its place follows them.
				next = trashHolderPrefix(h)
				next[len(next)-1] = 1
				return errStopScan
			})
		})
		if err != nil || next == nil {
			return out, err
		}
		start = next
	}
}

// trashToExpire is ExpireTrash's choice over the whole trash: the files
// removed before cutoff, then, oldest first across the capped holders,
// as many as bring their trash under capBytes.
func (s *Store) trashToExpire(cutoff time.Time, capped func(shedfs.Holder) bool, capBytes int64, unused func(uint64) bool) ([]TrashEntry, error) {
	all, err := s.ListTrash(nil)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b TrashEntry) int { return a.Time.Compare(b.Time) })
	var capTotal int64
	for _, e := range all {
		if capped != nil && capped(e.Holder) {
			capTotal += keptCharge(e.Mode, e.Size).Bytes
		}
	}
	var victims []TrashEntry
	for _, e := range all {
		isCapped := capped != nil && capped(e.Holder)
		switch {
		case e.Time.Before(cutoff):
		case capBytes > 0 && isCapped && capTotal > capBytes:
		default:
			continue
		}
		if unused != nil && !unused(e.Ino) {
			continue
		}
		if isCapped {
			capTotal -= keptCharge(e.Mode, e.Size).Bytes
		}
		victims = append(victims, e)
	}
	return victims, nil
}

// EvictOldest purges the oldest kept files of any holder, skipping open
// ones, until their charges add up to bytes (at least one file, while
// any is left): room on the store's disk comes before the trash.
func (s *Store) EvictOldest(bytes int64, unused func(uint64) bool) ([]*shedfs.Inode, error) {
	all, err := s.ListTrash(nil)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b TrashEntry) int { return a.Time.Compare(b.Time) })
	var victims []TrashEntry
	var freed int64
	for _, e := range all {
		if len(victims) > 0 && freed >= bytes {
			break
		}
		if unused != nil && !unused(e.Ino) {
			continue
		}
		victims = append(victims, e)
		freed += keptCharge(e.Mode, e.Size).Bytes
	}
	return s.purgeEntries(victims, unused)
}

// evictable reports whether kept file ino may be freed to make room:
// no other daemon sharing the store holds it open (the caller has asked
// its own handles). Eviction skips one that is: freeing it would take
// the charge, and perhaps the blob, from under a reader, and make no
// room on the disk while it reads.
func (o *op) evictable(ino uint64) (bool, error) {
	held, err := o.heldOpen(ino, true)
	return !held, err
}

// purgeEntries purges kept files in batches, skipping those gone
// meanwhile and those open, here (unused, asked again in the transaction:
// one may have been opened since it was chosen, and evictable does not
// count this daemon's own open mark) or on another daemon, and returns
// what it freed.
func (s *Store) purgeEntries(victims []TrashEntry, unused func(uint64) bool) ([]*shedfs.Inode, error) {
	var out []*shedfs.Inode
	for batch := range slices.Chunk(victims, 500) {
		var purged []TrashEntry
		err := s.update(func(o *op) error {
			purged = purged[:0]
			for _, e := range batch {
				_, k, err := o.trashOf(e.Ino)
				if errors.Is(err, syscall.ENOENT) {
					continue // gone meanwhile
				}
				if err != nil {
					return err
				}
				if unused != nil && !unused(e.Ino) {
					continue
				}
				if ok, err := o.evictable(e.Ino); err != nil {
					return err
				} else if !ok {
					continue
				}
				n, err := o.inode(e.Ino)
				if err != nil {
					return err
				}
				if err := o.dropTrash(e.Ino, k); err != nil {
					return err
				}
				if err := o.free(n); err != nil {
					return err
				}
				purged = append(purged, e)
			}
			return nil
		})
		if err != nil {
			return out, err
		}
		for _, e := range purged {
			out = append(out, &shedfs.Inode{Ino: e.Ino, Mode: e.Mode, Zone: e.Zone})
		}
	}
	return out, nil
}

// RestoreTrash puts kept inode ino back as name in parent, which must be
// in the inode's zone (EXDEV otherwise). An existing name is replaced as
// rename replaces it (EISDIR for a directory); the replaced file goes to
// the trash in turn when note is not nil, else it is returned for the
// caller to reclaim. ENOENT when ino is not in the trash.
//
// With a note, the journal keeps what the trash record said (the file
// was removed from its path then: it is history a later restore to a
// point in time needs) and that the file came back at note.Path.
func (s *Store) RestoreTrash(ino, parent uint64, name string, note *TrashNote) (restored, replaced *shedfs.Inode, kept bool, err error) {
	if err := ValidEntryName(name); err != nil {
		return nil, nil, false, err
	}
	note = s.stamped(note)
	var added *RenameNote
	if note != nil {
		added = s.stampedJournal(&RenameNote{Kind: JournalAdd, To: note.Path}) // after the replaced file left
	}
	err = s.update(func(o *op) error {
		replaced, kept = nil, false
		e, k, err := o.trashOf(ino)
		if err != nil {
			return err
		}
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		p, err := o.dir(parent)
		if err != nil {
			return err
		}
		if p.Zone != n.Zone {
			return syscall.EXDEV
		}
		switch child, _, err := o.entry(parent, name); {
		case err == nil:
			old, err := o.inode(child)
			if err != nil {
				return fmt.Errorf("entry %d/%q points at missing inode %d: %w", parent, name, child, syscall.EIO)
			}
			if old.IsDir() {
				return syscall.EISDIR
			}
			if err := o.dropLink(old); err != nil {
				return err
			}
			replaced = old
			if note != nil && old.Nlink == 0 && Keepable(old) {
				kept = true
				if err := o.keep(old, note); err != nil {
					return err
				}
			} else if err := o.journalRemoved(old, note); err != nil {
				return err
			}
		case !errors.Is(err, syscall.ENOENT):
			return err
		}
		if err := o.dropTrash(ino, k); err != nil {
			return err
		}
		if added != nil {
			was := &RenameNote{Kind: JournalRemove, From: e.Path, at: e.Time.UnixNano()}
			if e.Why == TrashTruncate {
				was = &RenameNote{Kind: JournalVersion, From: e.Path, Of: e.Of, at: e.Time.UnixNano()}
			}
			if err := o.journalRename(n, was); err != nil {
				return err
			}
			if err := o.journalRename(n, added); err != nil {
				return err
			}
		}
		if err := o.tx.Delete(orphanKey(ino)); err != nil {
			return err
		}
		n.Nlink = 1
		n.Ctime = o.now
		o.put(n)
		o.touchDir(p)
		restored = n
		return o.setEntry(parent, name, n)
	})
	if err != nil {
		return nil, nil, false, err
	}
	return restored, replaced, kept, nil
}
