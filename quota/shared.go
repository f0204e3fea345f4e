package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// Several daemons may serve one store on etcd, each with its own
// accountant. What one has pending, the others cannot see, so each covers
// its pending bytes with a allotment in the store (metadata.Store.Allot),
// admitted in one transaction against the stored usage, the limit and the
// other daemons' allotments. Allotments grow in chunks, so a
// sequential writer asks etcd once per AllotChunk, not once per write,
// and go back to nothing when nothing has been pending for AllotIdle. Bytes that leave pending
// (persisted, given back) also leave the room this daemon may use without
// asking again (holderAcct.allotted), since the stored usage now counts
// them: a allotment's room is never used twice.

// AllotChunk is the step by which a daemon's allotment grows.
const AllotChunk = 4 << 20

// Allotter is a ledger shared by several daemons: *metadata.Store.
type Allotter interface {
	Shared() bool
	Allot(h shedfs.Holder, total, grow int64, admit func(u shedfs.Usage, l shedfs.Limit, delta int64) error) error
}

// denied carries acl's refusal out of a allotment's transaction.
type denied struct{ d acl.Decision }

func (e denied) Error() string { return fmt.Sprintf("quota: %v", e.d.Errno) }

// shared is the ledger as a Allotter when other daemons may share it.
func (a *Accountant) shared() Allotter {
	if r, ok := a.ledger.(Allotter); ok && r.Shared() {
		return r
	}
	return nil
}

// Cover makes sure that h's pending bytes, grown by n, stay within what
// this daemon has allotted in a store other daemons share, growing the
// allotment (by AllotChunk, or to exactly what is needed when a chunk
// no longer fits) when they would not. When even that is refused, the
// other daemons may hold room they do not use (a chunk not filled, an
// allotment kept for AllotIdle after their files closed): it asks them
// to give it back (Reclaimer), waits for their answers (at most
// ReclaimWait) and asks once more, so that what fits is admitted,
// exactly, however the room is spread over the daemons. Call it under
// Lock, after the local admission allowed n and before adding it. On an
// embedded store it allows everything: the local admission was exact.
func (a *Accountant) Cover(h shedfs.Holder, n int64) (acl.Decision, error) {
	r := a.shared()
	if r == nil || n <= 0 {
		return acl.Decision{}, nil
	}
	ha := a.get(h)
	a.mu.Lock()
	pending, allotted := ha.pending, ha.allotted
	a.mu.Unlock()
	need := pending + n
	if need <= allotted {
		return acl.Decision{}, nil
	}
	d, err := a.allot(r, h, ha, pending, (need+AllotChunk-1)/AllotChunk*AllotChunk, need)
	if err != nil || d.Allowed() {
		return d, err
	}
	if rc, ok := r.(Reclaimer); ok && a.reclaim(r, rc, h, ha) {
		a.mu.Lock()
		pending = ha.pending
		a.mu.Unlock()
		return a.allot(r, h, ha, pending, pending+n)
	}
	return d, nil
}

// allot sets h's allotment to the first of totals that is admitted,
// with pending bytes pending here; the refusal of the last one when none
// is.
func (a *Accountant) allot(r Allotter, h shedfs.Holder, ha *holderAcct, pending int64, totals ...int64) (acl.Decision, error) {
	admit := func(u shedfs.Usage, l shedfs.Limit, delta int64) error {
		if d := acl.AdmitBytes(u, l, delta); !d.Allowed() {
			return denied{d}
		}
		return nil
	}
	var dn denied
	for _, total := range totals {
		err := r.Allot(h, total, total-pending, admit)
		if err == nil {
			a.mu.Lock()
			ha.allotted, ha.stored = total, total
			a.mu.Unlock()
			return acl.Decision{}, nil
		}
		if !errors.As(err, &dn) {
			return acl.Decision{}, fmt.Errorf("allot quota of %s: %w", h, err)
		}
	}
	return dn.d, nil
}

// Reclaimer is a shared ledger whose daemons give back, when asked, the
// room they hold allotted and do not use: *metadata.Store.
type Reclaimer interface {
	AskAllotments(h shedfs.Holder) (rev int64, held bool, err error)
	AwaitAllotments(ctx context.Context, h shedfs.Holder, rev int64) error
}

// ReclaimWait bounds how long a refused write waits for the other
// daemons to give back room they do not use. They answer within a few
// etcd round trips; one that does not (cut off from etcd) holds its
// allotment until its lease expires, and the write is refused.
const ReclaimWait = 2 * time.Second

// reclaim asks the other daemons for the room of h they hold and do not
// use, and reports whether they all answered (then asking again is
// worth it). Called under h's lock: a request of theirs that comes in
// meanwhile (both near the limit at once) is answered from here, which
// holds the lock GiveBack's own answer would wait for.
func (a *Accountant) reclaim(r Allotter, rc Reclaimer, h shedfs.Holder, ha *holderAcct) bool {
	rev, held, err := rc.AskAllotments(h)
	if err != nil || !held {
		return false
	}
	deadline := time.Now().Add(ReclaimWait)
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		woke := make(chan bool, 1)
		go func() {
			select {
			case <-ha.wake:
				cancel()
				woke <- true
			case <-ctx.Done():
				woke <- false
			}
		}()
		err := rc.AwaitAllotments(ctx, h, rev)
		cancel()
		woken := <-woke
		if err == nil {
			return true
		}
		if a.takeWanted(ha) {
			a.giveBack(r, h, ha)
			continue
		}
		if !woken {
			return false // past ReclaimWait, or etcd failed: refused
		}
		// Woken for a request already answered: wait on.
	}
}

// reclaimFor asks the other daemons for the room of h they hold and do
// not use when bytes and inodes more fit h's stored usage and what is
// pending here under its limits (so that only their allotments refused
// them), and reports whether they answered: the caller decides again.
// Call it under h's lock.
func (a *Accountant) reclaimFor(h shedfs.Holder, bytes, inodes int64) bool {
	r := a.shared()
	rc, ok := r.(Reclaimer)
	if !ok {
		return false
	}
	u, l, err := a.own(h)
	if err != nil || l.Bytes <= 0 || u.Bytes+bytes > l.Bytes ||
		(l.Inodes > 0 && inodes > 0 && u.Inodes+inodes > l.Inodes) {
		return false
	}
	return a.reclaim(r, rc, h, a.get(h))
}

// GiveBack answers another daemon's request for h's room (Reclaimer):
// the allotment shrinks to what is pending here, or goes. It takes h's
// lock on a goroutine of its own, and a Cover of h waiting for the other
// daemons meanwhile answers in its stead (reclaim).
func (a *Accountant) GiveBack(h shedfs.Holder) {
	r := a.shared()
	if r == nil {
		return
	}
	a.mu.Lock()
	ha := a.holders[h]
	if ha == nil || ha.stored <= 0 {
		a.mu.Unlock()
		return // nothing allotted here
	}
	ha.wanted = true
	a.mu.Unlock()
	select {
	case ha.wake <- struct{}{}:
	default:
	}
	go func() {
		ha.lock.Lock()
		defer ha.lock.Unlock()
		if a.takeWanted(ha) {
			a.giveBack(r, h, ha)
		}
	}()
}

// takeWanted reports whether a request for ha's room is to be answered,
// and clears it.
func (a *Accountant) takeWanted(ha *holderAcct) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := ha.wanted
	ha.wanted = false
	return w
}

// giveBack puts h's allotment again at what is pending here (deleting it
// when nothing is), which is also the answer a waiting daemon watches
// for. Call it under h's lock: no charge is added meanwhile, and bytes
// that leave pending meanwhile leave the room too.
func (a *Accountant) giveBack(r Allotter, h shedfs.Holder, ha *holderAcct) {
	a.mu.Lock()
	target := max(ha.pending, 0)
	a.mu.Unlock()
	if err := r.Allot(h, target, 0, nil); err != nil {
		return // kept until the next ask, or the lease's end
	}
	a.mu.Lock()
	ha.allotted, ha.stored = max(ha.pending, 0), target
	a.mu.Unlock()
}

// AllotIdle is how long a allotment stays after nothing is pending
// any more. A writer of many small files (each persisted at its close)
// then finds the room the last file left and asks etcd nothing, where
// giving the allotment back at once cost two transactions per file
// (taken at the first write, given back after the close). Meanwhile the
// other daemons see it as used: at most one chunk, for this long.
const AllotIdle = time.Second

// shrink gives back h's allotment once nothing has been pending for
// AllotIdle, on a goroutine of its own (Add may run under locks a store
// transaction needs).
func (a *Accountant) shrink(h shedfs.Holder, ha *holderAcct) {
	r := a.shared()
	if r == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ha.shrinking {
		return // a check is due; it looks again if pending came back
	}
	ha.shrinking = true
	time.AfterFunc(AllotIdle, func() {
		ha.lock.Lock()
		defer ha.lock.Unlock()
		a.mu.Lock()
		ha.shrinking = false
		idle := ha.pending <= 0 && ha.stored > 0
		a.mu.Unlock()
		if !idle {
			return // busy again: the next Add that idles it looks again
		}
		if err := r.Allot(h, 0, 0, nil); err != nil {
			return // it expires with the lease
		}
		a.mu.Lock()
		ha.allotted, ha.stored = 0, 0
		a.mu.Unlock()
	})
}

// LeaseRenewed puts back this daemon's allotments after its lease, and
// with it every allotment, was lost and granted again
// (metadata.Store.FollowLease). Each is admitted again as it was; one that
// no longer fits (the other daemons used the room meanwhile) shrinks to
// the bytes already pending here, put back unadmitted: they were
// acknowledged to writers and are charged at close whatever happens, so
// the others must see them. Further writes then ask for room anew.
func (a *Accountant) LeaseRenewed() {
	r := a.shared()
	if r == nil {
		return
	}
	a.mu.Lock()
	held := make(map[shedfs.Holder]*holderAcct)
	for h, ha := range a.holders {
		if ha.allotted > 0 {
			held[h] = ha
		}
	}
	a.mu.Unlock()
	admit := func(u shedfs.Usage, l shedfs.Limit, delta int64) error {
		if d := acl.AdmitBytes(u, l, delta); !d.Allowed() {
			return denied{d}
		}
		return nil
	}
	for h, ha := range held {
		ha.lock.Lock()
		a.mu.Lock()
		pending, allotted := ha.pending, ha.allotted
		a.mu.Unlock()
		err := r.Allot(h, allotted, allotted, admit)
		if errors.As(err, new(denied)) {
			allotted = max(pending, 0)
			err = r.Allot(h, allotted, 0, nil)
		}
		if err != nil {
			allotted = 0 // the next write asks for room again
		}
		a.mu.Lock()
		ha.allotted = allotted
		a.mu.Unlock()
		ha.lock.Unlock()
	}
}
