package acl

import (
	"strings"
	"syscall"
)

// The rules of unpacking an archive into a view (unzip): decided on the
// archive's table of contents alone, before anything is written, so that
// a refused archive leaves nothing behind.

const (
	// ReasonArchiveEscape: an archive entry whose name is absolute,
	// climbs out with "..", or holds a backslash or a drive letter (a
	// path some other system would read as leaving), or that is a
	// symlink or a device (EACCES).
	ReasonArchiveEscape = "archive_escape"
	// ReasonArchiveBomb: an archive that would unpack past the bounds:
	// too many entries, too many bytes in all, or an entry compressed
	// past the ratio (EFBIG).
	ReasonArchiveBomb = "archive_bomb"
)

// ArchiveEntry is what an archive's table of contents says of an entry.
type ArchiveEntry struct {
	Name string
	// Dir marks a directory; Special a symlink, device or anything else
	// that is not a regular file or a directory.
	Dir, Special bool
	// Size is the uncompressed size; Compressed what it takes in the
	// archive.
	Size, Compressed uint64
}

// UnpackLimits bound an unpacking.
type UnpackLimits struct {
	// MaxEntries and MaxBytes bound the entries and the uncompressed
	// bytes in all; 0 is no bound.
	MaxEntries int
	MaxBytes   uint64
	// MaxRatio bounds an entry's uncompressed to compressed size, for
	// entries of at least RatioFloor bytes (small files compress far
	// without harm, and MaxBytes bounds them).
	MaxRatio   uint64
	RatioFloor uint64
	// Quota is the unpacking holder's quota: the bytes and inodes it
	// would take must fit what is left.
	Quota *Quota
}

// ArchiveName decides an entry's name: a relative path without "..",
// backslashes or a drive letter.
func ArchiveName(name string) Decision {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) ||
		len(name) >= 2 && name[1] == ':' {
		return deny(syscall.EACCES, ReasonArchiveEscape)
	}
	for part := range strings.SplitSeq(name, "/") {
		if part == ".." {
			return deny(syscall.EACCES, ReasonArchiveEscape)
		}
	}
	return Decision{}
}

// CheckUnpack decides unpacking entries under lim; when it refuses for
// one entry, bad is its index (-1 when the archive as a whole is
// refused).
func CheckUnpack(entries []ArchiveEntry, lim UnpackLimits) (d Decision, bad int) {
	if lim.MaxEntries > 0 && len(entries) > lim.MaxEntries {
		return deny(syscall.EFBIG, ReasonArchiveBomb), -1
	}
	var total uint64
	var files int64
	for i, e := range entries {
		if d := ArchiveName(e.Name); !d.Allowed() {
			return d, i
		}
		if e.Special {
			return deny(syscall.EACCES, ReasonArchiveEscape), i
		}
		files++
		if e.Dir {
			continue
		}
		if lim.MaxRatio > 0 && e.Size >= lim.RatioFloor && e.Size/max(e.Compressed, 1) > lim.MaxRatio {
			return deny(syscall.EFBIG, ReasonArchiveBomb), i
		}
		if lim.Quota != nil && lim.Quota.MaxFileSize > 0 && e.Size > lim.Quota.MaxFileSize {
			return deny(syscall.EFBIG, ReasonFileTooBig), i
		}
		if total += e.Size; total < e.Size || lim.MaxBytes > 0 && total > lim.MaxBytes {
			return deny(syscall.EFBIG, ReasonArchiveBomb), -1
		}
	}
	if q := lim.Quota; q != nil {
		if total > uint64(1<<62) {
			return deny(syscall.EDQUOT, ReasonQuotaBytes), -1
		}
		if d := AdmitBytes(q.Usage, q.Limit, int64(total)); !d.Allowed() {
			return d, -1
		}
		if d := AdmitInodes(q.Usage, q.Limit, files); !d.Allowed() {
			return d, -1
		}
	}
	return Decision{}, -1
}
