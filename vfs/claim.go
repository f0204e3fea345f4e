package vfs

import (
	"fmt"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// Claim is bytes admitted for a transfer that is not in the store yet (an
// import streaming in): pending in the holder's usage until Commit or
// Release. It belongs to the one goroutine that runs the transfer.
type Claim struct {
	c      *Core
	h      shedfs.Holder
	credit int64 // freed when the transfer lands
	held   int64 // this claim's share of h's pending bytes
	done   bool
}

// Claim admits charging bytes to h for a transfer, of which credit will
// be freed when it lands (the file a replace swaps out), and holds bytes
// pending. A refusal is acl's decision, with nothing held.
func (c *Core) Claim(h shedfs.Holder, bytes, credit int64) (*Claim, acl.Decision, error) {
	cl := &Claim{c: c, h: h, credit: credit}
	d, err := cl.Grow(bytes, 0)
	if err != nil || !d.Allowed() {
		return nil, d, err
	}
	return cl, d, nil
}

// Held is what the claim holds pending now.
func (cl *Claim) Held() int64 { return cl.held }

// Grow admits holding n more bytes (a transfer longer than announced),
// of which disk more reach the store's disk now.
func (cl *Claim) Grow(n, disk int64) (acl.Decision, error) {
	if cl.done {
		return acl.Decision{}, fmt.Errorf("quota claim of %s: already ended", cl.h)
	}
	// Once landed, the usage is what is stored and pending (which counts
	// what the claim holds and the file to be freed) plus n, less the
	// credit.
	adm, d, err := cl.c.Admit(Growth{Holder: cl.h, Bytes: n, Credit: cl.credit, Disk: disk, Allot: true})
	if err != nil || !d.Allowed() {
		return d, err
	}
	defer adm.Done()
	cl.c.acct.Add(cl.h, n)
	cl.held += n
	return d, nil
}

// Admit is the last check, made inside Commit's transaction: whether the
// stored usage u, with what the rest of the process holds pending, takes
// delta, the transfer's net charge as the transaction computes it (the
// credit may have gone meanwhile, when the file to replace was deleted).
func (cl *Claim) Admit(u shedfs.Usage, l shedfs.Limit, delta int64) error {
	u.Bytes += cl.c.acct.Pending(cl.h) - cl.held
	return acl.AdmitBytes(u, l, delta).Err()
}

// Commit runs store, the transaction that charges the transfer to the
// stored usage, under the holder's lock, and on success ends the claim;
// on failure the claim stays for Release.
func (cl *Claim) Commit(store func() error) error {
	if cl.done {
		return fmt.Errorf("quota claim of %s: already ended", cl.h)
	}
	unlock := cl.c.acct.Lock(cl.h)
	defer unlock()
	if err := store(); err != nil {
		return err
	}
	cl.end()
	return nil
}

// Release gives back what the claim holds; after Commit it does nothing,
// so it can be deferred.
func (cl *Claim) Release() {
	if cl == nil || cl.done {
		return
	}
	cl.end()
}

func (cl *Claim) end() {
	cl.c.acct.Add(cl.h, -cl.held)
	cl.held = 0
	cl.done = true
}
