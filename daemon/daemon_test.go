package daemon

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/vfs"
)

// fakeView stands in for a FUSE view in the view manager's tests.
type fakeView struct {
	once sync.Once
	done chan struct{}
	busy bool
	// mu is the fakeMounts' lock, which guards the events every view
	// appends to (a stop unmounts views concurrently).
	mu     *sync.Mutex
	events *[]string
	user   string
}

func (v *fakeView) Unmount() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.busy {
		return errors.New("device or resource busy")
	}
	*v.events = append(*v.events, "unmount "+v.user)
	v.once.Do(func() { close(v.done) })
	return nil
}

func (v *fakeView) Wait() { <-v.done }

// fakeMounts makes d mount fake views and records what happens.
type fakeMounts struct {
	mu     sync.Mutex
	events []string
	views  map[string]*fakeView
	opts   map[string]vfs.ViewOptions
}

func useFakeMounts(d *Daemon) *fakeMounts {
	fm := &fakeMounts{views: map[string]*fakeView{}, opts: map[string]vfs.ViewOptions{}}
	d.mount = func(user, mnt string, opts vfs.ViewOptions) (mountedView, error) {
		fm.mu.Lock()
		defer fm.mu.Unlock()
		if fi, err := os.Stat(mnt); err != nil || !fi.IsDir() {
			return nil, errors.New("no mountpoint directory")
		}
		fm.events = append(fm.events, "mount "+user+" "+mnt)
		v := &fakeView{done: make(chan struct{}), mu: &fm.mu, events: &fm.events, user: user}
		fm.views[user] = v
		fm.opts[user] = opts
		return v, nil
	}
	return fm
}

func (fm *fakeMounts) log() []string {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return append([]string(nil), fm.events...)
}

func TestDaemonFollowsUsers(t *testing.T) {
	st := openTestStore(t)
	if _, err := st.Meta.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Meta.UpdateUser("alice", func(u *shedfs.User) error { u.Uid, u.Gid = 7, 8; return nil }); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "run", "shedfs")
	d, err := New(Config{Store: st, MountRoot: root, DefaultView: vfs.ViewOptions{ForceOwner: true, Uid: 1, Gid: 2}})
	if err != nil {
		t.Fatal(err)
	}
	fm := useFakeMounts(d)
	ctx := context.Background()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			d.Stop(ctx)
		}
	}()
	if fi, err := os.Stat(root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mount root: %v %v, want mode 0700", err, fi.Mode())
	}
	if got := fm.opts["alice"]; got != (vfs.ViewOptions{ForceOwner: true, Uid: 7, Gid: 8}) {
		t.Errorf("alice's presentation: %+v, want her own uid/gid", got)
	}

	// Through the admin socket, as the CLI would.
	c := dialTest(t, st)
	u, err := c.AddUser(ctx, UserAddRequest{Name: "bob"})
	if err != nil {
		t.Fatalf("add bob: %v", err)
	}
	if want := filepath.Join(root, "bob"); u.View != want {
		t.Errorf("bob's view %q, want %q", u.View, want)
	}
	if fi, err := os.Stat(filepath.Join(root, "bob")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bob's mountpoint: %v %v, want mode 0755", err, fi.Mode())
	}
	if got := fm.opts["bob"]; got != (vfs.ViewOptions{ForceOwner: true, Uid: 1, Gid: 2}) {
		t.Errorf("bob's presentation: %+v, want the daemon default", got)
	}
	s, err := c.Status(ctx)
	want := []ViewInfo{{"alice", filepath.Join(root, "alice")}, {"bob", filepath.Join(root, "bob")}}
	if err != nil || !s.Daemon || s.PID != os.Getpid() || s.MountRoot != root || !reflect.DeepEqual(s.Views, want) {
		t.Errorf("status: %+v, %v; want views %v", s, err, want)
	}

	// A busy view stops the removal, and the user stays.
	fm.views["bob"].busy = true
	if _, err := c.RemoveUser(ctx, "bob", true); codeOf(t, err) != CodeBusy {
		t.Errorf("remove bob while busy: %v, want busy", err)
	}
	if _, err := c.ShowUser(ctx, "bob"); err != nil {
		t.Errorf("bob after a refused removal: %v", err)
	}
	fm.views["bob"].busy = false
	if _, err := c.RemoveUser(ctx, "bob", true); err != nil {
		t.Fatalf("remove bob: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "bob")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bob's mountpoint after removal: %v", err)
	}
	if views := d.Views(); len(views) != 1 || views[0].User != "alice" {
		t.Errorf("views after removing bob: %v", views)
	}
	// Added again at once: mounted again.
	if _, err := c.AddUser(ctx, UserAddRequest{Name: "bob"}); err != nil {
		t.Fatalf("add bob again: %v", err)
	}
	// A view unmounted from outside leaves the set.
	fm.views["alice"].Unmount()
	deadline := time.Now().Add(5 * time.Second)
	for d.viewOf("alice") != "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if d.viewOf("alice") != "" {
		t.Errorf("alice's view still listed after an outside unmount")
	}

	if err := d.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	if _, err := os.Stat(SocketPath(st.Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("admin socket after stop: %v", err)
	}
	got := strings.Join(fm.log(), "\n")
	wantLog := strings.Join([]string{
		"mount alice " + filepath.Join(root, "alice"),
		"mount bob " + filepath.Join(root, "bob"),
		"unmount bob",
		"mount bob " + filepath.Join(root, "bob"),
		"unmount alice",
		"unmount bob",
	}, "\n")
	if got != wantLog {
		t.Errorf("mount events:\n%s\nwant:\n%s", got, wantLog)
	}
	if len(d.Views()) != 0 {
		t.Errorf("views after stop: %v", d.Views())
	}
}

func TestDaemonExplicitMountIsPinned(t *testing.T) {
	st := openTestStore(t)
	if _, err := st.Meta.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	fm := useFakeMounts(d)
	mnt := t.TempDir()
	done, err := d.Mount("alice", mnt, vfs.ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.StartAdmin(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := dialTest(t, st)
	// Adding a user mounts nothing without a mount root.
	if u, err := c.AddUser(ctx, UserAddRequest{Name: "bob"}); err != nil || u.View != "" {
		t.Errorf("add bob: %+v, %v", u, err)
	}
	if _, err := c.RemoveUser(ctx, "alice", true); codeOf(t, err) != CodeBusy {
		t.Errorf("remove the mounted user: %v, want busy", err)
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Errorf("view not done after stop")
	}
	if got := fm.log(); len(got) != 2 || got[1] != "unmount alice" {
		t.Errorf("events %v", got)
	}
}

func TestParseMountinfo(t *testing.T) {
	const table = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:40 / /run/shedfs/alice rw,nosuid,nodev,relatime shared:20 - fuse.shedfs shedfs:alice rw,user_id=0,group_id=0
41 22 0:41 / /run/shedfs/bob\040smith rw,nosuid - fuse shedfs:bob rw
42 22 0:42 / /run/shedfs rw - tmpfs tmpfs rw
43 22 0:43 / /run/shedfs-other/carol rw - fuse.shedfs shedfs:carol rw
44 22 0:44 / /run/shedfs/dave/inner rw - fuse.sshfs x rw
45 22 0:45 / /run/shedfs/erin rw - ext4 /dev/sdb rw
garbage line
`
	got, err := parseMountinfo(bufio.NewScanner(strings.NewReader(table)), "/run/shedfs/")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/run/shedfs/alice", "/run/shedfs/bob smith", "/run/shedfs/dave/inner"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fuse mounts under /run/shedfs: %q, want %q", got, want)
	}
}

// TestParseConnection: the connection a forced session close aborts is
// the minor of the last FUSE mount at the view's mountpoint.
func TestParseConnection(t *testing.T) {
	const table = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:40 / /run/shedfs/alice@s1 rw,nosuid shared:20 - fuse.shedfs shedfs:alice@s1 rw
41 22 0:41 / /run/shedfs/bob\040smith@s2 rw,nosuid - fuse shedfs:bob rw
46 40 0:46 / /run/shedfs/alice@s1 rw - fuse.shedfs shedfs:alice@s1 rw
45 22 0:45 / /run/shedfs/erin@s3 rw - ext4 /dev/sdb rw
`
	for mnt, want := range map[string]int{
		"/run/shedfs/alice@s1":     46,
		"/run/shedfs/bob smith@s2": 41,
		"/run/shedfs/erin@s3":      -1,
		"/run/shedfs/nobody":       -1,
	} {
		conn, ok := parseConnection(bufio.NewScanner(strings.NewReader(table)), mnt)
		if !ok {
			conn = -1
		}
		if conn != want {
			t.Errorf("connection of %s: %d, want %d", mnt, conn, want)
		}
	}
}

func TestClearStaleMountsLeavesPlainDirs(t *testing.T) {
	st := openTestStore(t)
	root := t.TempDir()
	for _, n := range []string{"alice", "bob"} {
		if err := os.Mkdir(filepath.Join(root, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d, err := New(Config{Store: st, MountRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.clearStaleMounts(root); err != nil {
		t.Fatalf("clear stale mounts: %v", err)
	}
	for _, n := range []string{"alice", "bob"} {
		if _, err := os.Stat(filepath.Join(root, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if err := d.clearStaleMounts(filepath.Join(root, "missing")); err != nil {
		t.Errorf("missing mount root: %v", err)
	}
}
