package quota

import (
	"errors"
	"fmt"
	"time"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// Several daemons may serve one store on etcd, each with its own
// accountant. What one has pending, the others cannot see, so each covers
// its pending bytes with a reservation in the store (metadata.Store.Reserve),
// admitted in one transaction against the stored usage, the limit and the
// other daemons' reservations. Reservations grow in chunks, so a
// sequential writer asks etcd once per ReserveChunk, not once per write,
// and go back to nothing when nothing has been pending for ReserveIdle. Bytes that leave pending
// (persisted, given back) also leave the room this daemon may use without
// asking again (holderAcct.reserved), since the stored usage now counts
// them: a reservation's room is never used twice.

// ReserveChunk is the step by which a daemon's reservation grows.
const ReserveChunk = 4 << 20

// Reserver is a ledger shared by several daemons: *metadata.Store.
type Reserver interface {
	Shared() bool
	Reserve(h metadata.Holder, total, grow int64, admit func(u metadata.Usage, l metadata.Limit, delta int64) error) error
}

// denied carries acl's refusal out of a reservation's transaction.
type denied struct{ d acl.Decision }

func (e denied) Error() string { return fmt.Sprintf("quota: %v", e.d.Errno) }

// shared is the ledger as a Reserver when other daemons may share it.
func (a *Accountant) shared() Reserver {
	if r, ok := a.ledger.(Reserver); ok && r.Shared() {
		return r
	}
	return nil
}

// Cover makes sure that h's pending bytes, grown by n, stay within what
// this daemon has reserved in a store other daemons share, growing the
// reservation (by ReserveChunk, or to exactly what is needed when a chunk
// no longer fits) when they would not. Call it under Lock, after the
// local admission allowed n and before adding it. On an embedded store it
// allows everything: the local admission was exact.
func (a *Accountant) Cover(h metadata.Holder, n int64) (acl.Decision, error) {
	r := a.shared()
	if r == nil || n <= 0 {
		return acl.Decision{}, nil
	}
	ha := a.get(h)
	a.mu.Lock()
	pending, reserved := ha.pending, ha.reserved
	a.mu.Unlock()
	need := pending + n
	if need <= reserved {
		return acl.Decision{}, nil
	}
	admit := func(u metadata.Usage, l metadata.Limit, delta int64) error {
		if d := acl.AdmitBytes(u, l, delta); !d.Allowed() {
			return denied{d}
		}
		return nil
	}
	var err error
	for _, total := range []int64{(need + ReserveChunk - 1) / ReserveChunk * ReserveChunk, need} {
		if err = r.Reserve(h, total, total-pending, admit); err == nil {
			a.mu.Lock()
			ha.reserved, ha.stored = total, total
			a.mu.Unlock()
			return acl.Decision{}, nil
		}
		var dn denied
		if !errors.As(err, &dn) {
			return acl.Decision{}, fmt.Errorf("reserve quota of %s: %w", h, err)
		}
	}
	var dn denied
	errors.As(err, &dn)
	return dn.d, nil
}

// ReserveIdle is how long a reservation stays after nothing is pending
// any more. A writer of many small files (each persisted at its close)
// then finds the room the last file left and asks etcd nothing, where
// giving the reservation back at once cost two transactions per file
// (taken at the first write, given back after the close). Meanwhile the
// other daemons see it as used: at most one chunk, for this long.
const ReserveIdle = time.Second

// shrink gives back h's reservation once nothing has been pending for
// ReserveIdle, on a goroutine of its own (Add may run under locks a store
// transaction needs).
func (a *Accountant) shrink(h metadata.Holder, ha *holderAcct) {
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
	time.AfterFunc(ReserveIdle, func() {
		ha.lock.Lock()
		defer ha.lock.Unlock()
		a.mu.Lock()
		ha.shrinking = false
		idle := ha.pending <= 0 && ha.stored > 0
		a.mu.Unlock()
		if !idle {
			return // busy again: the next Add that idles it looks again
		}
		if err := r.Reserve(h, 0, 0, nil); err != nil {
			return // it expires with the lease
		}
		a.mu.Lock()
		ha.reserved, ha.stored = 0, 0
		a.mu.Unlock()
	})
}

// LeaseRenewed puts back this daemon's reservations after its lease, and
// with it every reservation, was lost and granted again
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
	held := make(map[metadata.Holder]*holderAcct)
	for h, ha := range a.holders {
		if ha.reserved > 0 {
			held[h] = ha
		}
	}
	a.mu.Unlock()
	admit := func(u metadata.Usage, l metadata.Limit, delta int64) error {
		if d := acl.AdmitBytes(u, l, delta); !d.Allowed() {
			return denied{d}
		}
		return nil
	}
	for h, ha := range held {
		ha.lock.Lock()
		a.mu.Lock()
		pending, reserved := ha.pending, ha.reserved
		a.mu.Unlock()
		err := r.Reserve(h, reserved, reserved, admit)
		if errors.As(err, new(denied)) {
			reserved = max(pending, 0)
			err = r.Reserve(h, reserved, 0, nil)
		}
		if err != nil {
			reserved = 0 // the next write asks for room again
		}
		a.mu.Lock()
		ha.reserved = reserved
		a.mu.Unlock()
		ha.lock.Unlock()
	}
}
