package shedfs

import (
	"fmt"
	"strings"
	"syscall"
)

// Holder names who a quota is charged to: "user:alice", "group:team-alpha"
// or "share".
type Holder string

// HolderOf returns the quota holder of a zone: the user for the per-user
// zones, the group for a group zone, "share" for share.
func HolderOf(z Zone) Holder {
	switch z.Kind {
	case ZonePrivate, ZoneOutput, ZoneUploads:
		return UserHolder(z.Principal)
	case ZoneGroup:
		return GroupHolder(z.Principal)
	case ZoneSession:
		return Holder("session:" + z.Principal)
	default:
		return Holder("share")
	}
}

// Usage is what a holder has stored: bytes (logical sizes rounded up to
// ChargeUnit) and inodes.
type Usage struct {
	Bytes  int64
	Inodes int64
}

// Limit is a holder's quota. Zero means unlimited.
type Limit struct {
	Bytes  int64
	Inodes int64
}

// ChargeUnit is the granularity of byte charges: a file's logical size
// rounded up to it, so sparse files and extending truncates count.
const ChargeUnit = 4096

// Charge is the number of bytes a regular file of the given size is charged.
func Charge(size uint64) int64 {
	return int64((size + ChargeUnit - 1) / ChargeUnit * ChargeUnit)
}

// ShareHolder is the holder of the share space.
const ShareHolder Holder = "share"

// UserHolder is the holder of a user's private, output and uploads zones.
func UserHolder(user string) Holder { return Holder("user:" + user) }

// GroupHolder is the holder of a group's zone.
func GroupHolder(group string) Holder { return Holder("group:" + group) }

// ParseHolder splits a holder string into its kind ("user", "group" or
// "share") and principal, checking the form and the principal's name
// (EINVAL otherwise). It is the inverse of UserHolder, GroupHolder and
// ShareHolder.
func ParseHolder(s string) (kind, principal string, err error) {
	if Holder(s) == ShareHolder {
		return "share", "", nil
	}
	kind, principal, ok := strings.Cut(s, ":")
	if !ok || (kind != "user" && kind != "group") || CheckPrincipal(principal) != 0 {
		return "", "", fmt.Errorf("quota holder %q: %w", s, syscall.EINVAL)
	}
	return kind, principal, nil
}

// XattrOverhead is what an extended attribute costs beyond its name and
// value, like the entry header ext4 keeps for each one: it makes a flood
// of empty attributes cost something.
const XattrOverhead = 16

// XattrCost is what one extended attribute costs: its name, its value and
// a fixed overhead. It is the one measure of xattrs: the holder of the
// inode is charged it (in the same transaction as the change), the space
// of one inode's attributes is capped by their total, and fsck recounts
// usage with it.
func XattrCost(name string, valueLen int) int64 {
	return int64(XattrOverhead + len(name) + valueLen)
}

// Limits on extended attributes, as in the kernel: a name of at most 255
// bytes, a value of at most 64 KiB.
const (
	MaxXattrNameLen  = 255
	MaxXattrValueLen = 64 * 1024
)
