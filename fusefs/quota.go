package fusefs

import (
	"sync"

	"github.com/shedfs/shedfs/metadata"
)

// accountant keeps quota admission exact while writes run ahead of the
// store. Open files persist their size at flush, fsync and close; until
// then the bytes they grew by are pending here, per holder. A charge is
// admitted and reserved under the holder's lock, so concurrent writers in
// any view never pass the limit together.
type accountant struct {
	mu      sync.Mutex
	holders map[metadata.Holder]*holderAcct
}

type holderAcct struct {
	mu      sync.Mutex // held while a charge is decided and reserved
	pending int64      // guarded by accountant.mu
}

func newAccountant() *accountant {
	return &accountant{holders: make(map[metadata.Holder]*holderAcct)}
}

func (a *accountant) get(h metadata.Holder) *holderAcct {
	a.mu.Lock()
	defer a.mu.Unlock()
	ha := a.holders[h]
	if ha == nil {
		ha = &holderAcct{}
		a.holders[h] = ha
	}
	return ha
}

// lock serializes admission decisions of one holder; it returns the unlock.
func (a *accountant) lock(h metadata.Holder) func() {
	ha := a.get(h)
	ha.mu.Lock()
	return ha.mu.Unlock
}

// pending is what open files of h have grown by beyond the store.
func (a *accountant) pending(h metadata.Holder) int64 {
	ha := a.get(h)
	a.mu.Lock()
	defer a.mu.Unlock()
	return ha.pending
}

// add moves h's pending bytes by delta.
func (a *accountant) add(h metadata.Holder, delta int64) {
	if delta == 0 {
		return
	}
	ha := a.get(h)
	a.mu.Lock()
	ha.pending += delta
	a.mu.Unlock()
}
