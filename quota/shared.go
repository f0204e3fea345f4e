package quota

import (
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
// no longer fits) when they would not. Call it under Lock, after the
// local admission allowed n and before adding it. On an embedded store it
// allows everything: the local admission was exact.
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
	admit := func(u shedfs.Usage, l shedfs.Limit, delta int64) error {
		if d := acl.AdmitBytes(u, l, delta); !d.Allowed() {
			return denied{d}
		}
		return nil
	}
	var err error
	for _, total := range []int64{(need + AllotChunk - 1) / AllotChunk * AllotChunk, need} {
		if err = r.Allot(h, total, total-pending, admit); err == nil {
			a.mu.Lock()
			ha.allotted, ha.stored = total, total
			a.mu.Unlock()
			return acl.Decision{}, nil
		}
		var dn denied
		if !errors.As(err, &dn) {
			return acl.Decision{}, fmt.Errorf("allot quota of %s: %w", h, err)
		}
	}
	var dn denied
	errors.As(err, &dn)
	return dn.d, nil
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
