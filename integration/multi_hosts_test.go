package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// TestEtcdAcrossHosts runs two `shedfs serve` daemons on one etcd store,
// as two hosts, for what happens to one host's state when the other acts.
//
// lost_lock: alice's process on A holds a write lock of each kind (flock,
// POSIX, OFD) on a group file; A's lease is revoked, which frees the
// locks in the store, and bob on B takes them before A has its lease
// again. A then loses them: reads, writes and lock requests through
// alice's descriptors fail with EIO (her unlock and close work), the loss
// is in A's log and audit trail, and a fresh open on A reads and writes
// (its lock is refused while bob holds one, and granted once he lets go).
// Meanwhile `shedfs status` asked of A lists bob's locks, held on B.
//
// owner: a user added through A with an owner (uid/gid), and added again
// with another, has a view on B that presents it.
//
// import_quota: while a writer on B has written 1 MiB into alice's quota
// (and holds a 4 MiB reservation for it), an import through A that does
// not fit beside what B has written is refused, those that fit are taken
// (B gives back the room it holds and has not used), the writer on B then
// fills what is left to the byte, and alice never passes her limit.
func TestEtcdAcrossHosts(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdTeam(t, c)
	a, sockA := startEtcdServe(t, s, "alice", "bob")
	b, _ := startEtcdServe(t, s, "alice", "bob")
	cli := etcdClient(t, s)
	adminA := func(args ...string) string {
		return adminOK(t, append(args, append([]string{"--admin-socket", sockA}, s.args...)...)...)
	}

	t.Run("lost_lock", func(t *testing.T) {
		// A's keep-alive may notice the revoke and renew before bob
		// locks (it looks every third of the 10 s TTL; bob needs tens
		// of milliseconds): then the attempt proves nothing and runs
		// again.
		for attempt := range 3 {
			if lockLostAttempt(t, s, a, b, sockA, cli, attempt) {
				return
			}
			t.Logf("attempt %d: A renewed its lease before bob locked; again", attempt)
		}
		t.Fatal("A always renewed its lease before bob could lock")
	})

	t.Run("owner", func(t *testing.T) {
		owner := func(uid uint32) {
			t.Helper()
			var st unix.Stat_t
			took, ok := within(10*time.Second, func() bool {
				return unix.Stat(b.In("dave"), &st) == nil && st.Uid == uid && st.Gid == uid+1
			})
			if !ok {
				t.Errorf("dave's view on B presents %d:%d, want %d:%d set through A\nB's stderr:\n%s", st.Uid, st.Gid, uid, uid+1, b.Stderr())
				return
			}
			t.Logf("dave's owner %d set through A presented on B after %v", uid, took)
		}
		adminA("user", "add", "dave", "--uid", "4242", "--gid", "4243")
		b.waitView("dave")
		owner(4242)
		adminA("user", "remove", "dave", "--force")
		adminA("user", "add", "dave", "--uid", "5252", "--gid", "5253")
		owner(5252)
	})

	t.Run("import_quota", func(t *testing.T) {
		const mib = 1 << 20
		adminA("quota", "set", "user:alice", "--bytes", "6MiB")
		w, err := os.OpenFile(b.In("alice", "stream"), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		chunk := bytes.Repeat([]byte("w"), mib)
		if _, err := w.Write(chunk); err != nil {
			t.Fatalf("B's writer, first MiB: %v", err)
		}
		src := t.TempDir()
		mustWrite(t, filepath.Join(src, "huge"), bytes.Repeat([]byte("i"), 5*mib+4096), 0o644)
		mustWrite(t, filepath.Join(src, "big"), bytes.Repeat([]byte("i"), 3*mib), 0o644)
		mustWrite(t, filepath.Join(src, "small"), bytes.Repeat([]byte("i"), mib), 0o644)
		// B has written 1 MiB: 5 MiB and a page more do not fit, 3 MiB
		// and then 1 MiB do (B's reservation, 4 MiB, is given back down
		// to what it has written).
		adminFails(t, "over the quota of user alice", append([]string{"import", "--user", "alice", "--admin-socket", sockA}, append(s.args, filepath.Join(src, "huge"))...)...)
		adminA("import", "--user", "alice", filepath.Join(src, "big"))
		adminA("import", "--user", "alice", filepath.Join(src, "small"))
		// The writer on B fills what is left, then goes on until refused.
		var written int64 = mib
		for range 5 {
			n, err := w.Write(chunk)
			written += int64(n)
			if err != nil {
				wantErrno(t, "B's writer past alice's quota", err, unix.EDQUOT)
				break
			}
		}
		w.Close()
		var qs []struct {
			Used struct {
				Bytes int64 `json:"bytes"`
			} `json:"used"`
		}
		out := adminA("quota", "show", "user:alice", "--json")
		if err := json.Unmarshal([]byte(out), &qs); err != nil || len(qs) != 1 {
			t.Fatalf("quota show --json: %v\n%s", err, out)
		}
		t.Logf("B's writer wrote %.2f MiB beside imports of 4 MiB; alice uses %.2f MiB of 6", float64(written)/mib, float64(qs[0].Used.Bytes)/mib)
		if qs[0].Used.Bytes > 6*mib {
			t.Errorf("alice uses %d bytes, past her 6 MiB limit", qs[0].Used.Bytes)
		}
		if written != 2*mib {
			t.Errorf("B's writer wrote %d bytes, want exactly the 2 MiB the imports left", written)
		}
	})
	a.Stop()
	b.Stop()
}

// lockLostAttempt is one round of TestEtcdLockLost on fresh files; false
// when bob could not lock before A had its lease again.
func lockLostAttempt(t *testing.T, s *etcdStore, a, b *serveDaemon, sockA string, cli *clientv3.Client, attempt int) bool {
	name := func(kind string) string { return fmt.Sprintf("lost-%d-%s", attempt, kind) }
	mine := map[string]*os.File{}   // alice's on A, locked
	theirs := map[string]*os.File{} // bob's on B, locked after the revoke
	defer func() {
		for _, f := range mine {
			f.Close()
		}
		for _, f := range theirs {
			f.Close()
		}
	}()
	for _, kind := range lockKinds {
		A := a.In("alice", "groups", "team-alpha", name(kind))
		B := b.In("bob", "groups", "team-alpha", name(kind))
		mustWrite(t, A, []byte("before"), 0o644)
		if _, ok := within(5*time.Second, func() bool { _, err := os.Stat(B); return err == nil }); !ok {
			t.Fatalf("%s from A not seen on B", name(kind))
		}
		f, err := os.OpenFile(A, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		mine[kind] = f
		if err := takeLock(int(f.Fd()), kind, true, false, 0, 0); err != nil {
			t.Fatalf("alice's %s lock on A: %v", kind, err)
		}
		if _, err := f.WriteAt([]byte("locked"), 0); err != nil {
			t.Fatalf("alice's write under her %s lock on A: %v", kind, err)
		}
		if f, err = os.OpenFile(B, os.O_RDWR, 0); err != nil {
			t.Fatal(err)
		}
		theirs[kind] = f
		wantErrno(t, "bob's "+kind+" lock on B while alice holds hers", takeLock(int(f.Fd()), kind, true, false, 0, 0), unix.EAGAIN)
	}

	_, lease, ok := daemonKey(t, cli, s, a.cmd.Process.Pid)
	if !ok {
		t.Fatalf("daemon A (pid %d) not registered", a.cmd.Process.Pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := cli.Revoke(ctx, lease)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range lockKinds {
		if err := takeLock(int(theirs[kind].Fd()), kind, true, false, 0, 0); err != nil {
			if err == unix.EAGAIN {
				return false
			}
			t.Fatalf("bob's %s lock on B after A's lease was revoked: %v", kind, err)
		}
	}
	if _, ok := within(15*time.Second, func() bool {
		time.Sleep(20 * time.Millisecond)
		return strings.Count(a.Stderr(), "lock lost with the lease") >= len(lockKinds)*(attempt+1)
	}); !ok {
		t.Fatalf("A did not log its %d locks lost\nstderr:\n%s", len(lockKinds), a.Stderr())
	}

	// Status on A lists the locks bob holds on B, with B as their
	// holder.
	var st struct {
		Locks []struct {
			User   string `json:"user"`
			Path   string `json:"path"`
			Kind   string `json:"kind"`
			Type   string `json:"type"`
			Daemon string `json:"daemon"`
		} `json:"locks"`
	}
	out := adminOK(t, append([]string{"status", "--json", "--admin-socket", sockA}, s.args...)...)
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	onB := fmt.Sprintf(" pid %d", b.cmd.Process.Pid)
	for _, kind := range lockKinds {
		found := false
		for _, l := range st.Locks {
			found = found || l.User == "bob" && l.Path == "/groups/team-alpha/"+name(kind) &&
				l.Type == "write" && strings.HasSuffix(l.Daemon, onB)
		}
		if !found {
			t.Errorf("status on A does not list bob's %s lock on B (daemon ...%s):\n%s", kind, onB, out)
		}
	}
	if text := adminOK(t, append([]string{"status", "--admin-socket", sockA}, s.args...)...); !strings.Contains(text, "DAEMON") || !strings.Contains(text, onB) {
		t.Errorf("status on A does not name B as the holder of bob's locks:\n%s", text)
	}

	buf := make([]byte, 6)
	for _, kind := range lockKinds {
		f := mine[kind]
		_, err := f.WriteAt([]byte("after!"), 0)
		wantErrno(t, "alice's write on A through the descriptor whose "+kind+" lock was lost", err, unix.EIO)
		_, err = f.ReadAt(buf, 0)
		wantErrno(t, "alice's read on A through the descriptor whose "+kind+" lock was lost", err, unix.EIO)
		wantErrno(t, "alice's "+kind+" lock on A through that descriptor", takeLock(int(f.Fd()), kind, true, false, 0, 0), unix.EIO)
		A := a.In("alice", "groups", "team-alpha", name(kind))
		if got, err := os.ReadFile(A); err != nil || string(got) != "locked" {
			t.Errorf("a fresh open on A of the %s file reads %q, %v; want what alice wrote under her lock", kind, got, err)
		}
		wantErrno(t, "a fresh "+kind+" lock on A while bob holds his", tryLock(t, kind, true, A), unix.EAGAIN)
	}
	// Her unlock and close work; bob lets go, and a fresh lock and write
	// on A work.
	if err := unix.Flock(int(mine["flock"].Fd()), unix.LOCK_UN); err != nil {
		t.Errorf("alice's unlock through the descriptor whose flock was lost: %v", err)
	}
	for _, kind := range lockKinds {
		if err := mine[kind].Close(); err != nil {
			t.Errorf("close of alice's descriptor whose %s lock was lost: %v", kind, err)
		}
		delete(mine, kind)
		theirs[kind].Close()
		delete(theirs, kind)
	}
	for _, kind := range lockKinds {
		A := a.In("alice", "groups", "team-alpha", name(kind))
		if _, ok := within(5*time.Second, func() bool { return tryLock(t, kind, true, A) == nil }); !ok {
			t.Errorf("bob let go: alice's fresh %s lock on A still refused", kind)
		}
		mustWrite(t, A, []byte("fresh"), 0o644)
	}
	if _, ok := within(5*time.Second, func() bool {
		out := adminOK(t, append([]string{"audit", "--json", "--denied"}, s.args...)...)
		return strings.Count(out, `"lock_lost"`) >= len(lockKinds)
	}); !ok {
		t.Error("the lost locks and the refusals are not in the audit trail with reason lock_lost")
	}
	return true
}
