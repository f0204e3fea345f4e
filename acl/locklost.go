package acl

import "syscall"

// ReasonLockLost: I/O (a read, write or fallocate) or a lock request
// through an open file description that held a file lock which the daemon
// lost: its lease on a shared store ended, and another daemon took a
// conflicting lock before it was renewed (EIO, as the Linux NFSv4 client
// answers with recover_lost_locks off). A process so never goes on writing
// a shared file believing it still holds the lock; a fresh open works.
const ReasonLockLost = "lock_lost"

// LockLost decides I/O through an open file description: refused when a
// lock taken through it was lost (lost), except an unlock, which only
// lets go and is never refused.
func LockLost(lost, unlock bool) Decision {
	if lost && !unlock {
		return deny(syscall.EIO, ReasonLockLost)
	}
	return Decision{}
}
