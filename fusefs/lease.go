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
	f.mu.Lock()
	inos := make([]uint64, 0, len(f.open))
	for ino := range f.open {
		inos = append(inos, ino)
	}
	f.mu.Unlock()
	f.marks.forget() // the lingering marks went with the lease (marks.go)
	for _, ino := range inos {
		f.holdAgain(ino)
	}
	f.locksLost(f.locks.renewed())
}

// holdAgain puts back the open mark of ino if it is still open here,
// ordered with its opens and releases by its stripe of holdMu (a release
// meanwhile took its mark back, and must not find it put again).
func (f *FS) holdAgain(ino uint64) {
	mu := &f.holdMu[ino%holdStripes]
	mu.Lock()
	defer mu.Unlock()
	f.mu.Lock()
	open := f.open[ino] != nil
	f.mu.Unlock()
	if !open {
		return
	}
	if err := f.store.Hold(ino); err != nil {
		f.log.Error("mark inode open again after the lease was renewed", "ino", ino, "err", err)
	}
}
