package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runAs runs `sh -c script` as uid:gid with no supplementary groups and
// returns its combined output and error.
func runAs(t testing.TB, uid, gid uint32, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPermissions checks allow_other, default_permissions and --uid/--gid:
// another uid can list a view but not write where mode bits forbid it; in a
// view with a forced owner, that owner's uid can do everything, and the
// files it creates record the caller's real ids.
func TestPermissions(t *testing.T) {
	t.Parallel()
	plain := startView(t, newStore(t), "alice")
	openParents(t, plain.Dir)
	if out, err := runAs(t, 1000, 1000, "ls "+plain.Dir); err != nil {
		t.Errorf("uid 1000 listing a view (allow_other): %v\n%s", err, out)
	}
	for _, dir := range []string{plain.Dir, plain.Path("share")} {
		out, err := runAs(t, 1000, 1000, "touch "+dir+"/x")
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("uid 1000 creating a file in root's 0755 %s (default_permissions): %v %q, want Permission denied", dir, err, out)
		}
	}
	plain.Stop()

	store := newStore(t)
	forced := startView(t, store, "alice", "--uid", "1000", "--gid", "1000")
	openParents(t, forced.Dir)
	mustWrite(t, forced.Path("by-root"), []byte("root"), 0o600)
	script := `set -e
cd "$1"
echo one > f
echo two >> f
mkdir -p d/e
mv f d/e/g
chmod 600 d/e/g
cat d/e/g
echo s > share/s
cat by-root >/dev/null
rm share/s`
	out, err := runAs(t, 1000, 1000, strings.ReplaceAll(script, `"$1"`, forced.Dir))
	if err != nil || out != "one\ntwo\n" {
		t.Errorf("uid 1000 working in a view forced to 1000:1000: %v\n%s", err, out)
	}
	var st unix.Stat_t
	if err := unix.Lstat(forced.Path("d", "e", "g"), &st); err != nil {
		t.Fatal(err)
	} else if st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("forced view shows %d:%d, want 1000:1000", st.Uid, st.Gid)
	}
	forced.Stop()

	again := startView(t, store, "alice")
	for path, want := range map[string][2]uint32{"d/e/g": {1000, 1000}, "by-root": {0, 0}} {
		if err := unix.Lstat(again.Path(path), &st); err != nil {
			t.Errorf("lstat %s: %v", path, err)
		} else if st.Uid != want[0] || st.Gid != want[1] {
			t.Errorf("%s created through a forced view: recorded %d:%d, want the caller's %d:%d", path, st.Uid, st.Gid, want[0], want[1])
		}
	}
	again.Stop()
}

// openParents makes the two temporary directories above a mountpoint
// searchable by everyone (t.TempDir makes them 0700), so that other uids
// reach the view.
func openParents(t testing.TB, mnt string) {
	t.Helper()
	for _, dir := range []string{filepath.Dir(mnt), filepath.Dir(filepath.Dir(mnt))} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// getxattr reads a string xattr, returning "" and the error on failure.
func getxattr(path, name string) (string, error) {
	buf := make([]byte, 256)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// TestShedfsXattrs checks the in-band user.shedfs.* interface: owner, mode
// and zone read back; the owner changes the mode; bad values are EINVAL;
// the zone is read-only; owner_ro blocks writes, owner included.
func TestShedfsXattrs(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	f := v.Path("share", "f")
	mustWrite(t, f, []byte("shared"), 0o644)
	mustWrite(t, v.Path("p"), []byte("private"), 0o644)
	for _, c := range []struct{ path, name, want string }{
		{f, "user.shedfs.owner", "alice"},
		{f, "user.shedfs.mode", "group"},
		{f, "user.shedfs.zone", "share"},
		{v.Path("p"), "user.shedfs.zone", "private"},
		{v.Path("output"), "user.shedfs.zone", "output"},
		{v.Path("uploads"), "user.shedfs.zone", "uploads"},
	} {
		if got, err := getxattr(c.path, c.name); err != nil || got != c.want {
			t.Errorf("getxattr %s %s: %q, %v; want %q", c.path, c.name, got, err, c.want)
		}
	}
	if err := unix.Setxattr(f, "user.shedfs.mode", []byte("bogus"), 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("set user.shedfs.mode=bogus: %v, want EINVAL", err)
	}
	if err := unix.Setxattr(f, "user.shedfs.zone", []byte("private"), 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("set user.shedfs.zone: %v, want EPERM", err)
	}
	if err := unix.Setxattr(f, "user.shedfs.mode", []byte("owner_ro"), 0); err != nil {
		t.Errorf("the owner setting user.shedfs.mode=owner_ro: %v", err)
	} else {
		if got, _ := getxattr(f, "user.shedfs.mode"); got != "owner_ro" {
			t.Errorf("mode after setting owner_ro: %q", got)
		}
		if _, err := os.OpenFile(f, os.O_WRONLY, 0); !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
			t.Errorf("open for writing an owner_ro file as its owner: %v, want EPERM", err)
		}
		if err := os.Remove(f); !errors.Is(err, unix.EPERM) {
			t.Errorf("unlink an owner_ro file as its owner: %v, want EPERM", err)
		}
		if err := unix.Setxattr(f, "user.shedfs.mode", []byte("group"), 0); err != nil {
			t.Errorf("the owner setting the mode back to group: %v", err)
		}
	}
	if got := string(mustRead(t, f)); got != "shared" {
		t.Errorf("content after the mode changes: %q", got)
	}
	if err := os.Remove(f); err != nil {
		t.Errorf("unlink after setting the mode back: %v", err)
	}
	// The same through the attr tools, as an agent would use them.
	if requireTool(t, "getfattr") && requireTool(t, "setfattr") {
		g := v.Path("share", "g")
		mustWrite(t, g, nil, 0o644)
		runTool(t, "", nil, "setfattr", "-n", "user.color", "-v", "blue", g)
		if out := runTool(t, "", nil, "getfattr", "--absolute-names", "--only-values", "-n", "user.color", g); out != "blue" {
			t.Errorf("getfattr user.color: %q", out)
		}
		if out := runTool(t, "", nil, "getfattr", "--absolute-names", "--only-values", "-n", "user.shedfs.owner", g); out != "alice" {
			t.Errorf("getfattr user.shedfs.owner: %q", out)
		}
	}
	v.Stop()
}

// requireTool reports whether the program name is on PATH. When it is not,
// it fails the test under CI=true and otherwise logs that the tool part of
// the test was left out.
func requireTool(t testing.TB, name string) bool {
	t.Helper()
	if _, err := exec.LookPath(name); err == nil {
		return true
	}
	if os.Getenv("CI") == "true" {
		t.Errorf("%s is not installed (CI=true: failing instead of skipping this part)", name)
	} else {
		t.Logf("%s is not installed: that part of the test is left out", name)
	}
	return false
}
