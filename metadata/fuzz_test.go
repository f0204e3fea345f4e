package metadata

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

func FuzzValidEntryName(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a", "a/b", "a\x00", "...", " ", "é", strings.Repeat("x", 255), strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidEntryName(name)
		bad := name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00")
		var errno syscall.Errno
		switch {
		case len(name) > MaxNameLen:
			if !errors.As(err, &errno) || errno != syscall.ENAMETOOLONG {
				t.Fatalf("%q: %v", name, err)
			}
		case bad:
			if !errors.As(err, &errno) || errno != syscall.EINVAL {
				t.Fatalf("%q: %v", name, err)
			}
		case err != nil:
			t.Fatalf("%q rejected: %v", name, err)
		}
		perr := ValidPrincipal(name)
		if perr == nil && (len(name) > 64 || bad || strings.ToLower(name) != name) {
			t.Fatalf("principal %q accepted", name)
		}
	})
}

func FuzzInodeEncoding(f *testing.F) {
	f.Add(uint64(1024), uint32(syscall.S_IFREG|0o644), uint32(1000), uint32(100), uint32(1), uint64(4096), uint32(0),
		int64(1700000000), int64(123), uint64(0), "", uint8(shedfs.ZoneShare), "", "alice", uint8(shedfs.OwnModeOwner))
	f.Add(uint64(1<<63), uint32(syscall.S_IFLNK|0o777), uint32(0), uint32(0), uint32(1), uint64(3), uint32(7),
		int64(-62135596800), int64(0), uint64(5), "../x", uint8(shedfs.ZoneGroup), "team", "", uint8(0))
	f.Fuzz(func(t *testing.T, ino uint64, mode, uid, gid, nlink uint32, size uint64, rdev uint32,
		sec, nsec int64, parent uint64, target string, zk uint8, zp, owner string, om uint8) {
		tm := time.Unix(sec, nsec%1e9)
		n := &shedfs.Inode{Ino: ino, Mode: mode, Uid: uid, Gid: gid, Nlink: nlink, Size: size, Rdev: rdev,
			Atime: tm, Mtime: tm.Add(time.Nanosecond), Ctime: time.Unix(sec/2, 0), Parent: parent, Target: target,
			Zone: shedfs.Zone{Kind: shedfs.ZoneKind(zk), Principal: zp}, Owner: owner, OwnMode: shedfs.OwnMode(om)}
		b := encodeInode(n)
		got, err := decodeInode(ino, b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !got.Atime.Equal(n.Atime) || !got.Mtime.Equal(n.Mtime) || !got.Ctime.Equal(n.Ctime) {
			t.Fatalf("times %v %v %v, want %v %v %v", got.Atime, got.Mtime, got.Ctime, n.Atime, n.Mtime, n.Ctime)
		}
		got.Atime, got.Mtime, got.Ctime = n.Atime, n.Mtime, n.Ctime
		if *got != *n {
			t.Fatalf("round trip\n got  %+v\n want %+v", got, n)
		}
		// Any prefix or mangling of a record is an error, never a panic.
		for i := 0; i < len(b); i += 7 {
			if _, err := decodeInode(ino, b[:i]); err == nil {
				t.Fatalf("truncated record of %d bytes accepted", i)
			}
		}
		decodeInode(ino, append(b[:len(b):len(b)], 0))
		decodeEntry(b)
		decodePair(b)
	})
}

func FuzzDecodeInode(f *testing.F) {
	f.Add(encodeInode(&shedfs.Inode{Mode: syscall.S_IFDIR, Owner: "x"}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeInode(7, b)
		if err == nil && n.Ino != 7 {
			t.Fatal("ino not from key")
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error not ErrCorrupt: %v", err)
		}
	})
}
