package metadata

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// File locks are decided by the daemon that serves the views, which keeps
// them in memory. With many daemons on one etcd store a lock taken on one
// host must block the others, so each daemon also publishes the locks it
// holds on an inode as one record, <prefix>#lock/<ino>/<daemon>, under its
// lease: a daemon that dies takes its locks with it. PublishLocks puts the
// record in a transaction that first reads the other daemons' records of
// the inode and lets the caller refuse (a conflicting lock is held
// elsewhere); the range is compared at commit, so two daemons locking at
// once cannot both win. Each daemon follows the others' records through a
// watch (FollowLocks) to wake its waiters when a lock goes elsewhere. The
// rule of what conflicts stays with the caller; this file only stores.

// LockRecord is one file lock a daemon holds.
type LockRecord struct {
	// View and Owner are the holder within its daemon: the view it took
	// the lock through and the owner number that view's kernel gave.
	View  uint64 `json:"view"`
	Owner uint64 `json:"owner"`
	// Flock is a flock(2) lock; otherwise an fcntl record lock.
	Flock bool `json:"flock,omitempty"`
	// Write is an exclusive lock; otherwise a shared one.
	Write bool `json:"write,omitempty"`
	// Start and End are the inclusive byte range.
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
	// Pid, User and Path say who holds it, for F_GETLK and status.
	Pid  uint32 `json:"pid,omitempty"`
	User string `json:"user,omitempty"`
	Path string `json:"path,omitempty"`
}

// DaemonLocks are the locks one other daemon holds on an inode.
type DaemonLocks struct {
	// Daemon is the holder's id among the daemons of the store.
	Daemon string
	Locks  []LockRecord
}

// etcdLockRoot is where every lock record of a store lives; like the
// daemons' registrations it lies outside the store's prefix.
func etcdLockRoot(prefix string) string { return strings.TrimSuffix(prefix, "/") + "#lock/" }

// etcdLockPrefix is where the lock records of ino live.
func etcdLockPrefix(prefix string, ino uint64) string {
	return etcdLockRoot(prefix) + fmt.Sprintf("%016x", ino) + "/"
}

// lockEngine is the engine of a shared store opened for writing, nil
// otherwise (locks then stay in the daemon).
func (s *Store) lockEngine() *etcdKV {
	if e, ok := s.engine().(*etcdKV); ok && e.lease != 0 {
		return e
	}
	return nil
}

// decodeLocks reads the other daemons' records in resp, skipping this
// daemon's own key.
func (e *etcdKV) decodeLocks(resp *clientv3.GetResponse, own string) ([]DaemonLocks, error) {
	var out []DaemonLocks
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if k == own {
			continue
		}
		var recs []LockRecord
		if err := json.Unmarshal(kv.Value, &recs); err != nil {
			return nil, fmt.Errorf("lock record %s: %w", k, ErrCorrupt)
		}
		out = append(out, DaemonLocks{Daemon: k[strings.LastIndexByte(k, '/')+1:], Locks: recs})
	}
	return out, nil
}

// OtherLocks returns the locks other daemons hold on ino; none on a store
// no other daemon shares.
func (s *Store) OtherLocks(ino uint64) ([]DaemonLocks, error) {
	e := s.lockEngine()
	if e == nil {
		return nil, nil
	}
	ctx, cancel := e.ctx()
	defer cancel()
	pfx := etcdLockPrefix(string(e.prefix), ino)
	resp, err := e.cli.Get(ctx, pfx, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read locks of inode %d: %w", ino, etcdErr(err))
	}
	return e.decodeLocks(resp, pfx+e.id)
}

// PublishLocks makes mine the locks this daemon holds on ino (none:
// its record goes), unless admit, given what the other daemons hold there,
// refuses (ok false, nothing written). admit nil accepts anything (an
// unlock). On a store no other daemon shares it does nothing and reports
// ok.
func (s *Store) PublishLocks(ino uint64, mine []LockRecord, admit func(others []DaemonLocks) bool) (ok bool, err error) {
	e := s.lockEngine()
	if e == nil {
		return true, nil
	}
	pfx := etcdLockPrefix(string(e.prefix), ino)
	own := pfx + e.id
	op := clientv3.OpDelete(own)
	if len(mine) > 0 {
		val, err := json.Marshal(mine)
		if err != nil {
			return false, fmt.Errorf("publish locks of inode %d: %w", ino, err)
		}
		op = clientv3.OpPut(own, string(val), clientv3.WithLease(e.lease))
	}
	if admit == nil {
		ctx, cancel := e.ctx()
		defer cancel()
		if _, err := e.cli.Txn(ctx).Then(op).Commit(); err != nil {
			return false, fmt.Errorf("publish locks of inode %d: %w", ino, etcdErr(err))
		}
		return true, nil
	}
	for range maxConflictRetries {
		ctx, cancel := e.ctx()
		resp, err := e.cli.Get(ctx, pfx, clientv3.WithPrefix())
		if err != nil {
			cancel()
			return false, fmt.Errorf("publish locks of inode %d: %w", ino, etcdErr(err))
		}
		others, err := e.decodeLocks(resp, own)
		if err != nil {
			cancel()
			return false, err
		}
		if !admit(others) {
			cancel()
			return false, nil
		}
		// No record of the inode may have been made or changed since
		// the read; one that went only frees more.
		end := clientv3.GetPrefixRangeEnd(pfx)
		tr, err := e.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(pfx), "<", resp.Header.Revision+1).WithRange(end)).
			Then(op).Commit()
		cancel()
		if err != nil {
			return false, fmt.Errorf("publish locks of inode %d: %w", ino, etcdErr(err))
		}
		if tr.Succeeded {
			return true, nil
		}
	}
	return false, fmt.Errorf("publish locks of inode %d: conflicts did not stop", ino)
}

// FollowLocks makes fn run (on a goroutine of the feed) whenever another
// daemon's locks on ino change or go (an unlock, a close, its lease
// expiring), so that waiters look again; ino 0 means any inode may have
// changed (the feed lost track). It does nothing on an embedded store.
func (s *Store) FollowLocks(fn func(ino uint64)) {
	s.follow.locks.Store(&fn)
}

// lockIno reads the inode of a lock record's key (0 if it is not one).
func lockIno(key, root string) uint64 {
	rest, ok := strings.CutPrefix(key, root)
	if !ok || len(rest) < 17 {
		return 0
	}
	ino, err := strconv.ParseUint(rest[:16], 16, 64)
	if err != nil {
		return 0
	}
	return ino
}
