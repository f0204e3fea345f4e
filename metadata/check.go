package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

// ProblemKind says what kind of inconsistency a Problem is. It prints
// (String, and MarshalText for JSON and structured logs) as the word fsck
// shows in its first column.
type ProblemKind int

// The kinds of Problem, in the order Check first reports them. Every kind
// but KindOverQuota is repaired by a Check with repair.
const (
	// KindDanglingEntry: a directory entry whose inode is missing or
	// undecodable, or that sits in a non-directory. Repair deletes it.
	KindDanglingEntry ProblemKind = iota + 1
	// KindOrphanInode: an inode no zone root reaches (undecodable, or
	// unlinked and kept for handles that are gone), or an orphan record
	// that names a missing or a linked inode. Repair purges the inode, or
	// deletes the record.
	KindOrphanInode
	// KindTrash: a trash record or trash index key that names a missing
	// inode, or that the other does not match. Repair deletes it.
	KindTrash
	// KindParent: a directory whose Parent field is not the directory
	// holding its entry (0 for a zone root). Repair sets it.
	KindParent
	// KindNlink: a link count other than the entries counted (plus the
	// subdirectories, for a directory). Repair sets it.
	KindNlink
	// KindSize: a regular file whose size differs from its blob's. Repair
	// takes the blob's size.
	KindSize
	// KindMissingBlob: a non-empty regular file without a blob. Repair
	// creates the blob empty and sets the size to 0.
	KindMissingBlob
	// KindOrphanBlob: a blob of no inode, or of an inode that is not a
	// regular file. Repair removes the blob.
	KindOrphanBlob
	// KindUsage: a holder's usage counters differ from what its inodes
	// add up to. Repair rewrites them.
	KindUsage
	// KindInoLease: the persisted inode counter lease lies behind a number
	// in use. Repair raises it.
	KindInoLease
	// KindLayout: the store holds inode records or entries of both key
	// layouts (layout.go): a migration to keys in allocation order was cut
	// short. Reported only by a read-only check, which checks nothing
	// else then; a writable open finishes the migration before any check.
	KindLayout
	// KindSnapshot: snapshot records or links that do not match
	// (daemon.CheckSnapshots, which fsck runs after Check).
	KindSnapshot
	// KindOverQuota is the Problem kind of a holder using more than its
	// limit: found by Check, never repaired by it (that would mean deleting
	// data), so it stays among the unrepaired problems until an operator
	// raises the limit or data is deleted.
	KindOverQuota
)

// String returns the name fsck prints for k.
func (k ProblemKind) String() string {
	switch k {
	case KindDanglingEntry:
		return "dangling-entry"
	case KindOrphanInode:
		return "orphan-inode"
	case KindTrash:
		return "trash"
	case KindSnapshot:
		return "snapshot"
	case KindParent:
		return "parent"
	case KindNlink:
		return "nlink"
	case KindSize:
		return "size"
	case KindMissingBlob:
		return "missing-blob"
	case KindOrphanBlob:
		return "orphan-blob"
	case KindUsage:
		return "usage"
	case KindInoLease:
		return "ino-lease"
	case KindLayout:
		return "layout"
	case KindOverQuota:
		return "over-quota"
	}
	return "ProblemKind(" + strconv.Itoa(int(k)) + ")"
}

// valid reports whether k is one of the named kinds.
func (k ProblemKind) valid() bool { return k >= KindDanglingEntry && k <= KindOverQuota }

// MarshalText makes k read the same in JSON and in structured logs as on
// fsck's output: its name, not its number.
func (k ProblemKind) MarshalText() ([]byte, error) {
	if !k.valid() {
		return nil, fmt.Errorf("marshal problem kind %d: unknown kind", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads a kind by its name.
func (k *ProblemKind) UnmarshalText(b []byte) error {
	for c := KindDanglingEntry; c.valid(); c++ {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("unmarshal problem kind %q: unknown kind", b)
}

// ckNode is what a Checker keeps in memory per inode: small on purpose,
// since a store may hold millions of them.
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

// live reports whether the inode stays: reachable from a zone root, or
// kept by the trash. Everything else is purged by Orphans' repair, so the
// other per-inode phases leave it alone.
func (n *ckNode) live() bool { return n.reachable || n.trashed }

type ckEntry struct {
	parent, child uint64
}

// ckDangling is a key found by Load that names an inode the store lacks
// (or names it wrongly), with the problem it is; repair deletes the key.
type ckDangling struct {
	key     []byte
	problem Problem
}

// ckBlobFix is what a repair does to the blob of one inode.
type ckBlobFix uint8

const (
	ckBlobKeep     ckBlobFix = iota
	ckBlobRemove             // remove it
	ckBlobTruncate           // create it empty (or cut it to 0)
)

// inodeRepair is every repair of one inode the phases found, so that the
// inode record is rewritten once however many of its fields are wrong.
type inodeRepair struct {
	purge         bool // remove the inode and everything keyed by it
	dropOrphanRec bool
	nlink, parent bool
	size          bool
	newNlink      uint32
	newParent     uint64
	newSize       uint64
	blob          ckBlobFix
}

// checkBatch is how many repair actions go into one transaction; a batch
// that is still too big for badger is split further.
const checkBatch = 200

// Checker checks one store against its blobs, one phase at a time, after
// restic's checker: Load reads the store in one snapshot, then each phase
// judges one kind of consistency in memory, returns the problems it found
// and queues their repairs, and Repair applies what was queued. Store.Check
// runs every phase in order; a test or a tool may run only some.
//
// Load must run first, and once; each phase is meant to run once too.
// Repair must only run when nothing is mounted.
type Checker struct {
	s        *Store
	blobs    BlobIndex // nil: the metadata alone
	progress func(done, total int)
	done     int
	total    int

	// What Load read.
	nodes      map[uint64]*ckNode
	inos       []uint64 // every inode read, ascending
	entries    []ckEntry
	entryCount int
	badEntries []ckDangling
	badOrphans []ckDangling
	badTrash   []ckDangling
	stored     map[shedfs.Holder]shedfs.Usage
	limits     map[shedfs.Holder]shedfs.Limit
	xattrs     map[uint64]int64 // XattrCost per inode that has any
	roots      []uint64
	blobSizes  map[uint64]int64
	strays     []uint64 // blobs of no inode, ascending

	// The usage counted by countUsage, once.
	usage   map[shedfs.Holder]shedfs.Usage
	holders []shedfs.Holder // the holders of usage, sorted

	// What the phases queued for Repair.
	fixes    map[uint64]*inodeRepair
	usageFix []shedfs.Holder // holders whose stored usage becomes usage[h]
	strayFix []uint64        // blobs to remove
	deletes  [][]byte        // dangling keys
	leaseFix []func(o *op) error
}

// NewChecker returns a Checker of s. blobs may be nil to check the metadata
// alone; progress, if not nil, is called as Orphans judges inodes and
// StrayBlobs judges blobs.
func NewChecker(s *Store, blobs BlobIndex, progress func(done, total int)) *Checker {
	return &Checker{
		s:        s,
		blobs:    blobs,
		progress: progress,
		fixes:    map[uint64]*inodeRepair{},
	}
}

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
//
// Check runs the phases of a Checker in order. The problems of the phases
// that judge each inode (Orphans, Parents, LinkCounts, Sizes) are reported
// by inode number, those of one inode in that order.
func (s *Store) Check(blobs BlobIndex, repair bool, progress func(done, total int)) (*Report, error) {
	if repair && s.readOnly {
		return nil, fmt.Errorf("check with repair: %w", syscall.EROFS)
	}
	rep := &Report{Started: time.Now()}
	if s.halfMigrated {
		// Records of one layout are invisible to the other: every
		// other finding would be an artefact of the migration.
		old, new, err := countLayout(s.kv)
		if err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		rep.Problems = []Problem{{Kind: KindLayout, Detail: fmt.Sprintf(
			"the store is half way through its migration to keys in allocation order (%d records of the old layout, %d of the new): open it writable (shedfs fsck without --dry-run, or serve) to finish it; nothing else was checked", old, new)}}
		rep.Duration = time.Since(rep.Started)
		return rep, nil
	}
	c := NewChecker(s, blobs, progress)
	if err := c.Load(); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	rep.Inodes, rep.Entries, rep.Blobs = len(c.nodes), c.entryCount, len(c.blobSizes)

	rep.Problems = slices.Concat(c.Entries(), c.OrphanRecords(), c.Trash())
	perInode := slices.Concat(c.Orphans(), c.Parents(), c.LinkCounts(), c.Sizes())
	slices.SortStableFunc(perInode, func(a, b Problem) int { return cmpIno(a.Ino, b.Ino) })
	rep.Problems = slices.Concat(rep.Problems, perInode, c.StrayBlobs(), c.Usage())
	lease, err := c.InoLease()
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	rep.Problems = append(rep.Problems, lease...)

	if repair && len(rep.Problems) > 0 {
		if err := c.Repair(); err != nil {
			return rep, fmt.Errorf("check: %w", err)
		}
		for i := range rep.Problems {
			rep.Problems[i].Repaired = true
			p := rep.Problems[i]
			s.log.Info("check repaired", "kind", p.Kind, "ino", p.Ino, "detail", p.Detail)
		}
	}
	// Usage above a limit is no damage a check may undo by deleting
	// data: it is reported, never repaired, after the other repairs.
	rep.Problems = append(rep.Problems, c.OverQuota()...)
	rep.Duration = time.Since(rep.Started)
	if !s.readOnly {
		rec := CheckRecord{At: rep.Started, Problems: len(rep.Problems), Unrepaired: rep.Unrepaired()}
		if err := s.kv.Update(func(tx Txn) error { return setJSON(tx, stateKey(stateLastCheck), rec) }); err != nil {
			return rep, fmt.Errorf("check: record result: %w", err)
		}
	}
	return rep, nil
}

func cmpIno(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Load reads everything the phases judge: every inode, entry, orphan and
// trash record, xattr cost, usage counter, limit and zone root, in one
// snapshot so that the phases see one consistent store, and the blobs.
// It then walks the namespace from the zone roots, which every phase that
// judges an inode needs. While reading, it keeps the entries, orphan
// records and trash keys that name a missing inode for Entries,
// OrphanRecords and Trash: the name of an entry is at hand only then.
func (c *Checker) Load() error {
	c.nodes = map[uint64]*ckNode{}
	c.stored = map[shedfs.Holder]shedfs.Usage{}
	c.limits = map[shedfs.Holder]shedfs.Limit{}
	c.xattrs = map[uint64]int64{}
	c.blobSizes = map[uint64]int64{}
	if err := c.s.kv.View(c.read); err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	if c.blobs != nil {
		if err := c.blobs.Each(func(ino uint64, size int64) error {
			c.blobSizes[ino] = size
			return nil
		}); err != nil {
			return fmt.Errorf("list blobs: %w", err)
		}
	}
	c.inos = slices.Sorted(maps.Keys(c.nodes))
	c.strays = make([]uint64, 0)
	for ino := range c.blobSizes {
		if c.nodes[ino] == nil {
			c.strays = append(c.strays, ino)
		}
	}
	slices.Sort(c.strays)
	c.total = len(c.nodes) + len(c.strays)
	c.walk()
	return nil
}

// read is Load's snapshot.
func (c *Checker) read(tx Txn) error {
	holders := map[shedfs.Zone]shedfs.Holder{}
	keys := &c.s.keys
	if err := tx.Scan([]byte{keys.pInode}, nil, func(k, v []byte) error {
		ino := keys.ino(k)
		n, err := decodeInode(ino, v)
		if err != nil {
			c.nodes[ino] = &ckNode{corrupt: true}
			return nil
		}
		h, ok := holders[n.Zone]
		if !ok {
			h = shedfs.HolderOf(n.Zone)
			holders[n.Zone] = h
		}
		c.nodes[ino] = &ckNode{mode: n.Mode, nlink: n.Nlink, size: n.Size, parent: n.Parent, holder: h}
		return nil
	}); err != nil {
		return fmt.Errorf("scan inodes: %w", err)
	}
	if err := tx.Scan([]byte{keys.pEntry}, nil, func(k, v []byte) error {
		c.entryCount++
		parent := keys.ino(k)
		child, _, err := decodeEntry(v)
		p, ch := c.nodes[parent], c.nodes[child]
		if err != nil || p == nil || ch == nil || p.corrupt || ch.corrupt || !p.isDir() {
			c.badEntries = append(c.badEntries, ckDangling{slices.Clone(k), Problem{Kind: KindDanglingEntry, Ino: parent,
				Detail: fmt.Sprintf("entry %q of %d points at missing inode %d", k[9:], parent, child)}})
			return nil
		}
		c.entries = append(c.entries, ckEntry{parent, child})
		return nil
	}); err != nil {
		return fmt.Errorf("scan entries: %w", err)
	}
	if err := tx.Scan([]byte{pOrphan}, nil, func(k, _ []byte) error {
		if n := c.nodes[keyIno(k)]; n != nil {
			n.orphanRec = true
		} else {
			c.badOrphans = append(c.badOrphans, ckDangling{slices.Clone(k), Problem{Kind: KindOrphanInode, Ino: keyIno(k),
				Detail: "orphan record of a missing inode"}})
		}
		return nil
	}); err != nil {
		return fmt.Errorf("scan orphan records: %w", err)
	}
	if err := c.readTrash(tx); err != nil {
		return err
	}
	if err := tx.Scan([]byte{pXattr}, nil, func(k, v []byte) error {
		c.xattrs[keyIno(k)] += xattrKeyCost(k, v)
		return nil
	}); err != nil {
		return fmt.Errorf("scan xattrs: %w", err)
	}
	if err := tx.Scan([]byte{pUsage}, nil, func(k, v []byte) error {
		b, i, err := decodePair(v)
		if err != nil {
			b, i = -1, -1 // forces a rewrite
		}
		c.stored[shedfs.Holder(k[1:])] = shedfs.Usage{Bytes: b, Inodes: i}
		return nil
	}); err != nil {
		return fmt.Errorf("scan usage: %w", err)
	}
	if err := tx.Scan([]byte{pLimit}, nil, func(k, v []byte) error {
		if b, i, err := decodePair(v); err == nil {
			c.limits[shedfs.Holder(k[1:])] = shedfs.Limit{Bytes: b, Inodes: i}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("scan limits: %w", err)
	}
	c.roots = append(c.roots, c.s.shareRoot)
	if err := tx.Scan([]byte{pUser}, nil, func(_, v []byte) error {
		var u shedfs.User
		if json.Unmarshal(v, &u) == nil {
			c.roots = append(c.roots, u.Roots.Private, u.Roots.Output, u.Roots.Uploads)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("scan users: %w", err)
	}
	if err := tx.Scan([]byte{pGroup}, nil, func(_, v []byte) error {
		var g shedfs.Group
		if json.Unmarshal(v, &g) == nil {
			c.roots = append(c.roots, g.Root)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("scan groups: %w", err)
	}
	if err := tx.Scan([]byte{pSession}, nil, func(_, v []byte) error {
		var ss Session
		if json.Unmarshal(v, &ss) == nil {
			c.roots = append(c.roots, ss.Root)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("scan sessions: %w", err)
	}
	return nil
}

// readTrash marks the inodes the trash keeps, and keeps the trash records
// and index keys that name a missing inode, or each other wrongly, for
// Trash.
func (c *Checker) readTrash(tx Txn) error {
	index := map[uint64]string{}
	if err := tx.Scan([]byte{pTrashIno}, nil, func(k, v []byte) error {
		index[keyIno(k)] = string(v)
		return nil
	}); err != nil {
		return fmt.Errorf("scan trash index: %w", err)
	}
	if err := tx.Scan([]byte{pTrash}, nil, func(k, v []byte) error {
		e, err := decodeTrash(k, v)
		n := c.nodes[e.Ino]
		if err != nil || n == nil || n.corrupt || index[e.Ino] != string(k) {
			c.badTrash = append(c.badTrash, ckDangling{slices.Clone(k), Problem{Kind: KindTrash, Ino: e.Ino,
				Detail: "trash record of a missing inode"}})
			return nil
		}
		n.trashed = true
		delete(index, e.Ino)
		return nil
	}); err != nil {
		return fmt.Errorf("scan trash: %w", err)
	}
	for _, ino := range slices.Sorted(maps.Keys(index)) {
		c.badTrash = append(c.badTrash, ckDangling{trashInoKey(ino), Problem{Kind: KindTrash, Ino: ino,
			Detail: "trash index without its record"}})
	}
	return nil
}

// walk marks what the zone roots reach, breadth first, and counts the
// entries of each inode (and the subdirectories of each directory) from
// reachable directories.
func (c *Checker) walk() {
	sort.Slice(c.entries, func(i, j int) bool { return c.entries[i].parent < c.entries[j].parent })
	children := func(dir uint64) []ckEntry {
		i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].parent >= dir })
		j := i
		for j < len(c.entries) && c.entries[j].parent == dir {
			j++
		}
		return c.entries[i:j]
	}
	var queue []uint64
	for _, r := range c.roots {
		if n := c.nodes[r]; n != nil && !n.corrupt && n.isDir() && !n.reachable {
			n.reachable, n.root = true, true
			queue = append(queue, r)
		}
	}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		for _, e := range children(dir) {
			ch := c.nodes[e.child]
			ch.links++
			if ch.isDir() {
				c.nodes[dir].subdirs++
				ch.entParent = dir
			}
			if !ch.reachable {
				ch.reachable = true
				if ch.isDir() {
					queue = append(queue, e.child)
				}
			}
		}
	}
}

func (c *Checker) tick() {
	c.done++
	if c.progress != nil && (c.done%1000 == 0 || c.done == c.total) {
		c.progress(c.done, c.total)
	}
}

// fix returns the queued repair of ino, creating it.
func (c *Checker) fix(ino uint64) *inodeRepair {
	r := c.fixes[ino]
	if r == nil {
		r = &inodeRepair{}
		c.fixes[ino] = r
	}
	return r
}

// dangling queues the keys of found for deletion and returns their
// problems.
func (c *Checker) dangling(found []ckDangling) []Problem {
	var out []Problem
	for _, d := range found {
		c.deletes = append(c.deletes, d.key)
		out = append(out, d.problem)
	}
	return out
}

// Entries reports the directory entries that point at a missing or
// undecodable inode, or that sit in a non-directory (KindDanglingEntry).
// Such an entry would make a lookup fail or return garbage, and the walk
// from the roots ignores it; repair deletes it.
func (c *Checker) Entries() []Problem { return c.dangling(c.badEntries) }

// OrphanRecords reports the orphan records of a missing inode
// (KindOrphanInode). An orphan record keeps an unlinked inode for its open
// handles until it is reclaimed; one left behind would have the reclaim
// after the next start look for an inode that is gone. Repair deletes it.
// Orphan records of inodes that exist are judged by Orphans.
func (c *Checker) OrphanRecords() []Problem { return c.dangling(c.badOrphans) }

// Trash reports the trash records whose inode is missing or whose index
// key names another record, and the index keys without their record
// (KindTrash). The trash lists, restores and evicts by these; a dangling
// one would show a file that cannot be restored, or hold the tally of a
// holder's trash above what it holds. Repair deletes them.
func (c *Checker) Trash() []Problem { return c.dangling(c.badTrash) }

// Orphans reports, as KindOrphanInode, the inodes that neither a zone
// root nor the trash reaches (an unlinked inode whose handles are gone, an
// undecodable record, a subtree whose entry was lost), and the orphan
// records of linked inodes. An unreachable inode holds space and quota
// that nobody can see or free; repair purges it with its blob. A linked
// inode's orphan record would have it reclaimed while linked; repair
// deletes the record.
func (c *Checker) Orphans() []Problem {
	var out []Problem
	for _, ino := range c.inos {
		n := c.nodes[ino]
		c.tick()
		if !n.live() {
			detail := "unreachable from any zone root"
			switch {
			case n.corrupt:
				detail = "undecodable inode record"
			case n.orphanRec && n.nlink == 0:
				detail = "unlinked inode kept for open handles"
			}
			out = append(out, Problem{Kind: KindOrphanInode, Ino: ino, Detail: detail})
			r := c.fix(ino)
			r.purge = true
			if _, ok := c.blobSizes[ino]; ok {
				r.blob = ckBlobRemove
			}
			continue
		}
		if n.orphanRec {
			out = append(out, Problem{Kind: KindOrphanInode, Ino: ino, Detail: "orphan record of a linked inode"})
			c.fix(ino).dropOrphanRec = true
		}
	}
	return out
}

// Parents reports the directories whose Parent field is not the directory
// that holds their entry, or not 0 for a zone root (KindParent). ".."
// resolves through that field, so a wrong one leads out of the tree or
// into another. Repair sets it.
func (c *Checker) Parents() []Problem {
	var out []Problem
	for _, ino := range c.inos {
		n := c.nodes[ino]
		if !n.live() || !n.isDir() {
			continue
		}
		want := n.entParent
		if n.root {
			want = 0
		}
		if n.parent != want {
			out = append(out, Problem{Kind: KindParent, Ino: ino,
				Detail: fmt.Sprintf("parent %d, entry is in %d", n.parent, want)})
			r := c.fix(ino)
			r.parent, r.newParent = true, want
		}
	}
	return out
}

// LinkCounts reports the inodes whose link count differs from the entries
// that name them, plus two and one per subdirectory for a directory
// (KindNlink). Unlink frees an inode when its count drops to zero, so a
// count too high leaks it and one too low frees it while linked. Repair
// sets the counted value.
func (c *Checker) LinkCounts() []Problem {
	var out []Problem
	for _, ino := range c.inos {
		n := c.nodes[ino]
		if !n.live() {
			continue
		}
		want := n.links
		if n.isDir() {
			want = 2 + n.subdirs
		}
		if n.nlink != want {
			out = append(out, Problem{Kind: KindNlink, Ino: ino,
				Detail: fmt.Sprintf("nlink %d, counted %d", n.nlink, want)})
			r := c.fix(ino)
			r.nlink, r.newNlink = true, want
		}
	}
	return out
}

// Sizes compares each live inode with its blob: a regular file whose size
// is not its blob's (KindSize), a non-empty one without a blob
// (KindMissingBlob), and a blob of an inode that is no regular file
// (KindOrphanBlob). A blob is written before its metadata, so after a crash
// the blob holds every write that returned and its size wins; a missing
// blob would fail every read, so repair creates it empty and the size goes
// to 0; a blob nothing can read is removed. Without blobs it finds nothing.
func (c *Checker) Sizes() []Problem {
	var out []Problem
	for _, ino := range c.inos {
		n := c.nodes[ino]
		if !n.live() {
			continue
		}
		bsize, hasBlob := c.blobSizes[ino]
		switch {
		case !n.isReg():
			if hasBlob {
				out = append(out, Problem{Kind: KindOrphanBlob, Ino: ino, Detail: "blob of a non-regular inode"})
				c.fix(ino).blob = ckBlobRemove
			}
		case c.blobs == nil:
		case hasBlob && uint64(bsize) != n.size:
			out = append(out, Problem{Kind: KindSize, Ino: ino,
				Detail: fmt.Sprintf("size %d, blob holds %d", n.size, bsize)})
			r := c.fix(ino)
			r.size, r.newSize = true, uint64(bsize)
		case !hasBlob && n.size > 0:
			out = append(out, Problem{Kind: KindMissingBlob, Ino: ino,
				Detail: fmt.Sprintf("size %d, no blob", n.size)})
			r := c.fix(ino)
			r.size, r.newSize = true, 0
			r.blob = ckBlobTruncate
		}
	}
	return out
}

// repairedSize is the size of regular file n as it is after Sizes'
// repair: its blob's, 0 without one, its own when no blobs are checked.
func (c *Checker) repairedSize(ino uint64, n *ckNode) uint64 {
	if c.blobs == nil {
		return n.size
	}
	return uint64(c.blobSizes[ino]) // 0 when it has none
}

// StrayBlobs reports the blobs of no inode (KindOrphanBlob): left by a
// crash between writing a blob and its inode, or after an inode's
// removal. They take disk space no quota counts; repair removes them.
func (c *Checker) StrayBlobs() []Problem {
	var out []Problem
	for _, ino := range c.strays {
		c.tick()
		out = append(out, Problem{Kind: KindOrphanBlob, Ino: ino, Detail: "blob of no inode"})
		c.strayFix = append(c.strayFix, ino)
	}
	return out
}

// countUsage adds up, once, the usage of every holder (and of the holder
// outside it) from the live inodes as they are after repair: one inode
// each, the charge of a regular file's size and the cost of its xattrs.
func (c *Checker) countUsage() {
	if c.usage != nil {
		return
	}
	c.usage = map[shedfs.Holder]shedfs.Usage{}
	for h := range c.stored {
		c.usage[h] = shedfs.Usage{}
	}
	for _, ino := range c.inos {
		n := c.nodes[ino]
		if !n.live() {
			continue
		}
		u := c.usage[n.holder]
		before := u
		u.Inodes++
		u.Bytes += c.xattrs[ino]
		if n.isReg() {
			u.Bytes += shedfs.Charge(c.repairedSize(ino, n))
		}
		c.usage[n.holder] = u
		if outer, ok := shedfs.OuterHolder(n.holder); ok {
			ou := c.usage[outer]
			ou.Inodes++
			ou.Bytes += u.Bytes - before.Bytes
			c.usage[outer] = ou
		}
	}
	c.holders = slices.Sorted(maps.Keys(c.usage))
}

// Usage reports the holders whose stored usage counters differ from what
// their inodes add up to after the other repairs (KindUsage). Quota
// admission trusts the counters, so a drift either refuses writes within
// the limit or admits writes beyond it. Repair rewrites them.
func (c *Checker) Usage() []Problem {
	c.countUsage()
	var out []Problem
	for _, h := range c.holders {
		if got, want := c.stored[h], c.usage[h]; got != want {
			out = append(out, Problem{Kind: KindUsage,
				Detail: fmt.Sprintf("%s: stored %d bytes %d inodes, counted %d bytes %d inodes", h, got.Bytes, got.Inodes, want.Bytes, want.Inodes)})
			c.usageFix = append(c.usageFix, h)
		}
	}
	return out
}

// InoLease reports a persisted inode counter lease behind a number in use
// (KindInoLease): the next allocation would hand that number out again.
// Repair raises the lease past the highest one (see checkInoLease).
func (c *Checker) InoLease() ([]Problem, error) {
	out, fix, err := c.s.checkInoLease(c.inos)
	if err != nil {
		return nil, err
	}
	c.leaseFix = append(c.leaseFix, fix...)
	return out, nil
}

// OverQuota reports each holder whose counted usage (as it is after
// repair) is above its limit (KindOverQuota). Usage is admitted against
// the limit on every charge, so this means a limit lowered below the
// usage, or a charge that escaped admission; either way the operator
// decides: raise the limit or delete data. It queues no repair.
func (c *Checker) OverQuota() []Problem {
	c.countUsage()
	var out []Problem
	for _, h := range c.holders {
		u, l := c.usage[h], c.limits[h]
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

// Repair applies the repairs the phases queued: the metadata first, in
// batches, so that a blob is only removed once no inode refers to it any
// more, then the blobs. Only run it when nothing is mounted.
func (c *Checker) Repair() error {
	if c.s.readOnly {
		return fmt.Errorf("repair: %w", syscall.EROFS)
	}
	var actions []func(o *op) error
	var blobOps []func() error
	for _, ino := range c.inos {
		r := c.fixes[ino]
		if r == nil {
			continue
		}
		if r.purge {
			actions = append(actions, func(o *op) error { return o.purge(ino) })
		}
		if r.dropOrphanRec {
			actions = append(actions, func(o *op) error { return o.tx.Delete(orphanKey(ino)) })
		}
		if r.nlink || r.parent || r.size {
			actions = append(actions, func(o *op) error {
				in, err := o.inode(ino)
				if err != nil {
					return err
				}
				if r.nlink {
					in.Nlink = r.newNlink
				}
				if r.parent {
					in.Parent = r.newParent
				}
				if r.size {
					in.Size = r.newSize
				}
				o.put(in)
				return nil
			})
		}
		switch r.blob {
		case ckBlobRemove:
			blobOps = append(blobOps, func() error { return c.blobs.Remove(ino) })
		case ckBlobTruncate:
			blobOps = append(blobOps, func() error { return c.blobs.Truncate(ino, 0) })
		}
	}
	for _, ino := range c.strayFix {
		blobOps = append(blobOps, func() error { return c.blobs.Remove(ino) })
	}
	for _, h := range c.usageFix {
		want := c.usage[h]
		actions = append(actions, func(o *op) error {
			return o.tx.Set(usageKey(h), encodePair(want.Bytes, want.Inodes))
		})
	}
	for _, k := range c.deletes {
		actions = append(actions, func(o *op) error { return o.tx.Delete(k) })
	}
	actions = append(actions, c.leaseFix...)

	err := c.s.runActions(actions)
	c.s.trash.reset() // it may have dropped trash records
	if err != nil {
		return fmt.Errorf("repair metadata: %w", err)
	}
	var blobErrs []error
	for _, f := range blobOps {
		if err := f(); err != nil {
			blobErrs = append(blobErrs, err)
		}
	}
	if err := errors.Join(blobErrs...); err != nil {
		return fmt.Errorf("repair blobs: %w", err)
	}
	return nil
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
