package metadata

// STUB CONTRACT: every exported method below has its final signature and
// documented behaviour; the bodies are being implemented. Callers may code
// against this file now.

import (
	"errors"
	"syscall"
)

var errTODO = errors.New("metadata: not implemented yet")

// Store is the metadata of one shedfs store: the namespace, principals,
// quotas and usage. It is safe for concurrent use; every multi-key change is
// one transaction, retried on conflict.
type Store struct {
	kv KV
}

// Open opens (creating if empty) the metadata store in dir (the store's
// meta/ directory). A fresh store gets the schema version record and the
// share root. Open fails with ErrLocked when another process holds it, with
// ErrSchema for an unknown schema version, ErrCorrupt when badger cannot
// read it. Unless ReadOnly, it marks the store dirty until Close, so that
// WasClean tells the next Open whether the last stop was clean.
func Open(dir string, opts Options) (*Store, error) { return nil, errTODO }

// Close marks the store clean and closes it.
func (s *Store) Close() error { return errTODO }

// WasClean reports whether the previous process closed the store cleanly.
// When false, the caller must run Check with repair before serving.
func (s *Store) WasClean() bool { return false }

// Sync makes every committed change durable (badger fsync of its log).
func (s *Store) Sync() error { return errTODO }

// ShareRoot is the root directory inode of the share zone.
func (s *Store) ShareRoot() uint64 { return 0 }

// AddUser creates a user with its private, output and uploads roots
// (directories 0755, owned by uid/gid 0, zone roots have Parent 0).
// EEXIST if it exists, EINVAL for a bad name.
func (s *Store) AddUser(name string) (*User, error) { return nil, errTODO }

// GetUser returns a user, ENOENT if unknown.
func (s *Store) GetUser(name string) (*User, error) { return nil, errTODO }

// ListUsers returns every user, sorted by name.
func (s *Store) ListUsers() ([]User, error) { return nil, errTODO }

// UpdateUser changes a user's settings (Uid, Gid) in one transaction.
func (s *Store) UpdateUser(name string, fn func(u *User) error) (*User, error) {
	return nil, errTODO
}

// RemoveUser deletes a user and every inode of its three zones (their blobs
// are returned so the caller deletes them after commit).
func (s *Store) RemoveUser(name string) (blobs []uint64, err error) { return nil, errTODO }

// AddGroup creates a group with its zone root. EEXIST, EINVAL as AddUser.
func (s *Store) AddGroup(name string) (*Group, error) { return nil, errTODO }

// GetGroup returns a group, ENOENT if unknown.
func (s *Store) GetGroup(name string) (*Group, error) { return nil, errTODO }

// ListGroups returns every group, sorted by name.
func (s *Store) ListGroups() ([]Group, error) { return nil, errTODO }

// RemoveGroup deletes a group and its zone tree (blobs returned as RemoveUser).
func (s *Store) RemoveGroup(name string) (blobs []uint64, err error) { return nil, errTODO }

// AddMember adds an existing user to an existing group (ENOENT otherwise;
// adding a member twice is not an error).
func (s *Store) AddMember(group, user string) error { return errTODO }

// RemoveMember removes a user from a group (ENOENT if not a member).
func (s *Store) RemoveMember(group, user string) error { return errTODO }

// GroupsOf returns the groups a user belongs to, sorted.
func (s *Store) GroupsOf(user string) ([]string, error) { return nil, errTODO }

// GetInode returns the inode record, ENOENT if it does not exist.
func (s *Store) GetInode(ino uint64) (*Inode, error) { return nil, errTODO }

// Lookup returns the inode named name in directory parent. ENOENT if there is
// no such entry, ENOTDIR if parent is not a directory.
func (s *Store) Lookup(parent uint64, name string) (*Inode, error) { return nil, errTODO }

// ReadDir lists a directory in name order (not including . and ..).
func (s *Store) ReadDir(dir uint64) ([]DirEntry, error) { return nil, errTODO }

// Create adds a new inode named name in directory parent. From tmpl it takes
// Mode, Uid, Gid, Rdev, Target, Zone, Owner and OwnMode; it assigns Ino,
// Nlink (1, or 2 for a directory), all three times (now), Parent (for a
// directory) and Size (len(Target) for a symlink, else 0). The parent's
// mtime and ctime become now, and its Nlink grows by one for a directory.
// The zone holder's inode usage grows by one in the same transaction.
// Errors: EEXIST, ENOTDIR (parent), ENOENT (parent gone or unlinked),
// ENAMETOOLONG (> MaxNameLen bytes), EINVAL (empty, ".", "..", '/' or NUL).
// admit, when not nil, is called inside the transaction with the holder's
// current usage and limit; an error it returns aborts the create unchanged.
func (s *Store) Create(parent uint64, name string, tmpl *Inode, admit func(Usage, Limit) error) (*Inode, error) {
	return nil, errTODO
}

// Update applies fn to the inode in one read-modify-write transaction and
// returns the result. If fn changes Size of a regular file, the holder's
// byte usage moves by Charge(new)-Charge(old) in the same transaction, and
// admit (when not nil) is consulted first with the usage, the limit and
// that delta. fn must not change Ino, Zone, Nlink or Parent.
func (s *Store) Update(ino uint64, fn func(n *Inode) error, admit func(u Usage, l Limit, delta int64) error) (*Inode, error) {
	return nil, errTODO
}

// Link adds name in newParent for the existing non-directory inode ino
// (Nlink+1, ctime now; newParent mtime/ctime now). EPERM for a directory,
// EEXIST if the name exists, EXDEV if newParent is in another zone.
func (s *Store) Link(ino, newParent uint64, newName string) (*Inode, error) {
	return nil, errTODO
}

// Unlink removes name from parent. With dir set it behaves as rmdir
// (ENOTDIR if not a directory, ENOTEMPTY if it has entries), else as unlink
// (EISDIR for a directory). The inode's Nlink drops (a removed directory
// goes to 0); at 0 it is kept with an orphan record so open handles keep
// working, and the caller calls Reclaim once nothing holds it open. The
// parent's mtime/ctime become now and its Nlink drops for a directory.
// Returns the inode as it is after the change.
func (s *Store) Unlink(parent uint64, name string, dir bool) (*Inode, error) {
	return nil, errTODO
}

// Rename moves oldParent/oldName to newParent/newName as renameat2 does,
// with flags RenameNoReplace (EEXIST if the target exists) or
// RenameExchange (both must exist; swapped atomically). A plain rename
// replaces an existing target of a compatible type (EISDIR/ENOTDIR
// otherwise, ENOTEMPTY for a non-empty directory) and returns it, with its
// Nlink dropped and an orphan record at 0, for the caller to Reclaim. EINVAL
// when a directory would move into its own subtree; EXDEV when the two
// parents are in different zones. Renaming an entry onto itself (or onto
// another link of the same inode) succeeds and changes nothing.
func (s *Store) Rename(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32) (replaced *Inode, err error) {
	return nil, errTODO
}

// Reclaim deletes an inode whose Nlink is 0: its record, xattrs and orphan
// record, and uncharges its holder (one inode and its bytes). It returns the
// deleted inode so the caller removes its blob. ENOENT if already gone,
// EBUSY if the inode has links again.
func (s *Store) Reclaim(ino uint64) (*Inode, error) { return nil, errTODO }

// Orphans lists the inodes with Nlink 0 kept for open handles.
func (s *Store) Orphans() ([]uint64, error) { return nil, errTODO }

// GetXattr returns an extended attribute, ENODATA if absent.
func (s *Store) GetXattr(ino uint64, name string) ([]byte, error) { return nil, errTODO }

// SetXattr sets an extended attribute. flags XattrCreate (EEXIST if present)
// or XattrReplace (ENODATA if absent). ERANGE for a name over
// MaxXattrNameLen, E2BIG for a value over MaxXattrValueLen. ctime becomes now.
func (s *Store) SetXattr(ino uint64, name string, value []byte, flags int) error { return errTODO }

// ListXattr returns the names of an inode's extended attributes, sorted.
func (s *Store) ListXattr(ino uint64) ([]string, error) { return nil, errTODO }

// RemoveXattr deletes an extended attribute, ENODATA if absent.
func (s *Store) RemoveXattr(ino uint64, name string) error { return errTODO }

// Usage returns what a holder stores now.
func (s *Store) Usage(h Holder) (Usage, error) { return Usage{}, errTODO }

// GetLimit returns a holder's quota (zero values mean unlimited).
func (s *Store) GetLimit(h Holder) (Limit, error) { return Limit{}, errTODO }

// SetLimit sets a holder's quota.
func (s *Store) SetLimit(h Holder, l Limit) error { return errTODO }

// Holders lists every holder with a usage or limit record, sorted.
func (s *Store) Holders() ([]Holder, error) { return nil, errTODO }

// Check verifies the store against blobs and, with repair, fixes what it
// finds: entries pointing at missing inodes (removed), link counts (set to
// the number of entries, plus subdirectories for a directory), directory
// Parent fields, regular file sizes (the blob's size wins: a blob is written
// before its metadata, so it holds every write that returned), missing blobs
// (created empty, size 0), unreachable inodes and orphan records (reclaimed;
// only call Check when nothing is mounted), blobs of no inode (removed), and
// usage counters (recomputed from sizes). It records a CheckRecord.
func (s *Store) Check(blobs BlobIndex, repair bool, progress func(done, total int)) (*Report, error) {
	return nil, errTODO
}

// LastCheck returns the record of the last Check, zero if none ran.
func (s *Store) LastCheck() (CheckRecord, error) { return CheckRecord{}, errTODO }

var _ = syscall.ENOENT
