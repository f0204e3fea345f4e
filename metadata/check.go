package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// ckNode is what Check keeps in memory per inode: small on purpose, since a
// store may hold millions of them.
type ckNode struct {
	mode      uint32
	nlink     uint32
	size      uint64
	parent    uint64
	holder    shedfs.Holder
	links     uint32 // entries from reachable directories
	subdirs   uint32 // subdirectories among those entries (directories only)
	entParent uint64 // directory holding the entry of a directory
	root      bool
	reachable bool
	orphanRec bool
	corrupt   bool
	trashed   bool // kept in the trash: no links, and reachable through it
}

func (n *ckNode) isDir() bool { return n.mode&syscall.S_IFMT == syscall.S_IFDIR }
func (n *ckNode) isReg() bool { return n.mode&syscall.S_IFMT == syscall.S_IFREG }

type ckEntry struct {
	parent, child uint64
}

// checkBatch is how many repair actions go into one transaction; a batch
// that is still too big for badger is split further.
const checkBatch = 200

// Check verifies the store against blobs and, with repair, fixes what it
// finds: entries pointing at missing inodes (removed), link counts (set to
// the number of entries, plus subdirectories for a directory), directory
// Parent fields, regular file sizes (the blob's size wins: a blob is written
// before its metadata, so it holds every write that returned), missing blobs
// (created empty, size 0), unreachable inodes and orphan records (reclaimed;
// only call Check when nothing is mounted), blobs of no inode (removed),
// usage counters (recomputed from sizes and XattrCost), and the inode
// counter lease (raised past every number in use). It records a
// CheckRecord.
//
// blobs may be nil to check the metadata alone. Usage is compared with what
// the store would hold after repair, so a report without repair lists what
// a repair would change.
func (s *Store) Check(blobs BlobIndex, repair bool, progress func(done, total int)) (*Report, error) {
	if repair && s.readOnly {
		return nil, fmt.Errorf("check with repair: %w", syscall.EROFS)
	}
	rep := &Report{Started: time.Now()}
	nodes := map[uint64]*ckNode{}
	var entries []ckEntry
	var dangling [][]byte
	stored := map[shedfs.Holder]shedfs.Usage{}
	limits := map[shedfs.Holder]shedfs.Limit{}
	xattrs := map[uint64]int64{} // XattrCost per inode that has any
	var roots []uint64

	// Phase 1: read everything in one snapshot.
	err := s.kv.View(func(tx Txn) error {
		holders := map[shedfs.Zone]shedfs.Holder{}
		if err := tx.Scan([]byte{pInode}, nil, func(k, v []byte) error {
			ino := keyIno(k)
			n, err := decodeInode(ino, v)
			if err != nil {
				nodes[ino] = &ckNode{corrupt: true}
				return nil
			}
			h, ok := holders[n.Zone]
			if !ok {
				h = shedfs.HolderOf(n.Zone)
				holders[n.Zone] = h
			}
			nodes[ino] = &ckNode{mode: n.Mode, nlink: n.Nlink, size: n.Size, parent: n.Parent, holder: h}
			return nil
		}); err != nil {
			return err
		}
		rep.Inodes = len(nodes)
		if err := tx.Scan([]byte{pEntry}, nil, func(k, v []byte) error {
			rep.Entries++
			parent := keyIno(k)
			child, _, err := decodeEntry(v)
			p, c := nodes[parent], nodes[child]
			if err != nil || p == nil || c == nil || p.corrupt || c.corrupt || !p.isDir() {
				dangling = append(dangling, append([]byte(nil), k...))
				rep.Problems = append(rep.Problems, Problem{Kind: "dangling-entry", Ino: parent,
					Detail: fmt.Sprintf("entry %q of %d points at missing inode %d", k[9:], parent, child)})
				return nil
			}
			entries = append(entries, ckEntry{parent, child})
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Scan([]byte{pOrphan}, nil, func(k, _ []byte) error {
			if n := nodes[keyIno(k)]; n != nil {
				n.orphanRec = true
			} else {
				dangling = append(dangling, append([]byte(nil), k...))
				rep.Problems = append(rep.Problems, Problem{Kind: "orphan-inode", Ino: keyIno(k),
					Detail: "orphan record of a missing inode"})
			}
			return nil
		}); err != nil {
			return err
		}
		if err := checkTrash(tx, nodes, &dangling, rep); err != nil {
			return err
		}
		if err := tx.Scan([]byte{pXattr}, nil, func(k, v []byte) error {
			xattrs[keyIno(k)] += xattrKeyCost(k, v)
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Scan([]byte{pUsage}, nil, func(k, v []byte) error {
			b, i, err := decodePair(v)
			if err != nil {
				b, i = -1, -1 // forces a rewrite
			}
			stored[shedfs.Holder(k[1:])] = shedfs.Usage{Bytes: b, Inodes: i}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Scan([]byte{pLimit}, nil, func(k, v []byte) error {
			if b, i, err := decodePair(v); err == nil {
				limits[shedfs.Holder(k[1:])] = shedfs.Limit{Bytes: b, Inodes: i}
			}
			return nil
		}); err != nil {
			return err
		}
		roots = append(roots, s.shareRoot)
		if err := tx.Scan([]byte{pUser}, nil, func(_, v []byte) error {
			var u shedfs.User
			if json.Unmarshal(v, &u) == nil {
				roots = append(roots, u.Roots.Private, u.Roots.Output, u.Roots.Uploads)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Scan([]byte{pGroup}, nil, func(_, v []byte) error {
			var g shedfs.Group
			if json.Unmarshal(v, &g) == nil {
				roots = append(roots, g.Root)
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.Scan([]byte{pSession}, nil, func(_, v []byte) error {
			var ss Session
			if json.Unmarshal(v, &ss) == nil {
				roots = append(roots, ss.Root)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("check: read metadata: %w", err)
	}

	blobSizes := map[uint64]int64{}
	if blobs != nil {
		if err := blobs.Each(func(ino uint64, size int64) error {
			blobSizes[ino] = size
			return nil
		}); err != nil {
			return nil, fmt.Errorf("check: list blobs: %w", err)
		}
	}
	rep.Blobs = len(blobSizes)
	orphanBlobs := make([]uint64, 0)
	for ino := range blobSizes {
		if nodes[ino] == nil {
			orphanBlobs = append(orphanBlobs, ino)
		}
	}
	slices.Sort(orphanBlobs)
	total := len(nodes) + len(orphanBlobs)
	done := 0
	tick := func() {
		done++
		if progress != nil && (done%1000 == 0 || done == total) {
			progress(done, total)
		}
	}

	// Phase 2: reachability from the zone roots, then link counts.
	sort.Slice(entries, func(i, j int) bool { return entries[i].parent < entries[j].parent })
	children := func(dir uint64) []ckEntry {
		i := sort.Search(len(entries), func(i int) bool { return entries[i].parent >= dir })
		j := i
		for j < len(entries) && entries[j].parent == dir {
			j++
		}
		return entries[i:j]
	}
	var queue []uint64
	for _, r := range roots {
		if n := nodes[r]; n != nil && !n.corrupt && n.isDir() && !n.reachable {
			n.reachable, n.root = true, true
			queue = append(queue, r)
		}
	}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		for _, e := range children(dir) {
			c := nodes[e.child]
			c.links++
			if c.isDir() {
				nodes[dir].subdirs++
				c.entParent = dir
			}
			if !c.reachable {
				c.reachable = true
				if c.isDir() {
					queue = append(queue, e.child)
				}
			}
		}
	}

	// Phase 3: judge every inode.
	var actions []func(o *op) error
	var blobOps []func() error
	usage := map[shedfs.Holder]shedfs.Usage{}
	for h := range stored {
		usage[h] = shedfs.Usage{}
	}
	inos := make([]uint64, 0, len(nodes))
	for ino := range nodes {
		inos = append(inos, ino)
	}
	slices.Sort(inos)
	for _, ino := range inos {
		n := nodes[ino]
		tick()
		if !n.reachable && !n.trashed {
			detail := "unreachable from any zone root"
			switch {
			case n.corrupt:
				detail = "undecodable inode record"
			case n.orphanRec && n.nlink == 0:
				detail = "unlinked inode kept for open handles"
			}
			rep.Problems = append(rep.Problems, Problem{Kind: "orphan-inode", Ino: ino, Detail: detail})
			actions = append(actions, func(o *op) error { return o.purge(ino) })
			if _, ok := blobSizes[ino]; ok {
				blobOps = append(blobOps, func() error { return blobs.Remove(ino) })
			}
			continue
		}
		var fix struct {
			nlink, parent, size bool
			newNlink            uint32
			newParent, newSize  uint64
		}
		if n.orphanRec {
			rep.Problems = append(rep.Problems, Problem{Kind: "orphan-inode", Ino: ino, Detail: "orphan record of a linked inode"})
			actions = append(actions, func(o *op) error { return o.tx.Delete(orphanKey(ino)) })
		}
		want := n.links
		if n.isDir() {
			want = 2 + n.subdirs
			wantParent := n.entParent
			if n.root {
				wantParent = 0
			}
			if n.parent != wantParent {
				rep.Problems = append(rep.Problems, Problem{Kind: "parent", Ino: ino,
					Detail: fmt.Sprintf("parent %d, entry is in %d", n.parent, wantParent)})
				fix.parent, fix.newParent = true, wantParent
			}
		}
		if n.nlink != want {
			rep.Problems = append(rep.Problems, Problem{Kind: "nlink", Ino: ino,
				Detail: fmt.Sprintf("nlink %d, counted %d", n.nlink, want)})
			fix.nlink, fix.newNlink = true, want
		}
		bsize, hasBlob := blobSizes[ino]
		size := n.size
		switch {
		case !n.isReg():
			if hasBlob {
				rep.Problems = append(rep.Problems, Problem{Kind: "orphan-blob", Ino: ino, Detail: "blob of a non-regular inode"})
				blobOps = append(blobOps, func() error { return blobs.Remove(ino) })
			}
		case blobs == nil:
		case hasBlob && uint64(bsize) != n.size:
			rep.Problems = append(rep.Problems, Problem{Kind: "size", Ino: ino,
				Detail: fmt.Sprintf("size %d, blob holds %d", n.size, bsize)})
			fix.size, fix.newSize = true, uint64(bsize)
			size = uint64(bsize)
		case !hasBlob && n.size > 0:
			rep.Problems = append(rep.Problems, Problem{Kind: "missing-blob", Ino: ino,
				Detail: fmt.Sprintf("size %d, no blob", n.size)})
			blobOps = append(blobOps, func() error { return blobs.Truncate(ino, 0) })
			fix.size, fix.newSize = true, 0
			size = 0
		}
		if fix.nlink || fix.parent || fix.size {
			actions = append(actions, func(o *op) error {
				in, err := o.inode(ino)
				if err != nil {
					return err
				}
				if fix.nlink {
					in.Nlink = fix.newNlink
				}
				if fix.parent {
					in.Parent = fix.newParent
				}
				if fix.size {
					in.Size = fix.newSize
				}
				o.put(in)
				return nil
			})
		}
		u := usage[n.holder]
		before := u
		u.Inodes++
		u.Bytes += xattrs[ino]
		if n.isReg() {
			u.Bytes += shedfs.Charge(size)
		}
		usage[n.holder] = u
		if outer, ok := shedfs.OuterHolder(n.holder); ok {
			ou := usage[outer]
			ou.Inodes++
			ou.Bytes += u.Bytes - before.Bytes
			usage[outer] = ou
		}
	}
	for _, ino := range orphanBlobs {
		tick()
		rep.Problems = append(rep.Problems, Problem{Kind: "orphan-blob", Ino: ino, Detail: "blob of no inode"})
		blobOps = append(blobOps, func() error { return blobs.Remove(ino) })
	}
	holders := make([]shedfs.Holder, 0, len(usage))
	for h := range usage {
		holders = append(holders, h)
	}
	slices.Sort(holders)
	for _, h := range holders {
		if got, want := stored[h], usage[h]; got != want {
			rep.Problems = append(rep.Problems, Problem{Kind: "usage",
				Detail: fmt.Sprintf("%s: stored %d bytes %d inodes, counted %d bytes %d inodes", h, got.Bytes, got.Inodes, want.Bytes, want.Inodes)})
			actions = append(actions, func(o *op) error {
				return o.tx.Set(usageKey(h), encodePair(want.Bytes, want.Inodes))
			})
		}
	}
	for _, k := range dangling {
		actions = append(actions, func(o *op) error { return o.tx.Delete(k) })
	}
	leaseProblems, leaseFix, err := s.checkInoLease(inos)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	rep.Problems = append(rep.Problems, leaseProblems...)
	actions = append(actions, leaseFix...)
	overQuota := overQuotaProblems(holders, usage, limits)

	// Phase 4: repair. Metadata first, so a blob is only removed once no
	// inode refers to it any more.
	if repair && len(rep.Problems) > 0 {
		err := s.runActions(actions)
		s.trash.reset() // it may have dropped trash records
		if err != nil {
			return rep, fmt.Errorf("check: repair metadata: %w", err)
		}
		var blobErrs []error
		for _, f := range blobOps {
			if err := f(); err != nil {
				blobErrs = append(blobErrs, err)
			}
		}
		if err := errors.Join(blobErrs...); err != nil {
			return rep, fmt.Errorf("check: repair blobs: %w", err)
		}
		for i := range rep.Problems {
			rep.Problems[i].Repaired = true
			p := rep.Problems[i]
			s.log.Info("check repaired", "kind", p.Kind, "ino", p.Ino, "detail", p.Detail)
		}
	}
	// Usage above a limit is no damage a check may undo by deleting
	// data: it is reported, never repaired, after the other repairs.
	rep.Problems = append(rep.Problems, overQuota...)
	rep.Duration = time.Since(rep.Started)
	if !s.readOnly {
		rec := CheckRecord{At: rep.Started, Problems: len(rep.Problems), Unrepaired: rep.Unrepaired()}
		if err := s.kv.Update(func(tx Txn) error { return setJSON(tx, stateKey(stateLastCheck), rec) }); err != nil {
			return rep, fmt.Errorf("check: record result: %w", err)
		}
	}
	return rep, nil
}

// overQuotaProblems reports each holder whose counted usage (as it is
// after repair) is above its limit. Usage is admitted against the limit on
// every charge, so this means a limit lowered below the usage, or a charge
// that escaped admission; either way the operator decides: raise the limit
// or delete data.
func overQuotaProblems(holders []shedfs.Holder, usage map[shedfs.Holder]shedfs.Usage, limits map[shedfs.Holder]shedfs.Limit) []Problem {
	var out []Problem
	for _, h := range holders {
		u, l := usage[h], limits[h]
		if l.Bytes > 0 && u.Bytes > l.Bytes {
			out = append(out, Problem{Kind: KindOverQuota,
				Detail: fmt.Sprintf("%s: %d bytes used, limit %d (%d over)", h, u.Bytes, l.Bytes, u.Bytes-l.Bytes)})
		}
		if l.Inodes > 0 && u.Inodes > l.Inodes {
			out = append(out, Problem{Kind: KindOverQuota,
				Detail: fmt.Sprintf("%s: %d inodes used, limit %d (%d over)", h, u.Inodes, l.Inodes, u.Inodes-l.Inodes)})
		}
	}
	return out
}

// runActions applies repair actions in batches, halving a batch badger
// finds too big.
func (s *Store) runActions(actions []func(o *op) error) error {
	return updateInBatches(s, checkBatch, actions, func(o *op, a func(o *op) error) error { return a(o) })
}

// updateInBatches runs fn on every item of list, size items a
// transaction, halving a batch the store finds too big (etcd's
// --max-txn-ops or request size, badger's transaction size), down to one.
func updateInBatches[T any](s *Store, size int, list []T, fn func(o *op, x T) error) error {
	for len(list) > 0 {
		n := min(size, len(list))
		err := s.update(func(o *op) error {
			for _, x := range list[:n] {
				if err := fn(o, x); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && n > 1 && isTxnTooBig(err) {
			size = max(1, n/2)
			continue
		}
		if err != nil {
			return err
		}
		list = list[n:]
	}
	return nil
}

// purge removes an inode and everything keyed by it (record, xattrs, orphan
// record, a directory's entries), whatever its link count. Usage is left to
// Check's recount.
func (o *op) purge(ino uint64) error {
	n := &shedfs.Inode{Ino: ino, Mode: syscall.S_IFDIR}
	if got, err := o.inode(ino); err == nil {
		n.Mode = got.Mode
	} else if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, ErrCorrupt) {
		return err
	}
	// Deleting a directory's entry prefix of a non-directory is harmless,
	// so an undecodable record is treated as a directory.
	_, err := o.deleteInode(n)
	return err
}

// LastCheck returns the record of the last Check, zero if none ran.
func (s *Store) LastCheck() (CheckRecord, error) {
	var rec CheckRecord
	err := s.kv.View(func(tx Txn) error {
		err := getJSON(tx, stateKey(stateLastCheck), "last check", &rec)
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return err
	})
	return rec, err
}
