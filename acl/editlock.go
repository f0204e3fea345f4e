package acl

import (
	"syscall"
	"time"
)

// An edit lock (the agent doors' lock_open, as Fileshed's lockedit) marks
// a file as being edited by one holder, a user's view or one session of
// it, until it expires: meanwhile nobody else may write, truncate, rename
// or delete that file, through any door, a view included. Unlike a file
// lock (flock, fcntl), which only binds those that ask for it, an edit
// lock binds every writer, so that an agent's read-modify-write cannot
// lose a change made under it.

// ReasonEditLocked: a write, truncate, rename or delete of a file that
// another holder has an edit lock on (EACCES).
const ReasonEditLocked = "edit_locked"

// EditLock is who holds an edit lock on a file, and until when.
type EditLock struct {
	User    string
	Session string
	Expires time.Time
}

// Held reports whether the lock still binds at now.
func (l EditLock) Held(now time.Time) bool { return now.Before(l.Expires) }

// HeldBy reports whether a is the lock's holder: the same user, through
// the same session (or both through the user's main view).
func (l EditLock) HeldBy(a Actor) bool { return l.User == a.User && l.Session == a.Session }

// CheckEditLock decides a change of a file (a write, truncate, rename or
// delete) by a while lock, if not nil, is on it: refused when the lock
// is held at now by someone else.
func CheckEditLock(lock *EditLock, a Actor, now time.Time) Decision {
	if lock == nil || !lock.Held(now) || lock.HeldBy(a) {
		return Decision{}
	}
	return deny(syscall.EACCES, ReasonEditLocked)
}

// ForceEditUnlock decides whether a may release an edit lock it does not
// hold on e: only e's owner may (the administrator may always, through
// the command line). EPERM otherwise.
func ForceEditUnlock(lock EditLock, a Actor, e Entry) Decision {
	if lock.HeldBy(a) || e.Owner == a.User {
		return Decision{}
	}
	return deny(syscall.EPERM, ReasonEditLocked)
}
