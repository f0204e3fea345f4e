package acl

import "syscall"

// SnapshotChange decides any change inside a view's snapshots/: creating,
// writing, truncating, renaming or removing anything there. A snapshot is
// frozen, so always EROFS (snapshot_readonly); it goes only by the
// administrator's snapshot delete.
func SnapshotChange() Decision { return deny(syscall.EROFS, ReasonSnapshotReadonly) }

// SnapshotRead decides reading a snapshot of a view: the user's own,
// taken of what the view showed, so allowed like reading a file the user
// owns.
func SnapshotRead() Decision { return Decision{} }
