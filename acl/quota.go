package acl

import (
	"math"
	"syscall"

	"github.com/shedfs/shedfs"
)

// Quota is what admission needs to know about the holder of the zone an
// operation charges: its usage now, its limit, and the global max file
// size. The zero Quota admits everything.
type Quota struct {
	Usage       shedfs.Usage
	Limit       shedfs.Limit
	MaxFileSize uint64 // 0: no limit
}

// MaxSize is the largest file size shedfs represents (a multiple of
// shedfs.ChargeUnit below 2^63, so that every charge fits an int64).
// Larger sizes are EFBIG whatever the configured limit.
const MaxSize = uint64(math.MaxInt64) &^ (shedfs.ChargeUnit - 1)

// AdmitBytes decides charging delta bytes to a holder using usage under
// limit: EDQUOT when delta > 0, limit.Bytes > 0 and usage.Bytes+delta would
// pass limit.Bytes. Freeing (delta <= 0) is always admitted, even over the
// limit.
func AdmitBytes(usage shedfs.Usage, limit shedfs.Limit, delta int64) Decision {
	if over(usage.Bytes, limit.Bytes, delta) {
		return deny(syscall.EDQUOT, ReasonQuotaBytes)
	}
	return Decision{}
}

// AdmitInodes decides charging delta inodes, like AdmitBytes.
func AdmitInodes(usage shedfs.Usage, limit shedfs.Limit, delta int64) Decision {
	if over(usage.Inodes, limit.Inodes, delta) {
		return deny(syscall.EDQUOT, ReasonQuotaInodes)
	}
	return Decision{}
}

// Overshoot is how far usage is above limit, per resource: 0 where it is
// within, or where the limit is 0 (unlimited). Admission never lets a
// charge make one; a limit lowered below the usage does, and it stays
// until data is deleted or the limit raised: growth is refused meanwhile,
// fsck reports it (over-quota), and quota set and show say it.
func Overshoot(usage shedfs.Usage, limit shedfs.Limit) shedfs.Usage {
	var o shedfs.Usage
	if limit.Bytes > 0 && usage.Bytes > limit.Bytes {
		o.Bytes = usage.Bytes - limit.Bytes
	}
	if limit.Inodes > 0 && usage.Inodes > limit.Inodes {
		o.Inodes = usage.Inodes - limit.Inodes
	}
	return o
}

// over reports used+delta > limit without overflowing.
func over(used, limit, delta int64) bool {
	if delta <= 0 || limit <= 0 {
		return false
	}
	return used > limit || delta > limit-used
}

// AdmitSize decides a file reaching newSize bytes: EFBIG when maxFileSize
// > 0 and newSize > maxFileSize, or newSize > MaxSize.
func AdmitSize(newSize, maxFileSize uint64) Decision {
	if newSize > MaxSize || maxFileSize > 0 && newSize > maxFileSize {
		return deny(syscall.EFBIG, ReasonFileTooBig)
	}
	return Decision{}
}

// chargeDelta is the change in bytes charged when a file goes from
// oldSize to newSize, both at most MaxSize.
func chargeDelta(oldSize, newSize uint64) int64 {
	return shedfs.Charge(newSize) - shedfs.Charge(oldSize)
}

// Space is what the disk that holds the store has free, and what the
// daemon keeps free for its own metadata writes: the metadata engine
// writes through memory-mapped files, and a page without disk space
// behind it kills the process.
type Space struct {
	FreeBytes, FreeInodes int64
	KeepBytes, KeepInodes int64
}

// AdmitSpace decides growing the store by bytes and inodes: ENOSPC
// (store_full) when the disk would then have less free than s keeps.
// Nothing that does not grow (bytes and inodes <= 0) is refused, so
// deletes always work on a full disk.
func AdmitSpace(s Space, bytes, inodes int64) Decision {
	if bytes > 0 && s.FreeBytes-bytes < s.KeepBytes || inodes > 0 && s.FreeInodes-inodes < s.KeepInodes {
		return deny(syscall.ENOSPC, ReasonStoreFull)
	}
	return Decision{}
}
