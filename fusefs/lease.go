package fusefs

// LeaseRenewed puts back what this daemon holds in a store other daemons
// share after its lease was lost and granted again (metadata.Store.
// FollowLease): the open marks of every inode open here, so that no other
// daemon reclaims them from now on, and every lock, so that they block the
// other daemons again (a lock another daemon took meanwhile wins, and I/O
// through the descriptions that held it fails: locks_lost.go). While the lease was lost the store refused this daemon's
// writes (EIO); an inode another daemon reclaimed meanwhile stays gone.
func (f *FS) LeaseRenewed() {
	if !f.store.Shared() {
		return
	}
	f.core.LeaseRenewed()
	f.locksLost(f.locks.renewed())
}
