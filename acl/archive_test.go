package acl

import (
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

func TestCheckUnpack(t *testing.T) {
	lim := UnpackLimits{MaxEntries: 3, MaxBytes: 1000, MaxRatio: 100, RatioFloor: 100}
	file := func(name string, size, comp uint64) ArchiveEntry {
		return ArchiveEntry{Name: name, Size: size, Compressed: comp}
	}
	quota := &Quota{Usage: shedfs.Usage{Bytes: 900, Inodes: 8}, Limit: shedfs.Limit{Bytes: 1000, Inodes: 10}}
	for _, c := range []struct {
		name    string
		entries []ArchiveEntry
		lim     UnpackLimits
		errno   syscall.Errno
		reason  string
		bad     int
	}{
		{"fine", []ArchiveEntry{{Name: "d/", Dir: true}, file("d/a.txt", 500, 100)}, lim, 0, "", -1},
		{"dot dot", []ArchiveEntry{file("ok", 1, 1), file("../x", 1, 1)}, lim, syscall.EACCES, ReasonArchiveEscape, 1},
		{"dot dot inside", []ArchiveEntry{file("a/../../x", 1, 1)}, lim, syscall.EACCES, ReasonArchiveEscape, 0},
		{"absolute", []ArchiveEntry{file("/etc/passwd", 1, 1)}, lim, syscall.EACCES, ReasonArchiveEscape, 0},
		{"backslash", []ArchiveEntry{file(`..\x`, 1, 1)}, lim, syscall.EACCES, ReasonArchiveEscape, 0},
		{"drive", []ArchiveEntry{file("C:x", 1, 1)}, lim, syscall.EACCES, ReasonArchiveEscape, 0},
		{"symlink", []ArchiveEntry{{Name: "l", Special: true}}, lim, syscall.EACCES, ReasonArchiveEscape, 0},
		{"too many entries", []ArchiveEntry{file("a", 1, 1), file("b", 1, 1), file("c", 1, 1), file("d", 1, 1)}, lim, syscall.EFBIG, ReasonArchiveBomb, -1},
		{"too many bytes", []ArchiveEntry{file("a", 600, 600), file("b", 600, 600)}, lim, syscall.EFBIG, ReasonArchiveBomb, -1},
		{"ratio", []ArchiveEntry{file("zeros", 900, 2)}, lim, syscall.EFBIG, ReasonArchiveBomb, 0},
		{"ratio of a small file is no bomb", []ArchiveEntry{file("zeros", 99, 0)}, lim, 0, "", -1},
		{"no bounds, overflow", []ArchiveEntry{file("a", 1<<63, 1<<63), file("b", 1<<63, 1<<63)}, UnpackLimits{}, syscall.EFBIG, ReasonArchiveBomb, -1},
		{"quota bytes", []ArchiveEntry{file("a", 200, 200)}, UnpackLimits{Quota: quota}, syscall.EDQUOT, ReasonQuotaBytes, -1},
		{"quota inodes", []ArchiveEntry{file("a", 1, 1), file("b", 1, 1), file("c", 1, 1)}, UnpackLimits{Quota: quota}, syscall.EDQUOT, ReasonQuotaInodes, -1},
		{"max file size", []ArchiveEntry{file("a", 50, 50)}, UnpackLimits{Quota: &Quota{MaxFileSize: 10}}, syscall.EFBIG, ReasonFileTooBig, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, bad := CheckUnpack(c.entries, c.lim)
			if d.Errno != c.errno || d.Reason != c.reason || bad != c.bad {
				t.Fatalf("CheckUnpack = %v, %d; want %v %s %d", d, bad, c.errno, c.reason, c.bad)
			}
		})
	}
}
