package acl

import (
	"math"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs/metadata"
)

// Every byte a tenant can make the store keep is bounded: fallocate modes
// that would store blocks past the charged size, xattrs past the
// per-inode space or the quota, and any growth of a store whose disk is
// down to what the daemon keeps for its metadata.

func allocate(mode uint32, size, off, length uint64) Decision {
	_, d := Allocate(mode, size, off, length)
	return d
}

func TestRowAllocate(t *testing.T) {
	run(t, []row{
		{"default_mode", allocate(0, 0, 0, 1<<20), 0, ""},
		{"zero_range", allocate(fallocZeroRange, 10, 0, 100), 0, ""},
		{"punch_hole", allocate(fallocPunchHole|fallocKeepSize, 1<<20, 0, 4096), 0, ""},
		{"keep_size", allocate(fallocKeepSize, 0, 0, 200<<20), syscall.EOPNOTSUPP, ReasonAllocateMode},
		{"keep_size_past_charged_size", allocate(fallocKeepSize, 100, 50, 4047), syscall.EOPNOTSUPP, ReasonAllocateMode},
		{"keep_size_within_charged_size", allocate(fallocKeepSize, 100, 50, 4046), 0, ""},
		{"keep_size_within_size", allocate(fallocKeepSize, 1<<20, 0, 1<<20), 0, ""},
		{"zero_range_keep_size", allocate(fallocZeroRange|fallocKeepSize, 0, 0, 1<<20), syscall.EOPNOTSUPP, ReasonAllocateMode},
		{"zero_range_keep_size_within", allocate(fallocZeroRange|fallocKeepSize, 8192, 0, 8192), 0, ""},
		{"punch_without_keep_size", allocate(fallocPunchHole, 0, 0, 1), syscall.EOPNOTSUPP, ReasonAllocateMode},
		{"collapse_range", allocate(0x08, 1<<20, 0, 4096), syscall.EOPNOTSUPP, ReasonAllocateMode},
		{"insert_range", allocate(0x20, 1<<20, 0, 4096), syscall.EOPNOTSUPP, ReasonAllocateMode},
		{"unshare_range", allocate(0x40, 1<<20, 0, 4096), syscall.EOPNOTSUPP, ReasonAllocateMode},
		{"range_overflows", allocate(0, 0, math.MaxUint64, 2), syscall.EFBIG, ReasonFileTooBig},
	})
	for _, c := range []struct {
		mode                   uint32
		size, off, length, new uint64
	}{
		{0, 100, 0, 50, 100},
		{0, 100, 90, 50, 140},
		{fallocZeroRange, 0, 4096, 4096, 8192},
		{fallocPunchHole | fallocKeepSize, 8192, 4096, 1 << 20, 8192},
		{fallocKeepSize, 100, 0, 4096, 100},
	} {
		if got, d := Allocate(c.mode, c.size, c.off, c.length); got != c.new || !d.Allowed() {
			t.Errorf("Allocate(%#x, %d, %d, %d) = %d, %v; want %d", c.mode, c.size, c.off, c.length, got, d, c.new)
		}
	}
}

func TestRowXattrSpace(t *testing.T) {
	near := Quota{Usage: metadata.Usage{Bytes: 1<<20 - 100}, Limit: lim.Limit}
	run(t, []row{
		{"grow_within", AdmitXattr(lim, 0, 1000), 0, ""},
		{"grow_to_cap", AdmitXattr(lim, 1000, MaxXattrSpace), 0, ""},
		{"grow_past_cap", AdmitXattr(Quota{}, 1000, MaxXattrSpace+1), syscall.ENOSPC, ReasonXattrSpace},
		{"cap_before_quota", AdmitXattr(full, 0, MaxXattrSpace+1), syscall.ENOSPC, ReasonXattrSpace},
		{"past_quota", AdmitXattr(near, 0, 101), syscall.EDQUOT, ReasonQuotaBytes},
		{"to_quota", AdmitXattr(near, 0, 100), 0, ""},
		{"shrink_over_everything", AdmitXattr(full, MaxXattrSpace*2, MaxXattrSpace+1), 0, ""},
		{"same_size_when_full", AdmitXattr(full, 500, 500), 0, ""},
	})
}

func TestRowStoreFull(t *testing.T) {
	s := Space{FreeBytes: 100 << 20, FreeInodes: 1000, KeepBytes: 20 << 20, KeepInodes: 100}
	low := Space{FreeBytes: 10 << 20, FreeInodes: 1000, KeepBytes: 20 << 20, KeepInodes: 100}
	noInodes := Space{FreeBytes: 100 << 20, FreeInodes: 100, KeepBytes: 20 << 20, KeepInodes: 100}
	run(t, []row{
		{"room", AdmitSpace(s, 1<<20, 1), 0, ""},
		{"to_the_mark", AdmitSpace(s, 80<<20, 900), 0, ""},
		{"past_the_mark", AdmitSpace(s, 80<<20+1, 0), syscall.ENOSPC, ReasonStoreFull},
		{"inodes_past_the_mark", AdmitSpace(s, 0, 901), syscall.ENOSPC, ReasonStoreFull},
		{"below_the_mark", AdmitSpace(low, 1, 0), syscall.ENOSPC, ReasonStoreFull},
		{"no_inode_left", AdmitSpace(noInodes, 4096, 1), syscall.ENOSPC, ReasonStoreFull},
		{"bytes_without_inode_when_inodes_short", AdmitSpace(noInodes, 4096, 0), 0, ""},
		{"freeing_below_the_mark", AdmitSpace(low, -4096, -1), 0, ""},
		{"nothing_below_the_mark", AdmitSpace(low, 0, 0), 0, ""},
	})
}
