// Package quota is the one quota accountant of a process that serves a
// store: every admission of bytes, whether it comes from a write in a view
// (fusefs), an import or another admin API upload (daemon), is decided
// under the holder's admission lock against the holder's usage as stored
// plus what is pending — bytes admitted but not yet in the store (files
// open for writing, imports still streaming). Displays of usage (quota
// show, status, df, the quota gauges) read the same sum.
//
// It is a package of its own because both fusefs and daemon must share one
// instance, and neither may import the other's internals for it: fusefs
// may not import daemon, and an accountant inside fusefs would make every
// admin upload depend on the callback path. It imports only metadata
// (types and the stored usage) and acl (the pure decision whether a charge
// fits); the decision itself stays in acl.
package quota

import (
	"fmt"
	"sync"

	"github.com/shedfs/shedfs"
)

// Ledger is where stored usage and limits come from: *metadata.Store.
type Ledger interface {
	Usage(h shedfs.Holder) (shedfs.Usage, error)
	GetLimit(h shedfs.Holder) (shedfs.Limit, error)
}

// Accountant keeps admission exact while charges run ahead of the store.
// A charge is decided and reserved under the holder's lock, so concurrent
// admissions from any view or upload never pass the limit together. When
// no daemon runs (the CLI opens the store itself) nothing is pending and
// an accountant over the store gives the stored usage.
type Accountant struct {
	ledger Ledger

	mu      sync.Mutex
	holders map[shedfs.Holder]*holderAcct
	evictor Evictor // see MakeRoom
}

type holderAcct struct {
	lock    sync.Mutex // held while a charge is decided and reserved
	pending int64      // guarded by Accountant.mu
	// allotted is what this daemon holds allotted in a store other
	// daemons share (shared.go); guarded by Accountant.mu.
	allotted int64
	// stored is the allotment as the store has it (allotted is what
	// is left of its room here), 0 once given back; guarded by
	// Accountant.mu.
	stored int64
	// shrinking is set while a check whether to give the allotment
	// back is due (shrink); guarded by Accountant.mu.
	shrinking bool
	// wanted is set when another daemon asked for the room of the
	// allotment (GiveBack), until it is answered; guarded by
	// Accountant.mu. wake tells a Cover waiting under lock.
	wanted bool
	wake   chan struct{}
}

// New returns an accountant over the stored usage of ledger.
func New(ledger Ledger) *Accountant {
	return &Accountant{ledger: ledger, holders: make(map[shedfs.Holder]*holderAcct)}
}

func (a *Accountant) get(h shedfs.Holder) *holderAcct {
	a.mu.Lock()
	defer a.mu.Unlock()
	ha := a.holders[h]
	if ha == nil {
		ha = &holderAcct{wake: make(chan struct{}, 1)}
		a.holders[h] = ha
	}
	return ha
}

// Lock takes h's admission lock and returns its unlock. Between the two,
// a caller reads Quota, decides (with acl) and, when it admits, adds what
// it admitted with Add before unlocking; or moves a pending charge into the
// store and takes it back out of pending, so that no admission sees it
// twice or not at all.
//
// A holder nested in another (a session in its user) takes the outer
// holder's lock first, then its own: every admission of the user then
// sees the session's charges and the other way round.
func (a *Accountant) Lock(h shedfs.Holder) (unlock func()) {
	ha := a.get(h)
	if outer, ok := shedfs.OuterHolder(h); ok {
		oa := a.get(outer)
		oa.lock.Lock()
		ha.lock.Lock()
		return func() {
			ha.lock.Unlock()
			oa.lock.Unlock()
		}
	}
	ha.lock.Lock()
	return ha.lock.Unlock
}

// Pending is what h has been admitted beyond the store.
func (a *Accountant) Pending(h shedfs.Holder) int64 {
	ha := a.get(h)
	a.mu.Lock()
	defer a.mu.Unlock()
	return ha.pending
}

// Add moves h's pending bytes by delta. A positive delta is a charge and
// must have been admitted under Lock; giving back may happen any time.
func (a *Accountant) Add(h shedfs.Holder, delta int64) {
	if delta == 0 {
		return
	}
	ha := a.get(h)
	var oa *holderAcct
	if outer, ok := shedfs.OuterHolder(h); ok {
		oa = a.get(outer)
	}
	a.mu.Lock()
	ha.pending += delta
	if oa != nil {
		oa.pending += delta
	}
	if delta < 0 && ha.allotted > 0 {
		// Bytes that leave pending (persisted into the stored usage,
		// or given back) leave the allotment's room too: it was
		// admitted beside the stored usage they now join (shared.go).
		ha.allotted = max(ha.allotted+delta, 0)
	}
	idle := ha.pending <= 0 && ha.stored > 0
	a.mu.Unlock()
	if idle {
		a.shrink(h, ha)
	}
}

// Usage is what h uses: stored plus pending bytes, and its stored inodes.
// It takes h's lock, so that a charge moving from pending into the store
// is never counted twice; callers holding the lock use Quota.
func (a *Accountant) Usage(h shedfs.Holder) (shedfs.Usage, error) {
	unlock := a.Lock(h)
	defer unlock()
	return a.usage(h)
}

func (a *Accountant) usage(h shedfs.Holder) (shedfs.Usage, error) {
	u, err := a.ledger.Usage(h)
	if err != nil {
		return shedfs.Usage{}, fmt.Errorf("usage of %s: %w", h, err)
	}
	u.Bytes += a.Pending(h)
	return u, nil
}

// Quota is what admission needs: h's usage (stored plus pending) and its
// limit; for a holder nested in another, the tighter of the two
// (shedfs.Tighter), which is also what df shows. Call it under Lock when
// the answer is acted on.
func (a *Accountant) Quota(h shedfs.Holder) (shedfs.Usage, shedfs.Limit, error) {
	u, l, err := a.own(h)
	if err != nil {
		return u, l, err
	}
	if outer, ok := shedfs.OuterHolder(h); ok {
		ou, ol, err := a.own(outer)
		if err != nil {
			return u, l, err
		}
		u, l = shedfs.Tighter(u, l, ou, ol)
	}
	return u, l, nil
}

func (a *Accountant) own(h shedfs.Holder) (shedfs.Usage, shedfs.Limit, error) {
	u, err := a.usage(h)
	if err != nil {
		return u, shedfs.Limit{}, err
	}
	l, err := a.ledger.GetLimit(h)
	if err != nil {
		return u, l, fmt.Errorf("quota of %s: %w", h, err)
	}
	return u, l, nil
}
