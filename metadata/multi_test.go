package metadata

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

// openPair opens two stores on one etcd prefix, as two daemons on two
// hosts would.
func openPair(t *testing.T) (a, b *Store) {
	t.Helper()
	cfg := testEtcd(t)
	a, err := OpenEtcd(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = OpenEtcd(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// deafen stops a store's change feed, so that its cache keeps what another
// daemon changed: the worst case of a feed that has not caught up.
func deafen(s *Store) { s.engine().(*etcdKV).feed.stop() }

// TestEtcdStaleCacheNeverCommits: a daemon whose cache holds a value
// another daemon has since changed never commits a write computed from
// it. The read-modify-writes of the inode size and of the usage (the
// quota) of both daemons all count.
func TestEtcdStaleCacheNeverCommits(t *testing.T) {
	a, b := openPair(t)
	root := a.ShareRoot()
	f := must[*shedfs.Inode](t)(a.Create(root, "f", file(0o644), nil))
	add := func(s *Store, d uint64) {
		t.Helper()
		if _, err := s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size += d; return nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	add(a, 1) // a caches f's record and the share's usage
	must[shedfs.Usage](t)(a.Usage(shedfs.Holder("share")))
	deafen(a)
	add(b, 10)
	must[*shedfs.Inode](t)(b.Create(root, "g", file(0o644), nil)) // b charges an inode
	add(a, 100)
	must[*shedfs.Inode](t)(a.Create(root, "h", file(0o644), nil)) // a charges one, from a stale usage
	// a reads what it committed last (its feed is off, b's may lag).
	n := must[*shedfs.Inode](t)(a.GetInode(f.Ino))
	if n.Size != 111 {
		t.Fatalf("size %d after +1 (a), +10 (b), +100 (a on a stale cache), want 111", n.Size)
	}
	u := must[shedfs.Usage](t)(a.Usage(shedfs.Holder("share")))
	if u.Inodes != 4 {
		t.Fatalf("share usage %+v after creating f, g, h in the share root, want 4 inodes", u)
	}
}

// TestEtcdRaceCounts: two daemons add to one counter from many goroutines
// at once; every increment counts.
func TestEtcdRaceCounts(t *testing.T) {
	a, b := openPair(t)
	f := must[*shedfs.Inode](t)(a.Create(a.ShareRoot(), "f", file(0o644), nil))
	const per = 25
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for _, s := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if _, err := s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size++; return nil }, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		if n := must[*shedfs.Inode](t)(s.GetInode(f.Ino)); n.Size != 4*per {
			t.Fatalf("size %d after %d increments", n.Size, 4*per)
		}
	}
}

// TestEtcdFeed: a change made by one daemon reaches the other's cache and
// its follower, and the follower never hears of its own changes. It logs
// the latency from commit to arrival.
func TestEtcdFeed(t *testing.T) {
	a, b := openPair(t)
	root := a.ShareRoot()
	got := make(chan Change, 256)
	b.Follow(func(c Change) { got <- c })
	var own []Change
	a.Follow(func(c Change) { own = append(own, c) })
	f := must[*shedfs.Inode](t)(a.Create(root, "f", file(0o644), nil))
	for c := range got { // the create's batch, before the rounds start
		if slices.Contains(c.Entries, EntryRef{Dir: root, Name: "f"}) {
			break
		}
	}
	must[*shedfs.Inode](t)(b.GetInode(f.Ino)) // cached on b
	const rounds = 100
	var lat, afterAck []time.Duration
	for i := range rounds {
		start := time.Now()
		if _, err := a.Update(f.Ino, func(n *shedfs.Inode) error { n.Size = uint64(i + 1); return nil }, nil); err != nil {
			t.Fatal(err)
		}
		ack := time.Now()
		var c Change
		for {
			select {
			case c = <-got:
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: no change reached b in 5 s", i)
			}
			if slices.Contains(c.Inodes, f.Ino) {
				break
			}
		}
		lat = append(lat, c.At.Sub(start))
		afterAck = append(afterAck, c.At.Sub(ack))
		if n := must[*shedfs.Inode](t)(b.GetInode(f.Ino)); n.Size != uint64(i+1) {
			t.Fatalf("round %d: b reads size %d after the feed, want %d", i, n.Size, i+1)
		}
	}
	must[*shedfs.Inode](t)(a.Create(root, "g", file(0o644), nil))
	var c Change
	select {
	case c = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("create on a: nothing reached b")
	}
	if !slices.Contains(c.Entries, EntryRef{Dir: root, Name: "g"}) {
		t.Fatalf("create of g on a reached b as %+v", c)
	}
	if _, err := b.Lookup(root, "g"); err != nil {
		t.Fatalf("b looks up g after the feed: %v", err)
	}
	if len(own) != 0 {
		t.Fatalf("a heard of its own changes: %+v", own)
	}
	slices.Sort(lat)
	slices.Sort(afterAck)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("write on a (start) to change on b's feed, %d rounds: p50 %v, p99 %v; from a's commit acknowledged: p50 %v, p99 %v",
		rounds, p50, p99, afterAck[len(lat)/2], afterAck[len(lat)*99/100])
	if p99 > time.Second {
		t.Errorf("p99 %v", p99)
	}
}

// TestEtcdOpenMarkers: an inode one daemon holds open survives an unlink
// through another, which cannot reclaim it; the holder reclaims it when it
// lets go. A holder that dies lets go with its lease, and the others hear
// of its departure.
func TestEtcdOpenMarkers(t *testing.T) {
	a, b := openPair(t)
	root := a.ShareRoot()
	always := func(uint64) bool { return true }
	for _, die := range []bool{false, true} {
		f := must[*shedfs.Inode](t)(a.Create(root, "f", file(0o644), nil))
		if err := a.Hold(f.Ino); err != nil {
			t.Fatal(err)
		}
		n, freed, err := b.UnlinkFree(root, "f", false, always)
		if err != nil || freed || n.Nlink != 0 {
			t.Fatalf("unlink on b of a file a holds: freed %v, %+v, %v", freed, n, err)
		}
		if _, err := b.Reclaim(f.Ino); !errors.Is(err, ErrHeld) {
			t.Fatalf("reclaim on b of a file a holds: %v, want ErrHeld", err)
		}
		if !die {
			orphan, err := a.Unhold(f.Ino)
			if err != nil || !orphan {
				t.Fatalf("unhold on a: orphan %v, %v", orphan, err)
			}
			if _, err := a.Reclaim(f.Ino); err != nil {
				t.Fatalf("reclaim on a after letting go: %v", err)
			}
			continue
		}
		gone := make(chan struct{}, 1)
		b.FollowDepartures(func() { gone <- struct{}{} })
		e := a.engine().(*etcdKV)
		e.feed.stop()
		ctx, cancel := e.ctx()
		if _, err := e.cli.Revoke(ctx, e.lease); err != nil { // as its death would, after the TTL
			t.Fatal(err)
		}
		cancel()
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Fatal("b did not hear of a's departure")
		}
		if _, err := b.Reclaim(f.Ino); err != nil {
			t.Fatalf("reclaim on b after a died: %v", err)
		}
	}
}

// TestEtcdReservations: allotments of two daemons and the stored usage
// never pass the limit together; a allotment given back makes room.
func TestEtcdReservations(t *testing.T) {
	a, b := openPair(t)
	h := shedfs.Holder("share")
	if err := a.SetLimit(h, shedfs.Limit{Bytes: 100 << 10}); err != nil {
		t.Fatal(err)
	}
	errOver := errors.New("over")
	admit := func(u shedfs.Usage, l shedfs.Limit, delta int64) error {
		if u.Bytes+delta > l.Bytes {
			return errOver
		}
		return nil
	}
	if err := a.Allot(h, 60<<10, 60<<10, admit); err != nil {
		t.Fatalf("a reserves 60 KiB of 100: %v", err)
	}
	if err := b.Allot(h, 60<<10, 60<<10, admit); !errors.Is(err, errOver) {
		t.Fatalf("b reserves 60 KiB more: %v, want a refusal", err)
	}
	if err := b.Allot(h, 30<<10, 30<<10, admit); err != nil {
		t.Fatalf("b reserves 30 KiB more: %v", err)
	}
	if err := a.Allot(h, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Allot(h, 90<<10, 60<<10, admit); err != nil {
		t.Fatalf("b grows to 90 KiB after a gave back: %v", err)
	}
}

// TestEtcdAuditAcrossDaemons: two daemons appending records of the same
// nanosecond at once keep every record (neither overwrites the other's
// keys), and each record names the daemon (host and pid) that wrote it.
func TestEtcdAuditAcrossDaemons(t *testing.T) {
	a, b := openPair(t)
	at := time.Unix(1700000000, 0)
	const n = 50
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := s.AppendAudit([]AuditRecord{{Time: at, User: "alice", Op: "create", Result: ResultOK}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	hosts := map[string]int{}
	total := 0
	if err := a.QueryAudit(AuditFilter{}, func(r AuditRecord) error {
		total++
		hosts[r.Host]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if total != 2*n {
		t.Fatalf("%d audit records after %d appends of one nanosecond by two daemons", total, 2*n)
	}
	// Both daemons are this test process, so they share one name.
	if hosts[daemonHost()] != 2*n {
		t.Fatalf("records by host %v: want every one named %q", hosts, daemonHost())
	}
}

// TestEtcdFollowEditLocks: an edit lock one daemon takes or releases
// reaches the other through the feed, with the file's inode.
func TestEtcdFollowEditLocks(t *testing.T) {
	a, b := openPair(t)
	got := make(chan uint64, 8)
	a.FollowEditLocks(func(ino uint64, all bool) {
		if !all {
			got <- ino
		}
	})
	now := time.Now()
	wait := func(what string, want uint64) {
		t.Helper()
		select {
		case ino := <-got:
			if ino != want {
				t.Fatalf("%s: told of %d, want %d", what, ino, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the other daemon was not told", what)
		}
	}
	if _, err := b.TakeEditLock(EditLock{Ino: 4242, User: "bob", Taken: now, Expires: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	wait("take", 4242)
	if _, err := b.ReleaseEditLock(4242, nil); err != nil {
		t.Fatal(err)
	}
	wait("release", 4242)
}
