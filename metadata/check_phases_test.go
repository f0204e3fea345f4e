package metadata

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

// ckFixture is a small healthy store for the phase tests: a directory d
// in the share root holding the 100-byte file f, and the 10-byte file g
// in the share root, both with their blobs.
type ckFixture struct {
	s     *Store
	blobs dirBlobs
	root  uint64
	d     *shedfs.Inode
	f, g  *shedfs.Inode
}

func newCkFixture(t *testing.T) *ckFixture {
	t.Helper()
	fx := &ckFixture{s: newStore(t), blobs: dirBlobs{t.TempDir()}}
	fx.root = fx.s.ShareRoot()
	fx.d = must[*shedfs.Inode](t)(fx.s.Create(fx.root, "d", dir(), nil))
	fx.f = fx.file(t, fx.d.Ino, "f", 100)
	fx.g = fx.file(t, fx.root, "g", 10)
	return fx
}

func (fx *ckFixture) file(t *testing.T, parent uint64, name string, size int64) *shedfs.Inode {
	t.Helper()
	n := must[*shedfs.Inode](t)(fx.s.Create(parent, name, file(0o644), nil))
	must[error](t)(nil, fx.blobs.Truncate(n.Ino, size))
	return must[*shedfs.Inode](t)(fx.s.Update(n.Ino, func(n *shedfs.Inode) error { n.Size = uint64(size); return nil }, nil))
}

// raw changes the store below the schema's invariants, as a crash or a
// bug would.
func (fx *ckFixture) raw(t *testing.T, fn func(tx Txn) error) {
	t.Helper()
	must[error](t)(nil, fx.s.kv.Update(fn))
}

// setInode rewrites the record of ino after change, bypassing every
// invariant.
func (fx *ckFixture) setInode(t *testing.T, ino uint64, change func(n *shedfs.Inode)) {
	t.Helper()
	fx.raw(t, func(tx Txn) error {
		n, err := getInode(tx, &fx.s.keys, ino)
		if err != nil {
			return err
		}
		change(n)
		return tx.Set(fx.s.keys.inode(ino), encodeInode(n))
	})
}

func (fx *ckFixture) blobExists(t *testing.T, ino uint64) (int64, bool) {
	t.Helper()
	fi, err := os.Stat(fx.blobs.path(ino))
	if os.IsNotExist(err) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size(), true
}

type ckPhase func(c *Checker) ([]Problem, error)

func noErr(f func(c *Checker) []Problem) ckPhase {
	return func(c *Checker) ([]Problem, error) { return f(c), nil }
}

// runPhase loads a fresh Checker and runs the one phase.
func runPhase(t *testing.T, fx *ckFixture, phase ckPhase) (*Checker, []Problem) {
	t.Helper()
	c := NewChecker(fx.s, fx.blobs, nil)
	must[error](t)(nil, c.Load())
	return c, must[[]Problem](t)(phase(c))
}

// TestCheckerPhases damages one thing in a healthy store, runs the one
// phase meant to find it, expects the one problem of the kind, has the
// phase's repair fix it, and finds that phase clean afterwards.
func TestCheckerPhases(t *testing.T) {
	tests := []struct {
		name   string
		phase  ckPhase
		damage func(t *testing.T, fx *ckFixture) (ino uint64)
		want   ProblemKind
		detail string // a part of the problem's Detail
		verify func(t *testing.T, fx *ckFixture, ino uint64)
	}{
		{
			name:  "entry of a missing inode",
			phase: noErr((*Checker).Entries),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.raw(t, func(tx Txn) error { return tx.Delete(fx.s.keys.inode(fx.g.Ino)) })
				return fx.root
			},
			want: KindDanglingEntry, detail: `entry "g" of`,
			verify: func(t *testing.T, fx *ckFixture, _ uint64) {
				_, err := fx.s.Lookup(fx.root, "g")
				wantErrno(t, err, syscall.ENOENT)
			},
		},
		{
			name:  "entry in a regular file",
			phase: noErr((*Checker).Entries),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.raw(t, func(tx Txn) error {
					v, err := tx.Get(fx.s.keys.entry(fx.root, "g"))
					if err != nil {
						return err
					}
					return tx.Set(fx.s.keys.entry(fx.f.Ino, "inside"), slices.Clone(v))
				})
				return fx.f.Ino
			},
			want: KindDanglingEntry, detail: `entry "inside" of`,
			verify: func(t *testing.T, fx *ckFixture, _ uint64) {
				fx.s.kv.View(func(tx Txn) error {
					if _, err := tx.Get(fx.s.keys.entry(fx.f.Ino, "inside")); err != ErrNotFound {
						t.Errorf("entry in a file kept: %v", err)
					}
					return nil
				})
			},
		},
		{
			name:  "orphan record of a missing inode",
			phase: noErr((*Checker).OrphanRecords),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.raw(t, func(tx Txn) error { return tx.Set(orphanKey(123456789), []byte{}) })
				return 123456789
			},
			want: KindOrphanInode, detail: "orphan record of a missing inode",
			verify: func(t *testing.T, fx *ckFixture, _ uint64) {
				if o := must[[]uint64](t)(fx.s.Orphans()); len(o) != 0 {
					t.Errorf("orphan records %v", o)
				}
			},
		},
		{
			name:  "trash record without its index",
			phase: noErr((*Checker).Trash),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				trash(t, fx, "g")
				fx.raw(t, func(tx Txn) error { return tx.Delete(trashInoKey(fx.g.Ino)) })
				return fx.g.Ino
			},
			want: KindTrash, detail: "trash record of a missing inode",
			verify: func(t *testing.T, fx *ckFixture, _ uint64) {
				if l := must[[]TrashEntry](t)(fx.s.ListTrash([]shedfs.Holder{"share"})); len(l) != 0 {
					t.Errorf("trash lists %+v", l)
				}
			},
		},
		{
			name:  "trash index without its record",
			phase: noErr((*Checker).Trash),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.raw(t, func(tx Txn) error { return tx.Set(trashInoKey(777), []byte("nothing")) })
				return 777
			},
			want: KindTrash, detail: "trash index without its record",
		},
		{
			name:  "unreachable file",
			phase: noErr((*Checker).Orphans),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.raw(t, func(tx Txn) error { return tx.Delete(fx.s.keys.entry(fx.root, "g")) })
				return fx.g.Ino
			},
			want: KindOrphanInode, detail: "unreachable from any zone root",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				_, err := fx.s.GetInode(ino)
				wantErrno(t, err, syscall.ENOENT)
				if _, ok := fx.blobExists(t, ino); ok {
					t.Error("blob of a purged inode kept")
				}
			},
		},
		{
			name:  "undecodable inode",
			phase: noErr((*Checker).Orphans),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.raw(t, func(tx Txn) error { return tx.Set(fx.s.keys.inode(fx.g.Ino), []byte("garbage")) })
				return fx.g.Ino
			},
			want: KindOrphanInode, detail: "undecodable inode record",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				_, err := fx.s.GetInode(ino)
				wantErrno(t, err, syscall.ENOENT)
			},
		},
		{
			name:  "unlinked inode kept for open handles",
			phase: noErr((*Checker).Orphans),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				must[*shedfs.Inode](t)(fx.s.Unlink(fx.root, "g", false))
				return fx.g.Ino
			},
			want: KindOrphanInode, detail: "unlinked inode kept for open handles",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				_, err := fx.s.GetInode(ino)
				wantErrno(t, err, syscall.ENOENT)
				if o := must[[]uint64](t)(fx.s.Orphans()); len(o) != 0 {
					t.Errorf("orphan records %v", o)
				}
			},
		},
		{
			name:  "orphan record of a linked inode",
			phase: noErr((*Checker).Orphans),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.raw(t, func(tx Txn) error { return tx.Set(orphanKey(fx.g.Ino), []byte{}) })
				return fx.g.Ino
			},
			want: KindOrphanInode, detail: "orphan record of a linked inode",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				if o := must[[]uint64](t)(fx.s.Orphans()); len(o) != 0 {
					t.Errorf("orphan records %v", o)
				}
				must[*shedfs.Inode](t)(fx.s.GetInode(ino))
			},
		},
		{
			name:  "directory parent",
			phase: noErr((*Checker).Parents),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.setInode(t, fx.d.Ino, func(n *shedfs.Inode) { n.Parent = 4242 })
				return fx.d.Ino
			},
			want: KindParent, detail: "parent 4242, entry is in",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				if n := must[*shedfs.Inode](t)(fx.s.GetInode(ino)); n.Parent != fx.root {
					t.Errorf("parent %d, want %d", n.Parent, fx.root)
				}
			},
		},
		{
			name:  "file link count",
			phase: noErr((*Checker).LinkCounts),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.setInode(t, fx.f.Ino, func(n *shedfs.Inode) { n.Nlink = 5 })
				return fx.f.Ino
			},
			want: KindNlink, detail: "nlink 5, counted 1",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				if n := must[*shedfs.Inode](t)(fx.s.GetInode(ino)); n.Nlink != 1 {
					t.Errorf("nlink %d", n.Nlink)
				}
			},
		},
		{
			name:  "directory link count",
			phase: noErr((*Checker).LinkCounts),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.setInode(t, fx.d.Ino, func(n *shedfs.Inode) { n.Nlink = 7 })
				return fx.d.Ino
			},
			want: KindNlink, detail: "nlink 7, counted 2",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				if n := must[*shedfs.Inode](t)(fx.s.GetInode(ino)); n.Nlink != 2 {
					t.Errorf("nlink %d", n.Nlink)
				}
			},
		},
		{
			name:  "size behind the blob",
			phase: noErr((*Checker).Sizes),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				must[error](t)(nil, fx.blobs.Truncate(fx.f.Ino, 9000))
				return fx.f.Ino
			},
			want: KindSize, detail: "size 100, blob holds 9000",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				if n := must[*shedfs.Inode](t)(fx.s.GetInode(ino)); n.Size != 9000 {
					t.Errorf("size %d, want the blob's 9000", n.Size)
				}
			},
		},
		{
			name:  "missing blob",
			phase: noErr((*Checker).Sizes),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				must[error](t)(nil, fx.blobs.Remove(fx.f.Ino))
				return fx.f.Ino
			},
			want: KindMissingBlob, detail: "size 100, no blob",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				if n := must[*shedfs.Inode](t)(fx.s.GetInode(ino)); n.Size != 0 {
					t.Errorf("size %d, want 0", n.Size)
				}
				if size, ok := fx.blobExists(t, ino); !ok || size != 0 {
					t.Errorf("blob not recreated empty: %v %d", ok, size)
				}
			},
		},
		{
			name:  "blob of a directory",
			phase: noErr((*Checker).Sizes),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				must[error](t)(nil, fx.blobs.Truncate(fx.d.Ino, 5))
				return fx.d.Ino
			},
			want: KindOrphanBlob, detail: "blob of a non-regular inode",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				if _, ok := fx.blobExists(t, ino); ok {
					t.Error("blob of a directory kept")
				}
			},
		},
		{
			name:  "blob of no inode",
			phase: noErr((*Checker).StrayBlobs),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				must[error](t)(nil, fx.blobs.Truncate(99999, 10))
				return 99999
			},
			want: KindOrphanBlob, detail: "blob of no inode",
			verify: func(t *testing.T, fx *ckFixture, ino uint64) {
				if _, ok := fx.blobExists(t, ino); ok {
					t.Error("stray blob kept")
				}
			},
		},
		{
			name:  "usage drift",
			phase: noErr((*Checker).Usage),
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.raw(t, func(tx Txn) error { return tx.Set(usageKey("share"), encodePair(123, 456)) })
				return 0
			},
			want: KindUsage, detail: "share: stored 123 bytes 456 inodes, counted",
			verify: func(t *testing.T, fx *ckFixture, _ uint64) {
				if u := must[shedfs.Usage](t)(fx.s.Usage("share")); u.Inodes != 4 {
					t.Errorf("share usage %+v, want 4 inodes", u)
				}
			},
		},
		{
			name:  "inode counter lease behind",
			phase: (*Checker).InoLease,
			damage: func(t *testing.T, fx *ckFixture) uint64 {
				fx.raw(t, func(tx Txn) error { return tx.Set(nextInoKey(), encodeU64(FirstIno)) })
				return 0
			},
			want: KindInoLease, detail: "inode counter leased up to",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newCkFixture(t)
			if _, got := runPhase(t, fx, tc.phase); len(got) != 0 {
				t.Fatalf("healthy store: %+v", got)
			}
			ino := tc.damage(t, fx)
			c, got := runPhase(t, fx, tc.phase)
			if len(got) != 1 {
				t.Fatalf("found %+v, want one %s", got, tc.want)
			}
			if p := got[0]; p.Kind != tc.want || p.Ino != ino || !strings.Contains(p.Detail, tc.detail) || p.Repaired {
				t.Fatalf("found %+v, want a %s of %d saying %q", p, tc.want, ino, tc.detail)
			}
			must[error](t)(nil, c.Repair())
			if _, got := runPhase(t, fx, tc.phase); len(got) != 0 {
				t.Fatalf("after repair: %+v", got)
			}
			if tc.verify != nil {
				tc.verify(t, fx, ino)
			}
		})
	}
}

// trash moves name out of the share root into the trash.
func trash(t *testing.T, fx *ckFixture, name string) {
	t.Helper()
	_, _, kept, err := fx.s.UnlinkTrash(fx.root, name, false, func(uint64) bool { return true }, &TrashNote{By: "bob", Why: TrashUnlink, Path: name})
	if err != nil || !kept {
		t.Fatalf("trash %s: %v kept=%v", name, err, kept)
	}
}

// TestCheckerOverQuota: OverQuota reports a holder above its limit and
// queues no repair, so Repair leaves it (and the data) as it was.
func TestCheckerOverQuota(t *testing.T) {
	fx := newCkFixture(t)
	if _, got := runPhase(t, fx, noErr((*Checker).OverQuota)); len(got) != 0 {
		t.Fatalf("healthy store: %+v", got)
	}
	must[error](t)(nil, fx.s.SetLimit("share", shedfs.Limit{Inodes: 2}))
	c, got := runPhase(t, fx, noErr((*Checker).OverQuota))
	if len(got) != 1 || got[0].Kind != KindOverQuota || got[0].Detail != "share: 4 inodes used, limit 2 (2 over)" {
		t.Fatalf("found %+v, want one over-quota", got)
	}
	must[error](t)(nil, c.Repair())
	if _, got := runPhase(t, fx, noErr((*Checker).OverQuota)); len(got) != 1 {
		t.Fatalf("after repair: %+v, want the over-quota kept", got)
	}
	must[*shedfs.Inode](t)(fx.s.GetInode(fx.g.Ino))
}

// TestCheckerTrashKept: an inode the trash keeps has no link, yet it is
// neither an orphan nor a link count problem, and its blob stays.
func TestCheckerTrashKept(t *testing.T) {
	fx := newCkFixture(t)
	trash(t, fx, "g")
	c := NewChecker(fx.s, fx.blobs, nil)
	must[error](t)(nil, c.Load())
	for name, phase := range map[string]func() []Problem{
		"Trash": c.Trash, "Orphans": c.Orphans, "LinkCounts": c.LinkCounts, "Sizes": c.Sizes, "Usage": c.Usage,
	} {
		if got := phase(); len(got) != 0 {
			t.Errorf("%s finds %+v", name, got)
		}
	}
}

// TestCheckerRepairReadOnly: a Checker of a read-only store reports, and
// refuses to repair.
func TestCheckerRepairReadOnly(t *testing.T) {
	fx := newCkFixture(t)
	fx.s.readOnly = true
	defer func() { fx.s.readOnly = false }()
	c := NewChecker(fx.s, fx.blobs, nil)
	must[error](t)(nil, c.Load())
	wantErrno(t, c.Repair(), syscall.EROFS)
}

// TestCheckReportOrder: Check reports the problems of the phases that
// judge each inode by inode number, those of one inode in phase order
// (Orphans, Parents, LinkCounts, Sizes), after the dangling keys and
// before the stray blobs, usage and lease; over-quota comes last.
func TestCheckReportOrder(t *testing.T) {
	fx := newCkFixture(t)
	must[error](t)(nil, fx.s.SetLimit("share", shedfs.Limit{Inodes: 1}))
	fx.setInode(t, fx.d.Ino, func(n *shedfs.Inode) { n.Parent = 4242; n.Nlink = 9 })
	fx.setInode(t, fx.f.Ino, func(n *shedfs.Inode) { n.Nlink = 3 })
	fx.setInode(t, fx.g.Ino, func(n *shedfs.Inode) { n.Nlink = 3 })
	must[error](t)(nil, fx.blobs.Truncate(fx.d.Ino, 1))
	must[error](t)(nil, fx.blobs.Truncate(fx.f.Ino, 1))
	must[error](t)(nil, fx.blobs.Truncate(99999, 1))
	fx.raw(t, func(tx Txn) error { return tx.Set(orphanKey(fx.g.Ino), []byte{}) })
	fx.raw(t, func(tx Txn) error { return tx.Set(orphanKey(123456789), []byte{}) })
	fx.raw(t, func(tx Txn) error { return tx.Set(usageKey("share"), encodePair(1, 1)) })
	rep := must[*Report](t)(fx.s.Check(fx.blobs, false, nil))

	var perInode []Problem
	var sections []string
	for _, p := range rep.Problems {
		switch p.Kind {
		case KindParent, KindNlink, KindSize:
			perInode = append(perInode, p)
			p.Kind = KindNlink // one section
		case KindOrphanInode, KindOrphanBlob:
			if p.Ino == fx.g.Ino || p.Ino == fx.d.Ino {
				perInode = append(perInode, p)
				p.Kind = KindNlink
			}
		}
		if len(sections) == 0 || sections[len(sections)-1] != p.Kind.String() {
			sections = append(sections, p.Kind.String())
		}
	}
	if got, want := strings.Join(sections, ","), "orphan-inode,nlink,orphan-blob,usage,over-quota"; got != want {
		t.Errorf("sections %s, want %s\n%+v", got, want, rep.Problems)
	}
	rank := map[ProblemKind]int{KindOrphanInode: 0, KindParent: 1, KindNlink: 2, KindSize: 3, KindOrphanBlob: 3}
	if !slices.IsSortedFunc(perInode, func(a, b Problem) int {
		if a.Ino != b.Ino {
			return cmpIno(a.Ino, b.Ino)
		}
		return rank[a.Kind] - rank[b.Kind]
	}) || len(perInode) != 7 {
		t.Errorf("per-inode problems out of order: %+v", perInode)
	}
}

// TestProblemKindText: every kind has its own name, JSON and text show
// the name, and the name reads back.
func TestProblemKindText(t *testing.T) {
	want := []string{"dangling-entry", "orphan-inode", "trash", "parent", "nlink", "size", "missing-blob",
		"orphan-blob", "usage", "ino-lease", "layout", "snapshot", "over-quota"}
	var got []string
	for k := KindDanglingEntry; k.valid(); k++ {
		got = append(got, k.String())
		var back ProblemKind
		if err := back.UnmarshalText([]byte(k.String())); err != nil || back != k {
			t.Errorf("%s reads back as %d: %v", k, back, err)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("kinds %v, want %v", got, want)
	}
	b := must[[]byte](t)(json.Marshal(Problem{Kind: KindNlink, Ino: 7}))
	if !strings.Contains(string(b), `"Kind":"nlink"`) {
		t.Errorf("JSON %s", b)
	}
	if s := ProblemKind(0).String(); s != "ProblemKind(0)" {
		t.Errorf("zero kind prints %q", s)
	}
	if _, err := ProblemKind(0).MarshalText(); err == nil {
		t.Error("the zero kind marshals")
	}
	var k ProblemKind
	if err := k.UnmarshalText([]byte("no-such-kind")); err == nil {
		t.Error("an unknown name reads as a kind")
	}
}
