package metadata

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/shedfs/shedfs"
)

// inodeEncodingV1 is the version byte that starts every inode record, so
// the encoding can evolve without a schema-wide migration.
const inodeEncodingV1 = 1

// inodeFixedLen is the size of the fixed-width part of a v1 inode record.
const inodeFixedLen = 1 + 5*4 + 2*8 + 3*12 + 2

// encodeInode is the compact binary form of an inode (the hot path of every
// lookup and getattr decodes it, so no JSON). Ino is the key, not the value.
func encodeInode(n *shedfs.Inode) []byte {
	b := make([]byte, 0, inodeFixedLen+3+len(n.Target)+len(n.Zone.Principal)+len(n.Owner))
	b = append(b, inodeEncodingV1)
	b = binary.BigEndian.AppendUint32(b, n.Mode)
	b = binary.BigEndian.AppendUint32(b, n.Uid)
	b = binary.BigEndian.AppendUint32(b, n.Gid)
	b = binary.BigEndian.AppendUint32(b, n.Nlink)
	b = binary.BigEndian.AppendUint32(b, n.Rdev)
	b = binary.BigEndian.AppendUint64(b, n.Size)
	b = binary.BigEndian.AppendUint64(b, n.Parent)
	for _, t := range [3]time.Time{n.Atime, n.Mtime, n.Ctime} {
		b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
		b = binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
	}
	b = append(b, byte(n.Zone.Kind), byte(n.OwnMode))
	for _, s := range [3]string{n.Target, n.Zone.Principal, n.Owner} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// decodeInode parses a record written by encodeInode.
func decodeInode(ino uint64, b []byte) (*shedfs.Inode, error) {
	if len(b) < inodeFixedLen || b[0] != inodeEncodingV1 {
		return nil, fmt.Errorf("inode %d: bad record (%d bytes): %w", ino, len(b), ErrCorrupt)
	}
	be := binary.BigEndian
	n := &shedfs.Inode{Ino: ino}
	p := b[1:]
	n.Mode = be.Uint32(p[0:])
	n.Uid = be.Uint32(p[4:])
	n.Gid = be.Uint32(p[8:])
	n.Nlink = be.Uint32(p[12:])
	n.Rdev = be.Uint32(p[16:])
	n.Size = be.Uint64(p[20:])
	n.Parent = be.Uint64(p[28:])
	p = p[36:]
	for _, t := range [3]*time.Time{&n.Atime, &n.Mtime, &n.Ctime} {
		sec, nsec := int64(be.Uint64(p)), be.Uint32(p[8:])
		if nsec >= 1e9 {
			return nil, fmt.Errorf("inode %d: bad time: %w", ino, ErrCorrupt)
		}
		*t = time.Unix(sec, int64(nsec))
		p = p[12:]
	}
	n.Zone.Kind = shedfs.ZoneKind(p[0])
	n.OwnMode = shedfs.OwnMode(p[1])
	p = p[2:]
	for _, s := range [3]*string{&n.Target, &n.Zone.Principal, &n.Owner} {
		l, k := binary.Uvarint(p)
		if k <= 0 || l > uint64(len(p)-k) {
			return nil, fmt.Errorf("inode %d: bad string: %w", ino, ErrCorrupt)
		}
		*s = string(p[k : k+int(l)])
		p = p[k+int(l):]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("inode %d: %d trailing bytes: %w", ino, len(p), ErrCorrupt)
	}
	return n, nil
}

// entryValue is a directory entry's value: child inode and its file type
// (S_IFMT >> 12), so a listing needs no inode reads.
func entryValue(ino uint64, mode uint32) []byte {
	v := make([]byte, 9)
	binary.BigEndian.PutUint64(v, ino)
	v[8] = byte((mode & 0o170000) >> 12)
	return v
}

func decodeEntry(v []byte) (ino uint64, mode uint32, err error) {
	if len(v) != 9 {
		return 0, 0, fmt.Errorf("directory entry of %d bytes: %w", len(v), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), uint32(v[8]) << 12, nil
}

// encodePair stores two int64 counters (usage and limit records).
func encodePair(a, b int64) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, uint64(a))
	binary.BigEndian.PutUint64(v[8:], uint64(b))
	return v
}

func decodePair(v []byte) (int64, int64, error) {
	if len(v) != 16 {
		return 0, 0, fmt.Errorf("counter record of %d bytes: %w", len(v), ErrCorrupt)
	}
	return int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])), nil
}

func encodeU64(x uint64) []byte { return binary.BigEndian.AppendUint64(nil, x) }

func decodeU64(v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("number record of %d bytes: %w", len(v), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
}
