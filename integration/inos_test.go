package integration

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInodeNumbersRevealNothing is the case of the issue, through the
// kernel: carol creates a file, alice creates 37 in team-alpha (which
// carol cannot see), carol creates another. The gap between carol's two
// numbers must not count alice's creates, nor any be small; readdir shows
// the numbers stat shows.
func TestInodeNumbersRevealNothing(t *testing.T) {
	t.Parallel()
	s := startTeam(t)
	ino := func(p string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	mustWrite(t, s.In("carol", "a"), nil, 0o644)
	for i := range 37 {
		mustWrite(t, s.In("alice", "groups", "team-alpha", fmt.Sprint("f", i)), nil, 0o644)
	}
	mustWrite(t, s.In("carol", "b"), nil, 0o644)
	var carol []uint64
	for i := range 20 {
		p := s.In("carol", fmt.Sprint("c", i))
		mustWrite(t, p, nil, 0o644)
		carol = append(carol, ino(p))
	}
	a, b := ino(s.In("carol", "a")), ino(s.In("carol", "b"))
	const near = 1 << 20
	if absDiff(a, b) < near {
		t.Errorf("carol's files a and b have inode numbers %d and %d: %d apart across alice's 37 creates", a, b, absDiff(a, b))
	}
	for i := 1; i < len(carol); i++ {
		if absDiff(carol[i], carol[i-1]) < near {
			t.Errorf("carol's sequential creates c%d and c%d: inode numbers %d and %d", i-1, i, carol[i-1], carol[i])
		}
	}
	if got := direntIno(t, s.In("carol"), "a"); got != a {
		t.Errorf("readdir shows a with inode %d, stat %d", got, a)
	}
	s.Stop()
	fsckClean(t, s.Store)
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// direntIno reads dir with getdents64 and returns the d_ino of name.
func direntIno(t *testing.T, dir, name string) uint64 {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			t.Fatalf("getdents %s: %v", dir, err)
		}
		if n == 0 {
			t.Fatalf("readdir %s: no %s", dir, name)
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for off := 0; off < n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if unix.ByteSliceToString(buf[off+19:off+reclen]) == name {
				return binary.NativeEndian.Uint64(buf[off:])
			}
			off += reclen
		}
	}
}
