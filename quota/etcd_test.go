package quota_test

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/internal/etcdtest"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/quota"
)

// daemonPair is two accountants over one store on a real etcd cluster,
// as two daemons on two hosts have: each its own store handle (its own
// lease, allotments and feed) and its own pending bytes.
type daemonPair struct {
	stores [2]*metadata.Store
	accts  [2]*quota.Accountant
}

func openDaemonPair(t *testing.T, h shedfs.Holder, limit int64) *daemonPair {
	t.Helper()
	c := etcdtest.Start(t, 3)
	cfg := metadata.EtcdConfig{Endpoints: c.Endpoints(), Prefix: "quota-test/"}
	p := &daemonPair{}
	for i := range p.stores {
		s, err := metadata.OpenEtcd(cfg, metadata.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		a := quota.New(s)
		// As the daemon does: a request of another daemon for room
		// this one holds and does not use is answered at once.
		s.FollowWants(a.GiveBack)
		p.stores[i], p.accts[i] = s, a
	}
	if err := p.stores[0].SetLimit(h, shedfs.Limit{Bytes: limit}); err != nil {
		t.Fatal(err)
	}
	return p
}

// write admits n pending bytes of h on daemon i as vfs.Core.Admit does a
// write: the local decision (stored usage and this daemon's pending),
// then the allotment in etcd.
func (p *daemonPair) write(t *testing.T, i int, h shedfs.Holder, n int64) bool {
	t.Helper()
	a := p.accts[i]
	unlock := a.Lock(h)
	defer unlock()
	u, l, err := a.Quota(h)
	if err != nil {
		t.Fatal(err)
	}
	if d := acl.AdmitBytes(u, l, n); !d.Allowed() {
		return false
	}
	d, err := a.Cover(h, n)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed() {
		if d.Errno != syscall.EDQUOT {
			t.Fatalf("refusal %v, want EDQUOT", d.Errno)
		}
		return false
	}
	a.Add(h, n)
	return true
}

// TestCoverExactAcrossDaemons: two daemons writing at once into one
// quota are admitted exactly up to the limit together, whatever chunks
// of allotment either took first; and room another daemon holds but no
// longer uses (its files closed less than AllotIdle ago) is given to a
// write that fits at once, not a second later.
func TestCoverExactAcrossDaemons(t *testing.T) {
	h := shedfs.GroupHolder("team")
	const limit, step = 5 << 20, 64 << 10
	p := openDaemonPair(t, h, limit)

	// Two writers of 3 MiB each, one per daemon, at once: 5 MiB fit.
	var wg sync.WaitGroup
	var admitted [2]int64
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for admitted[i] < 3<<20 && p.write(t, i, h, step) {
				admitted[i] += step
			}
		}()
	}
	wg.Wait()
	if total := admitted[0] + admitted[1]; total != limit {
		t.Fatalf("two writers of 3 MiB into 5 MiB: %d + %d = %d bytes admitted, want exactly %d",
			admitted[0], admitted[1], total, int64(limit))
	}
	for i := range 2 {
		if p.write(t, i, h, 1) {
			t.Fatalf("daemon %d admitted a byte past the full quota", i)
		}
	}

	// Both let go of what they wrote (a file written and removed before
	// it was persisted): their allotments stay for AllotIdle, and a
	// write that fits must not wait for that.
	for i := range 2 {
		p.accts[i].Add(h, -admitted[i])
	}
	start := time.Now()
	if !p.write(t, 1, h, 4<<20) {
		t.Fatalf("4 MiB into an empty 5 MiB quota refused %v after the other daemon let go", time.Since(start))
	}
	t.Logf("4 MiB admitted %v after both daemons let go of their bytes", time.Since(start).Round(time.Millisecond))
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("the write waited %v for room nobody used", took)
	}
	if !p.write(t, 0, h, 1<<20) || p.write(t, 0, h, 1) {
		t.Fatal("the last MiB: not admitted exactly")
	}
}

// TestMakeRoomAcrossDaemons: a charge a store transaction admits with
// the other daemons' allotments counted as used (a size set, an xattr)
// is not refused for room another daemon holds and does not use: the
// refusal's MakeRoom asks for it back, and the charge fits when decided
// again.
func TestMakeRoomAcrossDaemons(t *testing.T) {
	h := shedfs.Holder("share")
	p := openDaemonPair(t, h, 5<<20)
	// Daemon 0 wrote and let go: its 4 MiB chunk stays for AllotIdle.
	if !p.write(t, 0, h, 64<<10) {
		t.Fatal("64 KiB into an empty quota refused")
	}
	p.accts[0].Add(h, -64<<10)
	s, a := p.stores[1], p.accts[1]
	f, err := s.Create(s.ShareRoot(), "f", &shedfs.Inode{Mode: syscall.S_IFREG | 0o644}, nil)
	if err != nil {
		t.Fatal(err)
	}
	grow := func() (acl.Decision, error) {
		var d acl.Decision
		_, err := s.Update(f.Ino, func(n *shedfs.Inode) error { n.Size = 2 << 20; return nil },
			func(u shedfs.Usage, l shedfs.Limit, delta int64) error {
				d = acl.AdmitBytes(u, l, delta)
				return d.Err()
			})
		return d, err
	}
	start := time.Now()
	unlock := a.Lock(h)
	d, err := grow()
	if !d.Allowed() && a.MakeRoom(h, 2<<20, 0) {
		d, err = grow()
	}
	unlock()
	if err != nil || !d.Allowed() {
		t.Fatalf("a 2 MiB size set into an empty 5 MiB quota beside another daemon's idle allotment: %v, %v after %v", d, err, time.Since(start))
	}
	t.Logf("2 MiB admitted in the store after %v", time.Since(start).Round(time.Millisecond))
}
