package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"path"
	"syscall"

	"github.com/shedfs/shedfs"
)

// A fork copies a tree (a snapshot's, or a session's scratch as it is)
// into a new session's scratch without copying bytes: the new files'
// blobs are hard links of the source's (blobs/snapshot.go), copied by the
// core on the first change (vfs/cow.go). The records are new inodes like
// any, charged like copies. Files that share a blob this way form a fork
// group, so that a copy-up can tell whether the content it leaves behind
// is still another live file's or the snapshots' alone:
//
//	'f' root member      empty: member was forked from root's content (u64 BE each)
//	'g' member           root, u64 BE
//
// A group is flat: a fork of a member joins its root's group. Records of
// inodes gone since are left; a blob that is not there shares nothing.
const (
	pForkMember = 'f'
	pForkRoot   = 'g'
)

func forkMemberKey(root, member uint64) []byte {
	return binary.BigEndian.AppendUint64(inoKey(pForkMember, root), member)
}

// ForkEntry is one entry of a tree to fork: Path relative to its root
// ("" is the root, which the fork does not make), the source's inode
// (entries of one Src are hard links of one file) and the attributes the
// copy gets. Ino is the new inode, allocated beforehand (AllocInos), so
// that its blob can be linked before the records name it.
type ForkEntry struct {
	SnapEntry
	Ino uint64
	// Copied says the content was copied, not linked (from outside the
	// store): the file shares no blob, and joins no fork group.
	Copied bool
}

// AllocInos allocates n inode numbers.
func (s *Store) AllocInos(n int) ([]uint64, error) {
	out := make([]uint64, n)
	for i := range out {
		var err error
		if out[i], err = s.allocIno(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ForkTree makes the entries es (parents before children, as a
// snapshot's or a walk's order gives them) below directory root, owned
// by owner in root's zone, in batches of transactions: each batch is
// admitted as a whole (admit gets the holder's usage and limit, and the
// bytes and inodes the batch adds) and charged to root's holder. The
// files join their sources' fork groups. A fork cut short leaves the
// entries made so far; the caller removes the tree.
func (s *Store) ForkTree(root uint64, owner string, es []ForkEntry, admit func(u shedfs.Usage, l shedfs.Limit, bytes, inodes int64) error) error {
	dirs := map[string]uint64{"": root}
	made := map[uint64]uint64{} // source inode -> new inode, for hard links
	size := forkBatchStart
	for len(es) > 0 {
		n := min(len(es), size)
		batch := es[:n]
		var newDirs map[string]uint64
		var newMade map[uint64]uint64
		err := s.update(func(o *op) error {
			// A transaction may run again: what it made is kept
			// apart until it commits.
			newDirs, newMade = map[string]uint64{}, map[uint64]uint64{}
			return o.forkBatch(root, owner, batch, forkMade[string]{dirs, newDirs}, forkMade[uint64]{made, newMade}, admit)
		})
		if err != nil && isTxnTooBig(err) && size > 1 {
			size /= 2
			continue
		}
		if err != nil {
			return fmt.Errorf("fork: %w", err)
		}
		es = es[n:]
		maps.Copy(dirs, newDirs)
		maps.Copy(made, newMade)
	}
	return nil
}

// forkBatchStart is how many entries one transaction of a fork makes at
// first: about six writes each, within badger's transaction size and the
// --max-txn-ops the README asks etcd for. A batch too big for the engine
// is halved.
const forkBatchStart = 512

// forkMade is what a fork made before this batch (done) and in it (now).
type forkMade[K comparable] struct{ done, now map[K]uint64 }

func (m forkMade[K]) get(k K) (uint64, bool) {
	if v, ok := m.now[k]; ok {
		return v, true
	}
	v, ok := m.done[k]
	return v, ok
}

// forkBatch makes one batch of a fork's entries: dirs are the new
// directories by path, made the new files by source inode.
func (o *op) forkBatch(root uint64, owner string, batch []ForkEntry, dirs forkMade[string], made forkMade[uint64], admit func(u shedfs.Usage, l shedfs.Limit, bytes, inodes int64) error) error {
	r, err := o.dir(root)
	if err != nil {
		return err
	}
	h := shedfs.HolderOf(r.Zone)
	var bytes, inodes int64
	for _, e := range batch {
		if e.Path == "" {
			continue
		}
		dir, ok := dirs.get(parentPath(e.Path))
		if !ok {
			return fmt.Errorf("%s: its directory is not in the tree: %w", e.Path, syscall.EINVAL)
		}
		p, err := o.dir(dir)
		if err != nil {
			return err
		}
		name := path.Base(e.Path)
		if err := ValidEntryName(name); err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		if ino, ok := made.get(e.SnapEntry.Ino); ok && e.Mode&syscall.S_IFMT == syscall.S_IFREG {
			// Another name of a file made already: a hard link.
			n, err := o.inode(ino)
			if err != nil {
				return err
			}
			n.Nlink++
			o.put(n)
			o.touchDir(p)
			if err := o.setEntry(p.Ino, name, n); err != nil {
				return err
			}
			continue
		}
		n := &shedfs.Inode{
			Ino: e.Ino, Mode: e.Mode, Uid: e.Uid, Gid: e.Gid, Nlink: 1,
			Atime: e.Mtime, Mtime: e.Mtime, Ctime: o.now,
			Zone: r.Zone, Owner: owner, OwnMode: r.OwnMode,
		}
		switch e.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			n.Nlink, n.Parent = 2, p.Ino
			p.Nlink++
			o.newEmptyDir(n.Ino)
			dirs.now[e.Path] = n.Ino
		case syscall.S_IFLNK:
			n.Target, n.Size = e.Target, uint64(len(e.Target))
		case syscall.S_IFREG:
			n.Size = uint64(e.Size)
			made.now[e.SnapEntry.Ino] = n.Ino
			if e.Copied {
				break
			}
			if err := o.joinFork(e.SnapEntry.Ino, n.Ino); err != nil {
				return err
			}
		default:
			// Devices, fifos and sockets: the store keeps them as
			// they are.
		}
		o.touchDir(p)
		o.put(n)
		if err := o.setEntry(p.Ino, name, n); err != nil {
			return err
		}
		if err := o.setBirth(n.Ino, o.now); err != nil {
			return err
		}
		bytes += chargeOf(n)
		inodes++
	}
	if admit != nil {
		u, l, err := o.quota(h)
		if err != nil {
			return err
		}
		if err := admit(u, l, bytes, inodes); err != nil {
			return err
		}
	}
	return o.charge(h, bytes, inodes)
}

// parentPath is the path of p's directory in a tree ("" for the root).
func parentPath(p string) string {
	d := path.Dir(p)
	if d == "." {
		return ""
	}
	return d
}

// joinFork puts member in the fork group of src (src's root, or src).
func (o *op) joinFork(src, member uint64) error {
	root, err := o.forkRoot(src)
	if err != nil {
		return err
	}
	if err := o.tx.Set(forkMemberKey(root, member), nil); err != nil {
		return err
	}
	return o.tx.Set(inoKey(pForkRoot, member), encodeU64(root))
}

// forkRoot is the root of ino's fork group: ino itself when it was
// forked from nothing.
func (o *op) forkRoot(ino uint64) (uint64, error) {
	v, err := o.tx.Get(inoKey(pForkRoot, ino))
	if errors.Is(err, ErrNotFound) {
		return ino, nil
	}
	if err != nil {
		return 0, err
	}
	return decodeU64(v)
}

// ForkGroup returns the inodes whose blobs may share ino's content by a
// fork, ino excluded; none when it was never forked nor forked from.
func (s *Store) ForkGroup(ino uint64) ([]uint64, error) {
	var out []uint64
	err := s.kv.View(func(tx Txn) error {
		o := &op{tx: tx}
		root, err := o.forkRoot(ino)
		if err != nil {
			return err
		}
		if root != ino {
			out = append(out, root)
		}
		return tx.Scan(inoKey(pForkMember, root), nil, func(k, _ []byte) error {
			if len(k) != 17 {
				return fmt.Errorf("fork group of %d: bad key: %w", ino, ErrCorrupt)
			}
			if m := binary.BigEndian.Uint64(k[9:]); m != ino {
				out = append(out, m)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("fork group of %d: %w", ino, err)
	}
	return out, nil
}

// errFound stops a scan at its first key.
var errFound = errors.New("found")

// carryFork puts ino, the new number of old (a session's file renumbered
// at close), in old's fork group, if old is in one.
func (o *op) carryFork(old, ino uint64) error {
	root, err := o.forkRoot(old)
	if err != nil {
		return err
	}
	if root == old {
		err := o.tx.Scan(inoKey(pForkMember, old), nil, func(_, _ []byte) error { return errFound })
		if err == nil {
			return nil // in no group
		}
		if !errors.Is(err, errFound) {
			return err
		}
	}
	return o.joinFork(old, ino)
}

// JoinFork puts member in the fork group of src: member's blob was just
// linked from src's content (a restore from a snapshot).
func (s *Store) JoinFork(src, member uint64) error {
	return s.update(func(o *op) error { return o.joinFork(src, member) })
}
