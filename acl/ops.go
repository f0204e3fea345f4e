package acl

import (
	"syscall"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/zones"
)

// Read decides reading e: its data, attributes, xattrs, a listing or a
// lookup in it. Everything the view can reach may be read.
func Read(a Actor, e Entry) Decision { return Check(a, OpRead, e) }

// Lock decides taking a lock on e (flock, fcntl or OFD; unlocking is
// never refused). Whoever may read a file may lock it, as on Linux, where a
// lock needs only an open descriptor: locks are advisory and stop no read
// or write, only other lockers.
func Lock(a Actor, e Entry) Decision { return Check(a, OpLock, e) }

// Write decides a write that takes regular file e from oldSize to newSize
// bytes (newSize = max(oldSize, offset+len)): e's mode, then, only when the
// file grows, the max file size and the byte quota of e's zone holder.
func Write(a Actor, e Entry, q Quota, oldSize, newSize uint64) Decision {
	return resize(a, OpWrite, e, q, oldSize, newSize)
}

// Truncate decides setting regular file e's size from oldSize to newSize
// (truncate, ftruncate, open with O_TRUNC, fallocate). Shrinking is never
// refused by size or quota.
func Truncate(a Actor, e Entry, q Quota, oldSize, newSize uint64) Decision {
	return resize(a, OpTruncate, e, q, oldSize, newSize)
}

func resize(a Actor, op Op, e Entry, q Quota, oldSize, newSize uint64) Decision {
	if d := Check(a, op, e); !d.Allowed() {
		return d
	}
	if newSize <= oldSize {
		return Decision{}
	}
	if d := AdmitSize(newSize, q.MaxFileSize); !d.Allowed() {
		return d
	}
	return AdmitBytes(q.Usage, q.Limit, chargeDelta(oldSize, newSize))
}

// fallocate(2) mode bits, as Linux numbers them.
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
	fallocZeroRange = 0x10
)

// Allocate decides the mode of fallocate(2) over length bytes at off of a
// regular file of size bytes, and returns the size the file has after it;
// whether the caller may change the file to that size is Truncate's to
// decide. Quotas charge the logical size rounded up to
// shedfs.ChargeUnit, so only blocks within that may be stored:
// allocating (mode 0) or zeroing (FALLOC_FL_ZERO_RANGE) a range, which
// extends the size past its end; punching a hole
// (FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE), which frees; and
// preallocating or zeroing with FALLOC_FL_KEEP_SIZE within the charged
// size. Preallocating past it with FALLOC_FL_KEEP_SIZE, which would store
// blocks no quota sees, and collapsing, inserting or unsharing ranges are
// EOPNOTSUPP (allocate_mode). A range past 2^64 is EFBIG.
func Allocate(mode uint32, size, off, length uint64) (uint64, Decision) {
	end := off + length
	if end < off {
		return size, deny(syscall.EFBIG, ReasonFileTooBig)
	}
	switch mode {
	case 0, fallocZeroRange:
		return max(size, end), Decision{}
	case fallocPunchHole | fallocKeepSize:
		return size, Decision{}
	case fallocKeepSize, fallocZeroRange | fallocKeepSize:
		if size <= MaxSize && end <= uint64(shedfs.Charge(size)) {
			return size, Decision{}
		}
	}
	return size, deny(syscall.EOPNOTSUPP, ReasonAllocateMode)
}

// Setattr decides chmod, chown, utimens and setting or removing an
// ordinary xattr on e. timesOnly says that only atime/mtime change: that is
// allowed on the roots of share/ and the groups (so that tar and cp -a can
// extract into them), where other changes are not. A size change is
// Truncate, not Setattr.
func Setattr(a Actor, e Entry, timesOnly bool) Decision {
	if timesOnly && e.sharedRoot() {
		return visible(a, e)
	}
	return Check(a, OpSetattr, e)
}

// Create decides creating regular file name in dir, charging one inode to
// q (the quota of dir's zone holder).
func Create(a Actor, dir Entry, name string, q Quota) Decision {
	return Mknod(a, dir, name, syscall.S_IFREG, q)
}

// Mknod decides create, mkdir or mknod of name in dir with the file type
// of mode (its S_IFMT bits), charging one inode to q. The directory is
// decided before the type, as Linux checks the directory before
// CAP_MKNOD, so that a refused directory says why whatever the type.
func Mknod(a Actor, dir Entry, name string, mode uint32, q Quota) Decision {
	if d := checkName(name); !d.Allowed() {
		return d
	}
	if d := CheckDir(a, OpCreate, dir, name); !d.Allowed() {
		return d
	}
	if d := FileType(mode); !d.Allowed() {
		return d
	}
	return AdmitInodes(q.Usage, q.Limit, 1)
}

// FileType decides the file type of a new entry (the S_IFMT bits of
// mode): character and block devices are EPERM (device_node), every other
// type is allowed.
func FileType(mode uint32) Decision {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFCHR, syscall.S_IFBLK:
		return deny(syscall.EPERM, ReasonDeviceNode)
	}
	return Decision{}
}

// Tmpfile decides an O_TMPFILE file in dir: admitted like a create there,
// charging one inode to q, with no name to check (linkat names it later,
// decided as Link).
func Tmpfile(a Actor, dir Entry, q Quota) Decision {
	if d := Check(a, OpCreate, dir); !d.Allowed() {
		return d
	}
	return AdmitInodes(q.Usage, q.Limit, 1)
}

// Passthrough reports whether a read-only open of e in a's view may hand
// the kernel the blob itself (FUSE passthrough): only when the view may
// not write e at all, since passthrough skips every per-write check and
// the kernel then forces it on every later open of the inode in the view.
func Passthrough(a Actor, e Entry) bool {
	return !Write(a, e, Quota{}, 0, 0).Allowed()
}

// WriteOpen decides opening for writing a file that the same view holds
// open passthroughReaders times for passthrough reading (its mode changed
// since they opened): ETXTBSY, as writing to a running executable, rather
// than an EIO from the kernel or a write that bypasses the quota.
func WriteOpen(passthroughReaders int) Decision {
	if passthroughReaders > 0 {
		return deny(syscall.ETXTBSY, ReasonPassthroughReaders)
	}
	return Decision{}
}

// Symlink decides creating symlink name → target in dir, under symlink
// policy p as it applies to dir's zone (zones.SymlinkPolicy.In). depth is the number of directory levels between dir's zone
// root and dir (0 when dir is the zone root).
func Symlink(a Actor, dir Entry, name, target string, depth int, p zones.SymlinkPolicy, q Quota) Decision {
	if d := checkName(name); !d.Allowed() {
		return d
	}
	if d := CheckDir(a, OpSymlink, dir, name); !d.Allowed() {
		return d
	}
	if d := SymlinkTarget(p, dir.Zone.Kind, target, depth); !d.Allowed() {
		return d
	}
	return AdmitInodes(q.Usage, q.Limit, 1)
}

// SymlinkTarget decides a symlink target alone, for a link in a zone of
// kind k (zones.CheckSymlinkTarget of p.In(k), with a reason). Call it
// also from Readlink with the link's zone and current depth: a directory
// renamed to a shallower place within the zone would otherwise let an
// older link climb out; refuse such a readlink with the Decision's errno.
func SymlinkTarget(p zones.SymlinkPolicy, k shedfs.ZoneKind, target string, depth int) Decision {
	switch e := zones.CheckSymlinkTarget(p.In(k), target, depth); e {
	case 0:
		return Decision{}
	case syscall.EINVAL:
		return deny(e, ReasonBadName)
	case syscall.ENAMETOOLONG:
		return deny(e, ReasonNameTooLong)
	default:
		return deny(e, ReasonSymlinkPolicy)
	}
}

// Link decides a hard link of existing entry e as name in dir. A link
// across zones is EXDEV. Linking an owner-mode entry of someone else is
// EPERM, like Linux's protected_hardlinks. No quota is charged: the inode
// exists already.
func Link(a Actor, e Entry, dir Entry, name string) Decision {
	if d := checkName(name); !d.Allowed() {
		return d
	}
	if d := visible(a, e); !d.Allowed() {
		return d
	}
	if d := dirStructure(a, OpLink, dir, name); !d.Allowed() {
		return d
	}
	if e.Zone != dir.Zone {
		return deny(syscall.EXDEV, ReasonCrossZone)
	}
	if d := dirPolicy(a, OpLink, dir); !d.Allowed() {
		return d
	}
	return Check(a, OpLink, e)
}

// Unlink decides removing name, which names non-directory e, from dir.
func Unlink(a Actor, dir Entry, name string, e Entry) Decision {
	return remove(a, OpUnlink, dir, name, e)
}

// Rmdir decides removing name, which names directory e, from dir.
// Emptiness is the store's to check (ENOTEMPTY).
func Rmdir(a Actor, dir Entry, name string, e Entry) Decision {
	return remove(a, OpRmdir, dir, name, e)
}

func remove(a Actor, op Op, dir Entry, name string, e Entry) Decision {
	if d := CheckDir(a, op, dir, name); !d.Allowed() {
		return d
	}
	return Check(a, op, e)
}

// Rename decides moving src, named srcName in srcDir, to dstName in dstDir.
// dst is the entry dstName names now, which the rename replaces, or nil.
// Both directories must be in src's zone (else EXDEV, so that mv copies).
// For RENAME_EXCHANGE ask twice, the second time with the sides swapped.
func Rename(a Actor, srcDir Entry, srcName string, src Entry, dstDir Entry, dstName string, dst *Entry) Decision {
	if d := checkName(dstName); !d.Allowed() {
		return d
	}
	if d := visible(a, src); !d.Allowed() {
		return d
	}
	if dst != nil {
		if d := visible(a, *dst); !d.Allowed() {
			return d
		}
	}
	if d := dirStructure(a, OpRename, srcDir, srcName); !d.Allowed() {
		return d
	}
	if d := dirStructure(a, OpRename, dstDir, dstName); !d.Allowed() {
		return d
	}
	if srcDir.Zone != dstDir.Zone || src.Zone != dstDir.Zone || dst != nil && dst.Zone != dstDir.Zone {
		return deny(syscall.EXDEV, ReasonCrossZone)
	}
	if d := dirPolicy(a, OpRename, srcDir); !d.Allowed() {
		return d
	}
	if d := dirPolicy(a, OpRename, dstDir); !d.Allowed() {
		return d
	}
	if d := Check(a, OpRename, src); !d.Allowed() {
		return d
	}
	if dst != nil {
		return Check(a, OpRename, *dst)
	}
	return Decision{}
}
