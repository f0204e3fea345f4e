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

// SnapshotCopy decides the copy of a blob shared with a snapshot before
// a change to the live file: the old content becomes the snapshot's
// alone, and its charge (charge bytes) is the holder's, like any growth
// (EDQUOT, quota_bytes); the holder frees it by deleting the snapshot.
func SnapshotCopy(q Quota, charge int64) Decision {
	return AdmitBytes(q.Usage, q.Limit, charge)
}
