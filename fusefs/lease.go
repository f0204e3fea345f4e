package fusefs

// LeaseRenewed puts back what this daemon holds in a store other daemons
// share after its lease was lost and granted again (metadata.Store.
// FollowLease): the open marks of every inode open here, so that no other
// daemon reclaims them from now on, and every lock, so that they block the
// other daemons again (a lock another daemon took meanwhile wins: locks
// renewed). While the lease was lost the store refused this daemon's
// writes (EIO); an inode another daemon reclaimed meanwhile stays gone.
func (f *FS) LeaseRenewed() {
	if !f.store.Shared() {
		return
	}
	f.holdMu.Lock()
	f.mu.Lock()
	inos := make([]uint64, 0, len(f.open))
	for ino := range f.open {
		inos = append(inos, ino)
	}
	f.mu.Unlock()
	for _, ino := range inos {
		if err := f.store.Hold(ino); err != nil {
			f.log.Error("mark inode open again after the lease was renewed", "ino", ino, "err", err)
		}
	}
	f.holdMu.Unlock()
	f.locks.renewed()
}
