package shedfs

import (
	"syscall"
	"time"
)

// path.
type Inode struct {
	Ino    uint64
	Mode   uint32 // file type (syscall.S_IFMT bits) and permission bits
	Uid    uint32
	Gid    uint32
	Nlink  uint32
	Size   uint64
	Rdev   uint32
	Atime  time.Time
	Mtime  time.Time
	Ctime  time.Time
	Parent uint64 // directories only: the one directory holding it (0 for a zone root)
	Target string // symlinks only: the link text as the user wrote it

	Zone    Zone
	Owner   string // principal of the view that created the entry
	OwnMode OwnMode
}

// IsDir reports whether the inode is a directory.
func (n *Inode) IsDir() bool { return n.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// IsRegular reports whether the inode is a regular file, the only kind with
// a blob.
func (n *Inode) IsRegular() bool { return n.Mode&syscall.S_IFMT == syscall.S_IFREG }

// DirEntry is one name in a directory listing.
type DirEntry struct {
	Name string
	Ino  uint64
	Mode uint32 // file type bits only
}

// Roots holds the root inode of every zone of one user, so a view can be
// assembled without scanning.
type Roots struct {
	Private uint64
	Output  uint64
	Uploads uint64
}

// User is a principal that has a view.
type User struct {
	Name  string
	Roots Roots
	// Uid and Gid, when non-zero, are presented as the owner of every entry
	// in this user's view (docs/design.md, "Rules", like bindfs --force-user).
	Uid, Gid uint32
	Created  time.Time
}

// Group is a principal whose members share a zone.
type Group struct {
	Name    string
	Root    uint64
	Members []string
	Created time.Time
}
