package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// etcdPrefix is the key prefix of the etcd store s, without its slash: the
// daemons' registrations, locks and open marks live beside it.
func (s *etcdStore) etcdPrefix() string {
	meta := s.args[1]
	return meta[strings.LastIndex(meta, "/")+1:]
}

// etcdClient is a client of the store's cluster, closed at the test's end.
func etcdClient(t *testing.T, s *etcdStore) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.cluster.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// daemonKey returns the registration key and lease of the daemon with pid,
// ok false if it is not registered.
func daemonKey(t *testing.T, cli *clientv3.Client, s *etcdStore, pid int) (string, clientv3.LeaseID, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, s.etcdPrefix()+"#daemon/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Value), fmt.Sprintf(" pid %d ", pid)) {
			return string(kv.Key), clientv3.LeaseID(kv.Lease), true
		}
	}
	return "", 0, false
}

// keysUnder lists the keys with prefix p.
func keysUnder(t *testing.T, cli *clientv3.Client, p string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// TestEtcdLocksAcrossHosts runs two `shedfs serve` daemons on one etcd
// store, as two hosts. For flock, POSIX and OFD locks: a lock taken on
// host A makes a non-blocking one on host B fail with EAGAIN, a blocking
// one on B waits and is granted, through the store's watch, soon after A's
// holder closes, and a wait on B is interrupted by a signal (EINTR). Then
// a user added through A's admin socket gets a view on B, a group
// membership changed through A shows in her view on B, and her removal
// unmounts it there, all without a restart. Last, A's lease is revoked:
// A renews it and puts back its lock and its open mark, so B is still
// refused, and A still writes.
func TestEtcdLocksAcrossHosts(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdTeam(t, c)
	a, sockA := startEtcdServe(t, s, "alice", "bob")
	b, _ := startEtcdServe(t, s, "alice", "bob")
	cli := etcdClient(t, s)

	var woke []time.Duration
	for _, kind := range lockKinds {
		t.Run(kind, func(t *testing.T) {
			name := "lock-" + kind
			A := a.In("alice", "groups", "team-alpha", name)
			B := b.In("bob", "groups", "team-alpha", name)
			mustWrite(t, A, []byte("x"), 0o644)
			if _, ok := within(5*time.Second, func() bool { _, err := os.Stat(B); return err == nil }); !ok {
				t.Fatalf("%s from A not seen on B", name)
			}
			holder := startLocker(t, "alice's writer on A", kind, true, false, A)
			holder.expect("locked", 5*time.Second)
			wantErrno(t, "bob's non-blocking write lock on B", tryLock(t, kind, true, B), unix.EAGAIN)
			wantErrno(t, "bob's non-blocking read lock on B", tryLock(t, kind, false, B), unix.EAGAIN)

			out, _ := tool(t, "perl", "-e", perlLockIntr, B, kind)
			if strings.TrimSpace(out) != "EINTR" {
				t.Errorf("bob's interrupted wait on B: %q, want EINTR", out)
			}

			waiter := startLocker(t, "bob's waiting writer on B", kind, true, true, B)
			waiter.waiting()
			start := time.Now()
			holder.release()
			waiter.expect("locked", 5*time.Second)
			woke = append(woke, time.Since(start))

			// The other way round: B holds, A is refused.
			wantErrno(t, "alice's non-blocking read lock on A", tryLock(t, kind, false, A), unix.EAGAIN)
			waiter.release()
			err := tryLock(t, kind, true, A)
			for deadline := time.Now().Add(5 * time.Second); err == unix.EAGAIN && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond) // flock and OFD go with the asynchronous RELEASE
				err = tryLock(t, kind, true, A)
			}
			if err != nil {
				t.Errorf("alice's write lock on A once B let go: %v", err)
			}
		})
	}
	slices.Sort(woke)
	t.Logf("a waiter on B granted after A's holder closed: %v", woke)
	for _, d := range woke {
		if d > 1500*time.Millisecond {
			t.Errorf("a waiter on B granted %v after A let go: not woken by the watch (its poll is 2s)", d)
		}
	}

	// Users and groups changed through A's admin socket reach B.
	adminA := func(args ...string) {
		adminOK(t, append(args, append([]string{"--admin-socket", sockA}, s.args...)...)...)
	}
	adminA("user", "add", "carol")
	a.waitView("carol")
	b.waitView("carol")
	mustWrite(t, b.In("carol", "hello"), []byte("from B"), 0o644)
	if _, ok := within(5*time.Second, func() bool { got, _ := os.ReadFile(a.In("carol", "hello")); return string(got) == "from B" }); !ok {
		t.Error("carol's file written on B not read on A")
	}
	if _, err := os.Stat(b.In("carol", "groups", "team-alpha")); err == nil {
		t.Fatal("carol sees team-alpha on B before she is a member")
	}
	adminA("group", "add-member", "team-alpha", "carol")
	if took, ok := within(5*time.Second, func() bool {
		_, err := os.Stat(b.In("carol", "groups", "team-alpha", "lock-flock"))
		return err == nil
	}); !ok {
		t.Error("carol added to team-alpha through A: her view on B does not show the group")
	} else {
		t.Logf("membership added on A seen in the view on B after %v", took)
	}
	adminA("group", "remove-member", "team-alpha", "carol")
	if _, ok := within(5*time.Second, func() bool {
		_, err := os.Stat(b.In("carol", "groups", "team-alpha", "lock-flock"))
		return err != nil
	}); !ok {
		t.Error("carol removed from team-alpha through A: her view on B still shows the group")
	}
	adminA("user", "remove", "carol", "--force")
	if _, ok := within(10*time.Second, func() bool { _, mounted := findMount(b.In("carol")); return !mounted }); !ok {
		t.Error("carol removed through A: her view on B still mounted")
	}

	// A's lease revoked: A renews it and puts back its lock and its open
	// mark; meanwhile it never acts on a lease it lost.
	L := a.In("alice", "groups", "team-alpha", "lease-lock")
	mustWrite(t, L, []byte("x"), 0o644)
	holder := startLocker(t, "alice's writer on A", "flock", true, false, L)
	holder.expect("locked", 5*time.Second)
	open, err := os.Open(a.In("alice", "groups", "team-alpha", "lock-posix"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	key, lease, ok := daemonKey(t, cli, s, a.cmd.Process.Pid)
	if !ok {
		t.Fatalf("daemon A (pid %d) not registered: %v", a.cmd.Process.Pid, keysUnder(t, cli, s.etcdPrefix()+"#daemon/"))
	}
	id := key[strings.LastIndexByte(key, '/')+1:]
	mine := func(p string) int {
		n := 0
		for _, k := range keysUnder(t, cli, s.etcdPrefix()+p) {
			if strings.HasSuffix(k, "/"+id) {
				n++
			}
		}
		return n
	}
	// Open on A: lease-lock (by its holder) and lock-posix; files closed
	// on A in the last 30 s keep a lingering mark too, which a renewal
	// does not put back.
	if mine("#lock/") != 1 || mine("#open/") < 2 {
		t.Fatalf("before the revoke, A has %d lock records and %d open marks, want 1 and at least 2", mine("#lock/"), mine("#open/"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = cli.Revoke(ctx, lease)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if mine("#lock/") != 0 || mine("#open/") != 0 {
		t.Fatal("the revoke left A's records")
	}
	took, ok := within(15*time.Second, func() bool {
		time.Sleep(20 * time.Millisecond)
		_, _, ok := daemonKey(t, cli, s, a.cmd.Process.Pid)
		return ok && mine("#lock/") == 1 && mine("#open/") == 2
	})
	if !ok {
		t.Fatalf("A did not renew its lease and put back its lock and open mark within %v; it has %d and %d\nstderr:\n%s",
			took, mine("#lock/"), mine("#open/"), a.Stderr())
	}
	t.Logf("A re-registered with its lock and open mark %v after its lease was revoked", time.Since(revoked).Round(10*time.Millisecond))
	wantErrno(t, "bob's lock on B of the file A locked before its lease was revoked",
		tryLock(t, "flock", true, b.In("bob", "groups", "team-alpha", "lease-lock")), unix.EAGAIN)
	mustWrite(t, a.In("alice", "after-renew"), []byte("ok"), 0o644)
	if !strings.Contains(a.Stderr(), "lease of this daemon ended") || !strings.Contains(a.Stderr(), "lease of this daemon renewed") {
		t.Errorf("A's log does not say its lease ended and was renewed:\n%s", a.Stderr())
	}
	holder.release()
	if _, ok := within(5*time.Second, func() bool {
		return tryLock(t, "flock", true, b.In("bob", "groups", "team-alpha", "lease-lock")) == nil
	}); !ok {
		t.Error("A's holder let go after the renewal: B still refused")
	}
	open.Close()
	a.Stop()
	b.Stop()
}
