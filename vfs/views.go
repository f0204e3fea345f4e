package vfs

// ViewOptions are the settings of one user's view, whichever door serves
// it.
type ViewOptions struct {
	// ForceOwner presents every entry as owned by Uid:Gid (like bindfs
	// --force-user), so that mode bits never block what the sandbox
	// allows to a container running as another uid.
	ForceOwner bool
	Uid, Gid   uint32
	// Debug logs every request of the view's transport.
	Debug bool
}

// MountedView is a view being served, as its daemon keeps it.
type MountedView interface {
	Unmount() error
	Wait()
}

// LockInfo is one lock held through a view, as status lists it.
type LockInfo struct {
	// User is the principal of the view the lock was taken through.
	User string
	Ino  uint64
	// Path is the file as the holder's view showed it when it locked.
	Path string
	// Kind is "flock" or "posix" (an fcntl record lock, POSIX or OFD:
	// FUSE does not tell them apart).
	Kind string
	// Write is an exclusive lock; otherwise a shared one.
	Write bool
	// Start and Len are the byte range as fcntl gives it: Len 0 runs to
	// the end of the file.
	Start, Len uint64
	// Pid is the process that took the lock, as the daemon sees it.
	Pid uint32
	// Daemon is, on a store several daemons share, the one that holds
	// the lock ("HOST pid PID"; PeerLocks).
	Daemon string
}
