package vfs

import (
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
)

// fixture is a store with user alice, and a core over it that records its
// events.
type fixture struct {
	store  *metadata.Store
	blobs  *blobs.Dir
	core   *Core
	alice  *shedfs.User
	events *events
}

// events is a Recorder that keeps what it is given.
type events struct {
	mu  sync.Mutex
	ops []string
	all []shedfs.Event
}

func (e *events) Record(ev shedfs.Event) {
	e.mu.Lock()
	e.ops = append(e.ops, ev.Op)
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// last is the last event recorded.
func (e *events) last() shedfs.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.all) == 0 {
		return shedfs.Event{}
	}
	return e.all[len(e.all)-1]
}

func (e *events) count(op string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, o := range e.ops {
		if o == op {
			n++
		}
	}
	return n
}

func newFixture(t *testing.T, space Space) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := metadata.Open(filepath.Join(dir, "meta"), metadata.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := blobs.OpenDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatalf("open blobs: %v", err)
	}
	u, err := st.AddUser("alice")
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	f := &fixture{store: st, blobs: b, alice: u, events: ev}
	f.core = New(st, b, Options{Recorder: ev, Space: space})
	return f
}

var alice = shedfs.UserHolder("alice")

// file makes name in alice's private root, of size bytes, with a blob.
func (f *fixture) file(t *testing.T, name string, size uint64) *shedfs.Inode {
	t.Helper()
	tmpl := &shedfs.Inode{Mode: syscall.S_IFREG | 0o644, Zone: shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: "alice"}, Owner: "alice"}
	n, err := f.store.Create(f.alice.Roots.Private, name, tmpl, nil)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if _, err := f.store.Update(n.Ino, func(r *shedfs.Inode) error { r.Size = size; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	bf, err := f.blobs.OpenFile(n.Ino, true)
	if err != nil {
		t.Fatal(err)
	}
	bf.Close()
	return n
}

// trash deletes name from alice's private root into the trash.
func (f *fixture) trash(t *testing.T, name string) {
	t.Helper()
	_, _, kept, err := f.store.UnlinkTrash(f.alice.Roots.Private, name, false, f.core.Unused, &metadata.TrashNote{By: "alice", Why: metadata.TrashUnlink, Path: "/" + name})
	if err != nil || !kept {
		t.Fatalf("unlink %s into the trash: %v kept=%v", name, err, kept)
	}
}

func (f *fixture) limit(t *testing.T, l shedfs.Limit) {
	t.Helper()
	if err := f.store.SetLimit(alice, l); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) trashed(t *testing.T) int {
	t.Helper()
	list, err := f.store.ListTrash([]shedfs.Holder{alice})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// TestAdmitQuota: Admit decides by acl with the holder's stored and
// pending usage, refuses with acl's decision and nothing held, and holds
// the holder's lock until Done.
func TestAdmitQuota(t *testing.T) {
	f := newFixture(t, nil)
	u, _ := f.store.Usage(alice)
	f.limit(t, shedfs.Limit{Bytes: u.Bytes + 1<<20, Inodes: u.Inodes + 2})
	for _, c := range []struct {
		name string
		g    Growth
		want syscall.Errno
	}{
		{"bytes that fit", Growth{Holder: alice, Bytes: 1 << 20}, 0},
		{"bytes past the limit", Growth{Holder: alice, Bytes: 1<<20 + shedfs.ChargeUnit}, syscall.EDQUOT},
		{"a replace's credit makes it fit", Growth{Holder: alice, Bytes: 1<<20 + shedfs.ChargeUnit, Credit: shedfs.ChargeUnit}, 0},
		{"inodes that fit", Growth{Holder: alice, Inodes: 2}, 0},
		{"inodes past the limit", Growth{Holder: alice, Inodes: 3}, syscall.EDQUOT},
		{"the rule refuses", Growth{Holder: alice, Decide: func(acl.Quota) acl.Decision { return acl.Decision{Errno: syscall.EACCES, Reason: "test"} }}, syscall.EACCES},
		{"no holder: the rule alone", Growth{Bytes: 1 << 40}, 0},
	} {
		adm, d, err := f.core.Admit(c.g)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if d.Errno != c.want {
			t.Errorf("%s: %v, want errno %v", c.name, d, c.want)
		}
		if (adm != nil) != (c.want == 0) {
			t.Errorf("%s: admission %v with decision %v", c.name, adm, d)
		}
		adm.Done()
		adm.Done() // twice is harmless
	}
	if p := f.core.Accountant().Pending(alice); p != 0 {
		t.Errorf("pending %d after admissions that charged nothing", p)
	}
}

// TestAdmitEvictsTrash: a growth the quota refuses evicts the holder's
// oldest kept files first and is admitted when that made room; the
// eviction is audited; a kept file still open somewhere stays.
func TestAdmitEvictsTrash(t *testing.T) {
	f := newFixture(t, nil)
	held := &frontend{held: map[uint64]bool{}}
	f.core.Attach(held)
	old := f.file(t, "old", 600<<10)
	open := f.file(t, "open", 100<<10)
	f.trash(t, "old")
	f.trash(t, "open")
	held.held[open.Ino] = true
	u, _ := f.store.Usage(alice)
	f.limit(t, shedfs.Limit{Bytes: u.Bytes + 100<<10})

	adm, d, err := f.core.Admit(Growth{Holder: alice, Bytes: 500 << 10})
	if err != nil || !d.Allowed() {
		t.Fatalf("500 KiB with 600 KiB in the trash: %v %v, want admitted after eviction", d, err)
	}
	adm.Done()
	if _, err := f.store.GetInode(old.Ino); err == nil {
		t.Error("the oldest kept file is still there")
	}
	if _, err := f.store.GetInode(open.Ino); err != nil {
		t.Errorf("the kept file a frontend holds open went: %v", err)
	}
	if n := f.events.count("trash_evict"); n != 1 {
		t.Errorf("%d trash_evict events, want 1", n)
	}
	if len(held.freed) != 1 || held.freed[0] != old.Ino {
		t.Errorf("frontend told of %v freed, want [%d]", held.freed, old.Ino)
	}
	// Nothing left to evict but the open file: refused.
	if _, d, _ := f.core.Admit(Growth{Holder: alice, Bytes: 800 << 10}); d.Errno != syscall.EDQUOT {
		t.Errorf("800 KiB with only an open kept file: %v, want EDQUOT", d)
	}
}

// TestInTxnEvictsForInodes: a create refused inside its transaction for
// the inode limit evicts the holder's trash and runs again, as imports,
// restores and a view's creates all do.
func TestInTxnEvictsForInodes(t *testing.T) {
	f := newFixture(t, nil)
	f.file(t, "kept", 10)
	f.trash(t, "kept")
	u, _ := f.store.Usage(alice)
	f.limit(t, shedfs.Limit{Inodes: u.Inodes})
	tmpl := &shedfs.Inode{Mode: syscall.S_IFREG | 0o644, Owner: "alice"}
	runs := 0
	d, err := f.core.InTxn(alice, 0, 1, func() (d acl.Decision, err error) {
		runs++
		_, err = f.store.Create(f.alice.Roots.Private, "new", tmpl, AdmitInodes(&d, 1))
		return d, err
	})
	if err != nil || !d.Allowed() || runs != 2 {
		t.Fatalf("create at the inode limit with a kept file: %v %v after %d runs, want admitted on the second", d, err, runs)
	}
	if f.trashed(t) != 0 {
		t.Error("the kept file was not evicted")
	}
	// No trash left: refused at once, nothing evicted to try again for.
	runs = 0
	d, err = f.core.InTxn(alice, 0, 1, func() (d acl.Decision, err error) {
		runs++
		_, err = f.store.Create(f.alice.Roots.Private, "more", tmpl, AdmitInodes(&d, 1))
		return d, err
	})
	if d.Errno != syscall.EDQUOT || err == nil || runs != 1 {
		t.Errorf("create past the limit with an empty trash: %v %v after %d runs", d, err, runs)
	}
}

// fullDisk is a disk guard (acl.AdmitSpace over free bytes it is told)
// standing in for a disk that fills; the core frees room on it by evicting
// trash, which it learns of through Remeasure. The real guard on a real
// full disk is integration's TestFullDisk.
type fullDisk struct {
	mu         sync.Mutex
	free       int64
	remeasured int
	afterFree  int64
}

func (s *fullDisk) Admit(bytes, inodes int64) acl.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return acl.AdmitSpace(acl.Space{FreeBytes: s.free, FreeInodes: 1 << 30}, bytes, inodes)
}

func (s *fullDisk) Short() bool { return false }

func (s *fullDisk) Remeasure() {
	s.mu.Lock()
	s.remeasured++
	s.free = s.afterFree
	s.mu.Unlock()
}

// TestAdmitDiskFull: growth the disk has no room for evicts the oldest
// kept files of anyone, removing their blobs at once, and is admitted
// when that freed enough; without trash it is refused with ENOSPC.
func TestAdmitDiskFull(t *testing.T) {
	disk := &fullDisk{free: 0, afterFree: 1 << 20}
	f := newFixture(t, disk)
	kept := f.file(t, "kept", 4096)
	f.trash(t, "kept")
	adm, d, err := f.core.Admit(Growth{Holder: alice, Bytes: 4096, Disk: 4096})
	if err != nil || !d.Allowed() {
		t.Fatalf("growth on a full disk with trash: %v %v", d, err)
	}
	adm.Done()
	if disk.remeasured != 1 || f.trashed(t) != 0 {
		t.Errorf("remeasured %d, %d kept files left", disk.remeasured, f.trashed(t))
	}
	if _, err := f.blobs.OpenFile(kept.Ino, false); err == nil {
		t.Error("the evicted file's blob is still there")
	}
	disk.free, disk.afterFree = 0, 0
	if _, d, _ := f.core.Admit(Growth{Holder: alice, Bytes: 4096, Disk: 4096}); d.Errno != syscall.ENOSPC {
		t.Errorf("growth on a full disk without trash: %v, want ENOSPC", d)
	}
}

// TestClaimReplaceCredit: an import's claim is admitted on what it costs
// once the file it replaces is gone, and the last check in the
// transaction refuses it when the old file went meanwhile; a claim holds
// its bytes pending until it ends.
func TestClaimReplaceCredit(t *testing.T) {
	const mib = 1 << 20
	f := newFixture(t, nil)
	old := f.file(t, "old", 3*mib)
	u, _ := f.store.Usage(alice)
	f.limit(t, shedfs.Limit{Bytes: u.Bytes + mib})
	acct := f.core.Accountant()
	cl, d, err := f.core.Claim(alice, 3*mib, 3*mib)
	if err != nil || !d.Allowed() {
		t.Fatalf("replacing 3 MiB with 3 MiB, 1 MiB left: %v %v", d, err)
	}
	if acct.Pending(alice) != 3*mib || cl.Held() != 3*mib {
		t.Errorf("pending %d, held %d", acct.Pending(alice), cl.Held())
	}
	if d, _ := cl.Grow(2*mib, 0); d.Allowed() {
		t.Error("growing the replacement to 5 MiB admitted")
	}
	// The old file is deleted meanwhile: no credit any more.
	if _, err := f.store.Unlink(f.alice.Roots.Private, "old", false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Reclaim(old.Ino); err != nil {
		t.Fatal(err)
	}
	stored, _ := f.store.Usage(alice)
	lim, _ := f.store.GetLimit(alice)
	if err := cl.Commit(func() error { return cl.Admit(stored, lim, 3*mib) }); err != nil {
		t.Fatalf("the replacement alone fits: %v", err)
	}
	cl.Release() // after Commit: nothing
	if p := acct.Pending(alice); p != 0 {
		t.Errorf("pending %d after commit", p)
	}
	cl2, d, _ := f.core.Claim(alice, 2*mib, 0)
	if !d.Allowed() {
		t.Fatal("2 MiB refused with 4 MiB free")
	}
	stored.Bytes += 3 * mib
	if err := cl2.Commit(func() error { return cl2.Admit(stored, lim, 2*mib) }); err == nil {
		t.Error("commit past the limit admitted")
	}
	cl2.Release()
	if p := acct.Pending(alice); p != 0 {
		t.Errorf("pending %d after release", p)
	}
}

// TestConcurrentClaims: claims, pending writes and frees race on one
// holder under -race; at no moment do stored plus pending bytes pass the
// limit, and nothing stays pending.
func TestConcurrentClaims(t *testing.T) {
	f := newFixture(t, nil)
	u, _ := f.store.Usage(alice)
	limit := u.Bytes + 64*4096
	f.limit(t, shedfs.Limit{Bytes: limit})
	acct := f.core.Accountant()
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				if (w+i)%2 == 0 {
					cl, d, err := f.core.Claim(alice, 4096, 0)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed() {
						if d, _ := cl.Grow(4096, 0); !d.Allowed() {
							cl.Release()
							continue
						}
						cl.Release()
					}
				} else {
					adm, d, err := f.core.Admit(Growth{Holder: alice, Bytes: 8192, Allot: true})
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed() {
						acct.Add(alice, 8192)
						adm.Done()
						acct.Add(alice, -8192)
					}
				}
				if u, _ := acct.Usage(alice); u.Bytes > limit {
					t.Errorf("usage %d passed the limit %d", u.Bytes, limit)
				}
			}
		}()
	}
	wg.Wait()
	if p := acct.Pending(alice); p != 0 {
		t.Errorf("pending %d at the end", p)
	}
}

// frontend is an attached door that holds some inodes open and records
// what it is told.
type frontend struct {
	mu      sync.Mutex
	held    map[uint64]bool
	freed   []uint64
	members []string
	trash   int
	// owners are the OwnerChanged calls, "user uid:gid".
	owners []string
	// lost are the inodes whose locks were lost (LocksLost).
	lost []uint64
	// changes are what operations through views changed, by view.
	changes map[*View][]Change
}

func (f *frontend) Holds(ino uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[ino]
}
func (f *frontend) Overlay(rec *shedfs.Inode) {
	if f.Holds(rec.Ino) {
		rec.Size = 12345
	}
}
func (f *frontend) MembershipChanged(user string) { f.members = append(f.members, user) }
func (f *frontend) TrashChanged()                 { f.trash++ }
func (f *frontend) TrashFreed(gone []*shedfs.Inode, why string, removed bool) {
	for _, n := range gone {
		f.freed = append(f.freed, n.Ino)
	}
}
func (f *frontend) OwnerChanged(user string, opts ViewOptions) {
	f.owners = append(f.owners, fmt.Sprintf("%s %d:%d", user, opts.Uid, opts.Gid))
}
func (f *frontend) SettingsChanged()         {}
func (f *frontend) SessionsChanged([]string) {}
func (f *frontend) LocksLost(v *View, inos []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost = append(f.lost, inos...)
}
func (f *frontend) Changed(from *View, z shedfs.Zone, items []Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changes == nil {
		f.changes = make(map[*View][]Change)
	}
	f.changes[from] = append(f.changes[from], items...)
}

// TestFanOut: what a door changes reaches every attached frontend; Stat
// lays an open file's state over the record; without a frontend, a
// replaced inode and freed kept files go at once.
func TestFanOut(t *testing.T) {
	f := newFixture(t, nil)
	a, b := &frontend{held: map[uint64]bool{}}, &frontend{held: map[uint64]bool{}}
	f.core.Attach(a)
	f.core.Attach(b)
	n := f.file(t, "x", 10)
	f.core.MembershipChanged("alice", "bob")
	f.core.TrashChanged()
	for i, fe := range []*frontend{a, b} {
		if len(fe.members) != 2 || fe.trash != 1 {
			t.Errorf("frontend %d told %v %d", i, fe.members, fe.trash)
		}
	}
	if f.core.Unused(n.Ino) != true {
		t.Error("an inode nobody holds is not unused")
	}
	b.held[n.Ino] = true
	if f.core.Unused(n.Ino) {
		t.Error("an inode frontend b holds is unused")
	}
	if rec, err := f.core.Stat(n.Ino); err != nil || rec.Size != 12345 {
		t.Errorf("Stat: %+v %v, want the open state laid over", rec, err)
	}

	// Without frontends (the command line), an inode the admin
	// unlinks goes at once.
	g := newFixture(t, nil)
	r := g.file(t, "r", 10)
	if err := g.core.DeleteNames([]metadata.Name{{Parent: g.alice.Roots.Private, Name: "r", Path: "r"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.GetInode(r.Ino); err == nil {
		t.Error("an unlinked inode stays with no frontend to hold it")
	}
}

// TestAdmitEvictsOuterTrash: a write in a session without a limit of its
// own is refused by its user's limit, which the user's trash fills: the
// user's trash goes and the write is admitted, as it is in the main view
// (issue: trash not evicted when the user's limit refuses in a session).
func TestAdmitEvictsOuterTrash(t *testing.T) {
	f := newFixture(t, nil)
	f.file(t, "big", 1<<20)
	f.trash(t, "big")
	u, _ := f.store.Usage(alice)
	f.limit(t, shedfs.Limit{Bytes: u.Bytes})
	session := shedfs.SessionHolder("alice", "s1")
	adm, d, err := f.core.Admit(Growth{Holder: session, Bytes: shedfs.ChargeUnit})
	if err != nil || !d.Allowed() {
		t.Fatalf("a session's write with the user's trash full: %v %v, want the user's trash evicted", d, err)
	}
	adm.Done()
	if f.trashed(t) != 0 {
		t.Error("the user's kept file is still there")
	}
}
