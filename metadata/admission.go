package metadata

import "github.com/shedfs/shedfs"

// On a store several daemons share, each daemon covers the bytes pending
// in its open files with a reservation in the store (reserve.go), and
// writes within it without asking again. A charge that lands in the
// stored usage directly (an import's publish, an xattr, a size set
// outside the views) must therefore leave the other daemons' reservations
// their room, or the holder passes its limit once they use it: admission
// counts them (admission). This daemon's own pending bytes are its
// caller's to add, as on an embedded store.

// admission is what a charge to h is admitted against: h's stored usage
// and limit (quota) with the other daemons' reservations of h counted as
// used. The reservations are read in the transaction and compared at its
// commit, so one that grows meanwhile makes it run again.
func (o *op) admission(h shedfs.Holder) (shedfs.Usage, shedfs.Limit, error) {
	u, l, err := o.quota(h)
	if err != nil {
		return u, l, err
	}
	if r, ok := o.tx.(allotTxn); ok {
		others, err := r.allotments(h)
		if err != nil {
			return u, l, err
		}
		u.Bytes += others
	}
	return u, l, nil
}
