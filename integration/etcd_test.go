package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// etcdStore is a store whose metadata is on a real etcd cluster: the
// flags every command takes to reach it.
type etcdStore struct {
	cluster *etcdtest.Cluster
	args    []string // --meta URL --blobs DIR
	socket  string
}

func newEtcdStore(t *testing.T, c *etcdtest.Cluster) *etcdStore {
	t.Helper()
	dir := t.TempDir()
	meta := "etcd://" + strings.Join(c.Endpoints(), ",") + "/" + strings.ReplaceAll(t.Name(), "/", "_")
	s := &etcdStore{
		cluster: c,
		args:    []string{"--meta", meta, "--blobs", filepath.Join(dir, "blobs")},
		socket:  filepath.Join(dir, "admin.sock"),
	}
	s.cli(t, "init")
	return s
}

// newEtcdTeam is newEtcdStore with users alice and bob, both in group
// team-alpha: the cast of the multi-host tests.
func newEtcdTeam(t *testing.T, c *etcdtest.Cluster) *etcdStore {
	t.Helper()
	s := newEtcdStore(t, c)
	s.cli(t, "user", "add", "alice")
	s.cli(t, "user", "add", "bob")
	s.cli(t, "group", "add", "team-alpha")
	s.cli(t, "group", "add-member", "team-alpha", "alice", "bob")
	return s
}

func (s *etcdStore) cli(t *testing.T, args ...string) string {
	t.Helper()
	return adminOK(t, append(args, s.args...)...)
}

// mount mounts user's view of the store with its own admin socket.
func (s *etcdStore) mount(t *testing.T, user string, extra ...string) *View {
	t.Helper()
	args := append([]string{"mount", "--user", user, "--admin-socket", s.socket}, s.args...)
	v := launchView(t, newMountpoint(t), nil, append(args, extra...))
	v.User = user
	v.waitMounted()
	return v
}

// TestEtcdStore runs a view on a store whose metadata is on a 3-member
// etcd cluster: files, directories, renames and the quota work as on the
// embedded store; what was written is there after a remount; fsck finds
// it clean; one member down changes nothing; with every member down a
// callback fails with EIO within --meta-timeout, and the view recovers
// by itself when the members return.
func TestEtcdStore(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdTeam(t, c)
	s.cli(t, "quota", "set", "user:alice", "--bytes", "1MiB")

	v := s.mount(t, "alice", "--meta-timeout", "2s")
	data := bytes.Repeat([]byte("etcd"), 5000)
	mustMkdir(t, v.Path("dir"), 0o755)
	mustWrite(t, v.Path("dir", "a"), data, 0o644)
	wantOK(t, "rename", os.Rename(v.Path("dir", "a"), v.Path("dir", "b")))
	mustWrite(t, v.Path("share", "note"), []byte("shared"), 0o644)
	mustWrite(t, v.Path("groups", "team-alpha", "plan"), []byte("plan"), 0o644)
	if got := mustRead(t, v.Path("dir", "b")); !bytes.Equal(got, data) {
		t.Fatal("dir/b: contents differ")
	}
	out, err := runToolErr("dd", "if=/dev/zero", "of="+v.Path("big"), "bs=64k", "count=64")
	wantSaid(t, "dd 4 MiB past a 1 MiB quota", out, exitCode(err), "Disk quota exceeded")
	wantOK(t, "rm big", os.Remove(v.Path("big")))

	// The admin socket of the daemon answers; the status names the store.
	if st := adminOK(t, "status", "--admin-socket", s.socket, "--meta", s.args[1], "--blobs", s.args[3]); !strings.Contains(st, "etcd://") {
		t.Errorf("status does not name the etcd store:\n%s", st)
	}

	// A second process opens the store beside the daemon (many daemons
	// serve one store on etcd); commands also reach the daemon through
	// its admin socket.
	s.cli(t, "user", "add", "carol")
	adminOK(t, append([]string{"user", "add", "dave", "--admin-socket", s.socket}, s.args...)...)

	// One member down: nothing changes for the view.
	c.Kill(c.Members[0])
	mustWrite(t, v.Path("dir", "one-down"), []byte("x"), 0o644)
	if err := c.Restart(c.Members[0]); err != nil {
		t.Fatal(err)
	}

	// Every member down: a callback that needs the metadata fails with
	// EIO after the timeout instead of hanging.
	for _, m := range c.Members {
		c.Kill(m)
	}
	start := time.Now()
	err = os.WriteFile(v.Path("dir", "no-quorum"), []byte("x"), 0o644)
	took := time.Since(start)
	wantErrno(t, "create with no etcd member up", err, unix.EIO)
	if took > 15*time.Second {
		t.Errorf("create with no etcd member up took %v, want about --meta-timeout (2s)", took)
	}
	t.Logf("create with no etcd member up failed after %v", took)
	if err := c.RestartAll(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err = os.WriteFile(v.Path("dir", "back"), []byte("back"), 0o644)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantOK(t, "create after the members returned", err)

	// Remount: everything is still there.
	v.Stop()
	v = s.mount(t, "alice")
	for p, want := range map[string]string{
		"dir/b": string(data), "share/note": "shared", "groups/team-alpha/plan": "plan", "dir/one-down": "x", "dir/back": "back",
	} {
		if got := mustRead(t, v.Path(strings.Split(p, "/")...)); string(got) != want {
			t.Errorf("%s after remount: %q", p, truncate(got, 20))
		}
	}
	if _, err := os.Lstat(v.Path("dir", "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir/a after the rename and a remount: %v", err)
	}
	v.Stop()
	out2, errOut, code := runCLI(t, append([]string{"fsck", "--dry-run"}, s.args...)...)
	if code != 0 || !hasCleanLine(out2+errOut) {
		t.Errorf("fsck --dry-run on etcd: exit %d\n%s%s", code, out2, errOut)
	}
}

// TestEtcdFlags: the metadata flags refuse what names no store or two,
// with one line and a non-zero exit.
func TestEtcdFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"user", "list", "--meta", "etcd://127.0.0.1:1/x"}, "--meta needs --blobs"},
		{[]string{"user", "list", "--meta", "etcd://127.0.0.1:1", "--blobs", "/tmp/x"}, "needs a key prefix"},
		{[]string{"user", "list", "--meta", "http://127.0.0.1:1/x", "--blobs", "/tmp/x"}, "only etcd:// is known"},
		{[]string{"user", "list", "--meta", "etcd://127.0.0.1:1/x", "--blobs", "/tmp/x", "--store", "/tmp/y"}, "not both"},
	} {
		out, errOut, code := runCLI(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("shedfs %s: exit %d, want a line with %q\n%s%s", strings.Join(tc.args, " "), code, tc.want, out, errOut)
		}
		checkOneLine(t, fmt.Sprint(tc.args), errOut)
	}
}

// TestMigrateToEtcd moves a store that views have written to etcd with
// `shedfs migrate`: a view of the etcd store reads the same files, with
// the same owners and modes, and fsck finds it clean.
func TestMigrateToEtcd(t *testing.T) {
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	adminOK(t, "user", "add", "bob", "--store", store)
	v := startView(t, store, "alice")
	mustMkdir(t, v.Path("src"), 0o755)
	data := bytes.Repeat([]byte("migrate"), 3000)
	mustWrite(t, v.Path("src", "a"), data, 0o600)
	mustWrite(t, v.Path("share", "s"), []byte("shared"), 0o644)
	if err := unix.Setxattr(v.Path("share", "s"), "user.shedfs.mode", []byte("owner_ro"), 0); err != nil {
		t.Fatal(err)
	}
	v.Stop()

	c := etcdtest.Start(t, 3)
	meta := "etcd://" + strings.Join(c.Endpoints(), ",") + "/migrated"
	out := adminOK(t, "migrate", "--from", store, "--to", meta)
	if !strings.Contains(out, "migrated") {
		t.Errorf("migrate said:\n%s", out)
	}
	adminFails(t, "not empty", "migrate", "--from", store, "--to", meta)

	blobs := filepath.Join(store, "blobs")
	e := &etcdStore{cluster: c, args: []string{"--meta", meta, "--blobs", blobs}, socket: filepath.Join(t.TempDir(), "admin.sock")}
	w := e.mount(t, "alice")
	if got := mustRead(t, w.Path("src", "a")); !bytes.Equal(got, data) {
		t.Error("src/a differs after the migration")
	}
	if got, err := getxattr(w.Path("share", "s"), "user.shedfs.mode"); err != nil || got != "owner_ro" {
		t.Errorf("mode of share/s after the migration: %q %v", got, err)
	}
	fi, err := os.Stat(w.Path("src", "a"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("src/a after the migration: %v %v", fi, err)
	}
	mustWrite(t, w.Path("src", "new"), []byte("on etcd"), 0o644)
	w.Stop()
	out2, errOut, code := runCLI(t, append([]string{"fsck", "--dry-run"}, e.args...)...)
	if code != 0 || !hasCleanLine(out2+errOut) {
		t.Errorf("fsck --dry-run after the migration: exit %d\n%s%s", code, out2, errOut)
	}
}

// TestEtcdLeaderKill: kill -9 of the etcd leader while four writers
// create, write and fsync files through a view loses nothing that was
// acknowledged; the election is a pause, not an error.
func TestEtcdLeaderKill(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdStore(t, c)
	s.cli(t, "user", "add", "alice")
	v := s.mount(t, "alice")
	mustMkdir(t, v.Path("w"), 0o755)

	type acked struct{ name, data string }
	var mu sync.Mutex
	var done []acked
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%04d", w, i)
				data := strings.Repeat(name, 100)
				err := writeSync(v.Path("w", name), []byte(data))
				mu.Lock()
				if err != nil {
					failures = append(failures, fmt.Sprintf("%s: %v", name, err))
				} else {
					done = append(done, acked{name, data})
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	leader := c.Leader()
	if leader == nil {
		close(stop)
		wg.Wait()
		t.Fatal("no member says it leads")
	}
	mu.Lock()
	before := len(done)
	mu.Unlock()
	c.Kill(leader)
	killed := time.Now()
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d files acknowledged before the leader %s was killed, %d in the 2 s after; failures: %d",
		before, leader.Name, len(done)-before, len(failures))
	for _, f := range failures {
		t.Errorf("write while the leader changed: %s", f)
	}
	if len(done) == before {
		t.Errorf("no write completed in the %v after the leader was killed", time.Since(killed).Round(time.Millisecond))
	}
	if err := c.RestartAll(); err != nil {
		t.Fatal(err)
	}
	v.Stop()
	v = s.mount(t, "alice")
	for _, a := range done {
		got, err := os.ReadFile(v.Path("w", a.name))
		if err != nil || string(got) != a.data {
			t.Errorf("acknowledged %s: %v, %d bytes", a.name, err, len(got))
		}
	}
}

// TestEtcdLeaderKillFollower: a daemon told of one member, a follower,
// goes on writing soon after the leader is killed (twice: the leader,
// then another), where it used to wait 6-7 s for the commit the dead
// leader took with it; it learns the other members at start, too.
func TestEtcdLeaderKillFollower(t *testing.T) {
	c := etcdtest.Start(t, 3)
	leader := c.Leader()
	if leader == nil {
		t.Fatal("no member says it leads")
	}
	var follower *etcdtest.Member
	for _, m := range c.Members {
		if m != leader {
			follower = m
			break
		}
	}
	dir := t.TempDir()
	s := &etcdStore{cluster: c, socket: filepath.Join(dir, "admin.sock"), args: []string{
		"--meta", "etcd://" + strings.TrimPrefix(follower.ClientURL, "http://") + "/" + t.Name(),
		"--blobs", filepath.Join(dir, "blobs")}}
	s.cli(t, "init")
	s.cli(t, "user", "add", "alice")
	v := s.mount(t, "alice")
	mustMkdir(t, v.Path("w"), 0o755)
	for round, done := 0, 0; round < 6 && done < 2; round++ {
		leader := c.Leader()
		if leader == nil || leader == follower {
			// The daemon's member leads: kill it, so that the
			// next election makes another one leader.
			if leader != nil {
				c.Kill(leader)
				if err := c.RestartAll(); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		done++
		var mu sync.Mutex
		var worst time.Duration
		var failures []string
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					err := writeSync(v.Path("w", fmt.Sprintf("r%d-w%d-%04d", round, w, i)), []byte("x"))
					mu.Lock()
					worst = max(worst, time.Since(start))
					if err != nil {
						failures = append(failures, err.Error())
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(500 * time.Millisecond)
		c.Kill(leader)
		time.Sleep(8 * time.Second)
		close(stop)
		wg.Wait()
		t.Logf("round %d: leader %s killed, the daemon on follower %s only: longest create+write+fsync %v",
			round, leader.Name, follower.Name, worst.Round(time.Millisecond))
		for _, f := range failures {
			t.Errorf("round %d: %s", round, f)
		}
		if worst > 4*time.Second {
			t.Errorf("round %d: a write paused %v across the leader's death: more than an election", round, worst.Round(time.Millisecond))
		}
		if err := c.RestartAll(); err != nil {
			t.Fatal(err)
		}
	}
	v.Stop()
}

// writeSync creates path with data and fsyncs it: what an acknowledged
// write means.
func writeSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
