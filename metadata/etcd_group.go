package metadata

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"
)

// Group commit. Every write transaction of a daemon reads and writes its
// holder's usage key, and most of them a directory's inode, so two of them
// under way at once conflict at commit and one runs again: running them in
// parallel gains nothing. What etcd charges is the request, a raft round
// with a WAL fsync on a quorum, whatever it carries. So while one commit
// is in flight, the write transactions that arrive meanwhile queue, and
// the next commit carries all of them (up to etcdGroupMax): their
// functions run one after another against one etcd transaction, each
// seeing the writes of those before it, as if they had run one at a time,
// and one etcd Txn commits them together. A function that fails has its
// writes taken out again (the reads it made stay, and are compared like
// the others'); a conflict runs the whole group again; a group etcd
// refuses for its size commits its members one by one.
//
// Functions run on the goroutine of the group's leader (the caller that
// found no commit in flight), not on their callers', and one after
// another: a function must not wait for another write transaction, nor
// for a lock that a caller of the store holds across a write (the
// store's functions take no lock but one never held across a store
// write: fusefs's FS.mu, in unused). Under the metadata cache, which ran
// write transactions one at a time (wmu) before, no function did.

// etcdGroupMax bounds the functions one commit carries, so that a group
// stays well within etcd's request limits (its compares and writes count
// against --max-txn-ops).
const etcdGroupMax = 16

// etcdMember is one write transaction of a group.
type etcdMember struct {
	fn   func(tx Txn) error
	err  error
	done chan struct{}
	// after, set by the function (afterCommit), runs on the leader
	// once the commit is decided, before the next group's functions
	// run: the metadata cache puts the member's values in their slots
	// there, so that the next group finds them.
	after func(err error)
}

// etcdGroups is the queue of write transactions waiting for a commit.
type etcdGroups struct {
	mu      sync.Mutex
	queue   []*etcdMember
	leading bool
}

// memberTxn is the transaction a member's function sees: the group's, and
// its place in the group, which orders its writes in the metadata cache
// after those of the members before it (commitOrder).
type memberTxn struct {
	*etcdTxn
	order int
	m     *etcdMember
}

// commitOrder is the member's place in its commit.
func (t *memberTxn) commitOrder() int { return t.order }

// afterCommit has fn run with the member's outcome as soon as its commit
// is decided, before the leader runs the next group (the last attempt's
// fn counts).
func (t *memberTxn) afterCommit(fn func(err error)) { t.m.after = fn }

// updateGrouped runs fn as a write transaction, committed with the
// others that wait at the time (group commit, above). The metadata cache
// calls it (cachedKV.parallel); Update, the KV's own, commits each
// transaction alone, so that a function may wait for another
// transaction, as the KV contract allows.
func (e *etcdKV) updateGrouped(fn func(tx Txn) error) error {
	if e.lease == 0 {
		return e.updateAlone(fn)
	}
	g := &e.groups
	m := &etcdMember{fn: fn, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, m)
	if g.leading {
		g.mu.Unlock()
		<-m.done
		return m.err
	}
	g.leading = true
	for len(g.queue) > 0 {
		batch := g.queue[:min(len(g.queue), etcdGroupMax)]
		g.queue = g.queue[len(batch):]
		g.mu.Unlock()
		e.commitGroup(batch)
		for _, b := range batch {
			if b.after != nil {
				b.after(b.err)
			}
		}
		for _, b := range batch {
			close(b.done)
		}
		g.mu.Lock()
	}
	g.leading = false
	g.mu.Unlock()
	return m.err
}

// commitGroup runs the functions of batch against one transaction and
// commits it, running them again on a conflict, and sets each member's
// err.
func (e *etcdKV) commitGroup(batch []*etcdMember) {
	if len(batch) == 1 {
		m := batch[0]
		m.err = e.updateAlone(func(tx Txn) error {
			return m.fn(&memberTxn{etcdTxn: tx.(*etcdTxn), m: m})
		})
		return
	}
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		t := newEtcdTxn(e, true)
		retry := false
		for i, m := range batch {
			saved := maps.Clone(t.writes)
			m.err = m.fn(&memberTxn{etcdTxn: t, order: i, m: m})
			if errors.Is(m.err, errEtcdRetry) {
				retry = true
				break
			}
			if m.err != nil {
				t.writes = saved
			}
		}
		if retry {
			continue
		}
		ok, err := t.commit()
		if errors.Is(err, errEtcdTooBig) {
			for _, m := range batch {
				m.err = e.updateAlone(func(tx Txn) error {
					return m.fn(&memberTxn{etcdTxn: tx.(*etcdTxn), m: m})
				})
			}
			return
		}
		if err != nil {
			for _, m := range batch {
				if m.err == nil {
					m.err = err
				}
			}
			return
		}
		if ok {
			return
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Microsecond)
	}
	for _, m := range batch {
		m.err = fmt.Errorf("commit after %d attempts: conflicts did not stop", maxConflictRetries)
	}
}
