package metadata

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/shedfs/shedfs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An inode unlinked while open lives on until its last handle closes. With
// one daemon that daemon alone knows its handles; with many on one etcd
// store each daemon that has an inode open says so with an open marker,
// <prefix>#open/<ino>/<daemon>, under its lease (Hold, Unhold). An unlink
// frees the inode only when no daemon holds it (the markers are read in
// the unlink's transaction, range and keys compared at commit, so a Hold
// that races it makes it run again); Reclaim refuses an inode any daemon
// holds (ErrHeld). The markers of a daemon that dies go with its lease,
// after which any other daemon reclaims its orphans (the daemon's orphan reclaim, on the feed of departures: FollowDepartures).

// ErrHeld is what Reclaim returns for an inode a daemon holds open.
var ErrHeld = errors.New("inode held open by a daemon")

// etcdOpenPrefix is where the open markers of ino live.
func etcdOpenPrefix(prefix string, ino uint64) string {
	return strings.TrimSuffix(prefix, "/") + "#open/" + fmt.Sprintf("%016x", ino) + "/"
}

// holdReader is a transaction that can tell whether a daemon holds an
// inode open (etcdTxn; writeTxn forwards it); others leaves this daemon's
// own marker out.
type holdReader interface {
	held(ino uint64, others bool) (bool, error)
}

// held reads the open markers of ino at the snapshot and records the range
// for the commit check, as a Scan does. With others, this daemon's own
// marker does not count: the caller (an unlink that frees, ReclaimIdle)
// has checked that no handle here holds ino, so a marker of its own is one
// kept after the last close (fusefs keeps marks a while, see Unholds),
// which is for the other daemons to see; it is deleted by the transaction
// (a no-op if it fails: an error, ErrHeld).
func (t *etcdTxn) held(ino uint64, others bool) (bool, error) {
	from := etcdOpenPrefix(string(t.e.prefix), ino)
	end := clientv3.GetPrefixRangeEnd(from)
	resp, err := t.get(from, end, 0)
	if err != nil {
		return false, err
	}
	own := from + t.e.id
	held, mine := false, false
	for _, kv := range resp.Kvs {
		if others && string(kv.Key) == own && t.e.lease != 0 {
			// Not compared: this daemon's marker release may delete
			// it meanwhile (fusefs), which changes nothing here.
			mine = true
			continue
		}
		t.reads[string(kv.Key)] = etcdRead{mod: kv.ModRevision}
		held = true
	}
	t.ranges = append(t.ranges, etcdRange{from: from, to: end})
	if mine && t.writable {
		// Whether the inode goes now or waits for another daemon's
		// last release (which reclaims it then, and must not find
		// this daemon's mark still there), this daemon is done with it.
		t.writes[own] = etcdWrite{del: true}
	}
	return held, nil
}

func (t *writeTxn) held(ino uint64, others bool) (bool, error) {
	if h, ok := t.tx.(holdReader); ok {
		return h.held(ino, others)
	}
	return false, nil
}

// heldOpen reports whether a daemon holds ino open, on a shared store
// (others: a daemon other than this one, whose handles the caller has
// checked); always false on an embedded one (the caller's unused says).
func (o *op) heldOpen(ino uint64, others bool) (bool, error) {
	if h, ok := o.tx.(holdReader); ok {
		return h.held(ino, others)
	}
	return false, nil
}

// holdWriter is a transaction that can put or delete an open marker of
// this daemon (etcdTxn; writeTxn forwards it).
type holdWriter interface {
	putHold(ino uint64)
	dropHold(ino uint64)
}

// putHold buffers this daemon's open marker of ino, under its lease.
func (t *etcdTxn) putHold(ino uint64) {
	if t.e.lease == 0 {
		return
	}
	k := etcdOpenPrefix(string(t.e.prefix), ino) + t.e.id
	t.writes[k] = etcdWrite{val: []byte(strconv.FormatInt(int64(t.e.lease), 16)), leased: true}
}

func (t *writeTxn) putHold(ino uint64) {
	if h, ok := t.tx.(holdWriter); ok {
		h.putHold(ino)
	}
}

// dropHold buffers the delete of this daemon's open marker of ino, read
// or not: deleting a marker that is not there changes nothing.
func (t *etcdTxn) dropHold(ino uint64) {
	if t.e.lease == 0 {
		return
	}
	t.writes[etcdOpenPrefix(string(t.e.prefix), ino)+t.e.id] = etcdWrite{del: true}
}

func (t *writeTxn) dropHold(ino uint64) {
	if h, ok := t.tx.(holdWriter); ok {
		h.dropHold(ino)
	}
}

// unholdOwn takes back this daemon's open marker of ino, on a shared
// store, in the transaction's commit; nothing on an embedded one.
func (o *op) unholdOwn(ino uint64) {
	if h, ok := o.tx.(holdWriter); ok {
		h.dropHold(ino)
	}
}

// holdNew marks the inode being created open by this daemon, on a shared
// store, as Hold does; nothing on an embedded one.
func (o *op) holdNew(ino uint64) {
	if h, ok := o.tx.(holdWriter); ok {
		h.putHold(ino)
	}
}

// absentNoter is a transaction that can be told a key does not exist
// (writeTxn, for the metadata cache).
type absentNoter interface {
	absent(key []byte)
}

// newContent tells the metadata cache that a new inode has no content
// records yet, so that the persist of its first write and its checksum
// find that out without a read (a round trip on etcd).
func (o *op) newContent(ino uint64) {
	if a, ok := o.tx.(absentNoter); ok {
		a.absent(pendingKey(ino))
		a.absent(contentKey(ino))
	}
}

// CreateOpen is Create (CreateTmp when name is empty) for a regular file
// its caller opens at once: on a shared store the new file's open marker
// is put by the create's own transaction, which saves the round trip of a
// Hold. The caller takes it back with Unhold, as after Hold.
func (s *Store) CreateOpen(parent uint64, name string, tmpl *shedfs.Inode, admit func(shedfs.Usage, shedfs.Limit) error) (*shedfs.Inode, error) {
	if name == "" {
		return s.createTmp(parent, tmpl, admit, true)
	}
	if err := ValidEntryName(name); err != nil {
		return nil, err
	}
	return s.create(parent, name, tmpl, admit, true)
}

// Hold marks ino open by this daemon, on a shared store: no other daemon
// frees it until Unhold (or this daemon's death). A no-op on an embedded
// store.
func (s *Store) Hold(ino uint64) error {
	e, ok := s.engine().(*etcdKV)
	if !ok || e.lease == 0 {
		return nil
	}
	ctx, cancel := e.ctx()
	defer cancel()
	key := etcdOpenPrefix(string(e.prefix), ino) + e.id
	if _, err := e.cli.Put(ctx, key, strconv.FormatInt(int64(e.lease), 16), clientv3.WithLease(e.lease)); err != nil {
		return fmt.Errorf("hold inode %d open: %w", ino, etcdErr(err))
	}
	return nil
}

// Unhold takes back Hold. orphan reports whether ino has lost its last
// link meanwhile (perhaps through another daemon), read from etcd itself,
// so that the caller reclaims it.
func (s *Store) Unhold(ino uint64) (orphan bool, err error) {
	e, ok := s.engine().(*etcdKV)
	if !ok || e.lease == 0 {
		return false, nil
	}
	ctx, cancel := e.ctx()
	defer cancel()
	// One request: the marker goes and the record is read after it, so
	// that an unlink on another daemon either saw the marker (and left
	// the orphan to us) or is in the record read here.
	resp, err := e.cli.Txn(ctx).Then(
		clientv3.OpDelete(etcdOpenPrefix(string(e.prefix), ino)+e.id),
		clientv3.OpGet(string(e.prefix)+string(s.keys.inode(ino))),
	).Commit()
	if err != nil {
		return false, fmt.Errorf("release inode %d: %w", ino, etcdErr(err))
	}
	kvs := resp.Responses[1].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return false, nil
	}
	n, err := decodeInode(ino, kvs[0].Value)
	if err != nil {
		return false, fmt.Errorf("release inode %d: %w", ino, err)
	}
	return n.Nlink == 0, nil
}

// unholdBatch is how many markers one Unholds request takes back: a
// delete and a get each, within etcd's default --max-txn-ops of 128.
const unholdBatch = 50

// Unholds is Unhold for many inodes at once, in one request per
// unholdBatch of them: fusefs keeps a mark a while after the last close,
// so that a file opened again soon costs no write, and takes back the
// marks that went idle together. orphans are those of inos that have lost
// their last link meanwhile, for the caller to reclaim.
func (s *Store) Unholds(inos []uint64) (orphans []uint64, err error) {
	e, ok := s.engine().(*etcdKV)
	if !ok || e.lease == 0 {
		return nil, nil
	}
	for len(inos) > 0 {
		batch := inos[:min(len(inos), unholdBatch)]
		inos = inos[len(batch):]
		ops := make([]clientv3.Op, 0, 2*len(batch))
		for _, ino := range batch {
			ops = append(ops,
				clientv3.OpDelete(etcdOpenPrefix(string(e.prefix), ino)+e.id),
				clientv3.OpGet(string(e.prefix)+string(s.keys.inode(ino))))
		}
		ctx, cancel := e.ctx()
		resp, err := e.cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return orphans, fmt.Errorf("release %d inodes: %w", len(batch), etcdErr(err))
		}
		for i, ino := range batch {
			kvs := resp.Responses[2*i+1].GetResponseRange().GetKvs()
			if len(kvs) == 0 {
				continue
			}
			n, err := decodeInode(ino, kvs[0].Value)
			if err != nil {
				return orphans, fmt.Errorf("release inode %d: %w", ino, err)
			}
			if n.Nlink == 0 {
				orphans = append(orphans, ino)
			}
		}
	}
	return orphans, nil
}
