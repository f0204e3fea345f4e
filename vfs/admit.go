package vfs

import (
	"fmt"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// Growth is what one operation adds to the store, for Admit.
type Growth struct {
	// Holder is who is charged; "" admits on the disk alone (a growth
	// no quota counts, such as a link's record).
	Holder shedfs.Holder
	// Bytes and Inodes are what the growth adds to the holder's usage:
	// what trash eviction must make room for when the quota refuses.
	Bytes, Inodes int64
	// Credit is what the growth frees of the holder's usage once it
	// lands (the file a replace swaps out): the quota and its eviction
	// count it, the allotment of pending bytes does not.
	Credit int64
	// Disk and DiskInodes are what the store's disk must have room for.
	Disk, DiskInodes int64
	// Allot covers Bytes in this daemon's allotment of a store other
	// daemons share, for bytes that stay pending (a write, a streaming
	// import) and that the other daemons cannot see. Such an admission
	// holds the holder's lock until Done.
	Allot bool
	// Hold keeps the holder's lock until Done for a charge whose store
	// transaction counts the holder's pending bytes (an xattr), so that
	// no write is admitted beside it unseen. Without Hold or Allot the
	// decision is a first check that takes the lock only to evict, and
	// the store's transaction decides exactly (a create's inode): creates
	// of one holder then never wait for each other, nor for a persist.
	Hold bool
	// Decide is acl's rule for the growth, given the holder's quota
	// (usage with what is pending, limit, max file size); nil admits by
	// the quota alone (acl.AdmitBytes and acl.AdmitInodes).
	Decide func(q acl.Quota) acl.Decision
}

// Admission is an admitted growth. For a growth with Allot or Hold the
// holder's admission lock stays held until Done, so that the caller can
// charge what was admitted (add it to the pending bytes, or commit the
// transaction that stores it) before any other admission of the holder
// decides.
type Admission struct {
	unlock func()
}

// Done releases the holder's admission lock. It may be called more than
// once.
func (a *Admission) Done() {
	if a != nil && a.unlock != nil {
		a.unlock()
		a.unlock = nil
	}
}

// Admit is the one admission of growth, for every door: it asks acl with
// the holder's quota; a refusal for the quota evicts the holder's oldest
// kept files, under the holder's lock, and asks again (the trash never
// causes EDQUOT), after the releases on their way of kept files being
// closed if need be (closing.go); then the store's disk must have room (evicting the
// oldest kept files of anyone when it has not); then, for pending bytes,
// this daemon's allotment of a shared store must cover them. A refusal is
// acl's decision (or the disk's), with nothing held; an admission of
// growth with Allot or Hold holds the holder's lock until Done.
func (c *Core) Admit(g Growth) (*Admission, acl.Decision, error) {
	decide := g.Decide
	if decide == nil {
		decide = func(q acl.Quota) acl.Decision {
			if d := acl.AdmitInodes(q.Usage, q.Limit, g.Inodes); !d.Allowed() {
				return d
			}
			q.Usage.Bytes -= g.Credit
			return acl.AdmitBytes(q.Usage, q.Limit, g.Bytes)
		}
	}
	a := &Admission{}
	held := g.Holder != "" && (g.Allot || g.Hold)
	if held {
		a.unlock = c.acct.Lock(g.Holder)
	}
	since := c.releaseSeq()
	d, err := c.decide(g, decide, held)
	for until := time.Now().Add(releaseWait); err == nil && d.Errno == syscall.EDQUOT; {
		// A kept file being closed holds the room: wait for its
		// release, without the lock its persist needs.
		if held {
			a.Done()
		}
		if !c.awaitRelease(g.Holder, since, until) {
			break
		}
		if held {
			a.unlock = c.acct.Lock(g.Holder)
		}
		since = c.releaseSeq()
		d, err = c.decide(g, decide, held)
	}
	if err == nil && d.Allowed() && (g.Disk > 0 || g.DiskInodes > 0) {
		d = c.room(g.Disk, g.DiskInodes)
	}
	if err == nil && d.Allowed() && g.Allot && g.Holder != "" {
		d, err = c.acct.Cover(g.Holder, g.Bytes)
	}
	if err != nil || !d.Allowed() {
		a.Done()
		return nil, d, err
	}
	return a, d, nil
}

// decide asks the rule with the holder's quota, and again after evicting
// the holder's trash when the quota refused; held says the caller holds
// the holder's lock, which eviction needs (else it is taken for it).
func (c *Core) decide(g Growth, decide func(acl.Quota) acl.Decision, held bool) (acl.Decision, error) {
	if g.Holder == "" {
		return decide(acl.Quota{}), nil
	}
	q, err := c.Quota(g.Holder)
	if err != nil {
		return acl.Decision{}, err
	}
	d := decide(q)
	if d.Errno == syscall.EDQUOT && !held {
		unlock := c.acct.Lock(g.Holder)
		defer unlock()
	}
	if c.makeRoom(g.Holder, g.Bytes-g.Credit, g.Inodes, d) {
		if q, err = c.Quota(g.Holder); err != nil {
			return acl.Decision{}, err
		}
		d = decide(q)
	}
	return d, nil
}

// makeRoom evicts h's oldest kept files when d refused for the quota, so
// that bytes and inodes more fit, and reports whether any went: the
// caller then decides (or runs its transaction) once more. It is for
// charges a store transaction decides again inside (a create, a kept
// version, an extended attribute), whose refusal comes after Admit; call
// it under h's lock. A holder nested in another (a session in its user)
// is refused by whichever limit has less room, so the outer holder's
// trash goes too when h's own did not make room.
func (c *Core) makeRoom(h shedfs.Holder, bytes, inodes int64, d acl.Decision) bool {
	if d.Errno != syscall.EDQUOT {
		return false
	}
	freed := c.acct.MakeRoom(h, bytes, inodes)
	if outer, ok := shedfs.OuterHolder(h); ok {
		// h's lock holds the outer holder's too (quota.Accountant.Lock).
		freed = c.acct.MakeRoom(outer, bytes, inodes) || freed
	}
	return freed
}

// Quota is what acl needs to admit a charge to h: the accountant's usage
// (stored plus pending) and limit, and the max file size. Call it under
// h's lock when the answer is acted on.
func (c *Core) Quota(h shedfs.Holder) (acl.Quota, error) {
	u, l, err := c.acct.Quota(h)
	if err != nil {
		return acl.Quota{}, fmt.Errorf("quota of %s: %w", h, err)
	}
	return acl.Quota{Usage: u, Limit: l, MaxFileSize: c.maxFileSize.Load()}, nil
}

// room decides growing the store by bytes and inodes on its disk; the
// oldest kept files of anyone go first when it is short.
func (c *Core) room(bytes, inodes int64) acl.Decision {
	if c.opts.Space == nil {
		return acl.Decision{}
	}
	d := c.opts.Space.Admit(bytes, inodes)
	for try := 0; d.Errno == syscall.ENOSPC && try < 4 && c.evictForSpace(bytes); try++ {
		d = c.opts.Space.Admit(bytes, inodes)
	}
	return d
}

// InTxn runs txn, a store transaction that charges h and decides the
// charge inside with acl (a create's inode, a restore), and runs it once
// more after evicting h's trash when it refused for the quota: the
// exact check of a charge is the transaction's, and the trash never
// causes EDQUOT there either (kept files being closed are waited for, as
// in Admit). txn returns the decision its admission
// made (the zero Decision when it admitted or never decided). Call it
// without h's lock.
func (c *Core) InTxn(h shedfs.Holder, bytes, inodes int64, txn func() (acl.Decision, error)) (acl.Decision, error) {
	until := time.Now().Add(releaseWait)
	for {
		since := c.releaseSeq()
		d, err := txn()
		if d.Errno != syscall.EDQUOT {
			return d, err
		}
		unlock := c.acct.Lock(h)
		freed := c.makeRoom(h, bytes, inodes, d)
		unlock()
		if !(freed && time.Now().Before(until)) && !c.awaitRelease(h, since, until) {
			return d, err
		}
	}
}

// AdmitInodes is the admission a store transaction makes of n new
// inodes of a holder, recording its decision in d for InTxn.
func AdmitInodes(d *acl.Decision, n int64) func(u shedfs.Usage, l shedfs.Limit) error {
	return func(u shedfs.Usage, l shedfs.Limit) error {
		*d = acl.AdmitInodes(u, l, n)
		return d.Err()
	}
}
