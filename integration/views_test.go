package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// reservedNames are the entries every view root shows.
var reservedNames = []string{"groups", "output", "share", "snapshots", "trash", "uploads"}

// TestSeveralViews runs three views (three stores, three daemons) at once,
// one of them presenting every entry as owned by --uid/--gid, and checks
// that each shows its own files and the reserved folders.
func TestSeveralViews(t *testing.T) {
	t.Parallel()
	users := []string{"alice", "bob", "carol"}
	views := make([]*View, len(users))
	var wg sync.WaitGroup
	// Start all three daemons before waiting for any mount.
	for i, u := range users {
		args := []string{"mount", "--store", newStore(t), "--user", u}
		if u == "bob" {
			args = append(args, "--uid", "1000", "--gid", "1001")
		}
		views[i] = launchView(t, newMountpoint(t), nil, args)
		views[i].Store, views[i].User = args[2], u
	}
	for _, v := range views {
		v.waitMounted()
	}
	for i, v := range views {
		wg.Add(1)
		go func(i int, v *View) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				name := v.Path(fmt.Sprintf("%s-%d", v.User, j))
				if err := os.WriteFile(name, []byte(v.User), 0o640); err != nil {
					t.Errorf("%s: %v", v.User, err)
					return
				}
			}
		}(i, v)
	}
	wg.Wait()
	for _, v := range views {
		entries, err := os.ReadDir(v.Dir)
		if err != nil {
			t.Fatalf("readdir %s: %v", v.Dir, err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		var want []string
		want = append(want, reservedNames...)
		for j := 0; j < 50; j++ {
			want = append(want, fmt.Sprintf("%s-%d", v.User, j))
		}
		sort.Strings(want)
		if strings.Join(names, " ") != strings.Join(want, " ") {
			t.Errorf("view of %s lists %v, want %v", v.User, names, want)
		}
		if got := string(mustRead(t, v.Path(v.User+"-7"))); got != v.User {
			t.Errorf("view of %s: file content %q", v.User, got)
		}
	}
	// bob's view presents every entry as 1000:1001.
	bob := views[1]
	for _, p := range []string{bob.Dir, bob.Path("bob-3"), bob.Path("share"), bob.Path("output")} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Errorf("lstat %s: %v", p, err)
		} else if st.Uid != 1000 || st.Gid != 1001 {
			t.Errorf("%s in a view mounted with --uid 1000 --gid 1001: owner %d:%d", p, st.Uid, st.Gid)
		}
	}
	// alice's view shows the ids that created the files: root here.
	var st unix.Stat_t
	if err := unix.Lstat(views[0].Path("alice-3"), &st); err != nil {
		t.Errorf("lstat: %v", err)
	} else if st.Uid != 0 || st.Gid != 0 {
		t.Errorf("file created by root in alice's view shows owner %d:%d, want 0:0", st.Uid, st.Gid)
	}
	for _, v := range views {
		v.Stop()
	}
	for _, v := range views {
		fsckClean(t, v.Store)
	}
}

// TestViewLayout checks the reserved folders of a view root: they exist,
// cannot be removed or renamed (EPERM), creating one gives EEXIST, and the
// root lists nothing else when fresh.
func TestViewLayout(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	entries, err := os.ReadDir(v.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if !e.IsDir() {
			t.Errorf("%s in a fresh view root is not a directory", e.Name())
		}
	}
	if strings.Join(names, " ") != strings.Join(reservedNames, " ") {
		t.Errorf("fresh view root lists %v, want %v", names, reservedNames)
	}
	for _, name := range reservedNames {
		p := v.Path(name)
		if err := os.Remove(p); !isErrno(err, unix.EPERM) {
			t.Errorf("rmdir %s: %v, want EPERM", name, err)
		}
		if err := os.Rename(p, v.Path(name+"-moved")); !isErrno(err, unix.EPERM) {
			t.Errorf("rename %s: %v, want EPERM", name, err)
		}
		if err := os.Mkdir(p, 0o755); !isErrno(err, unix.EEXIST) {
			t.Errorf("mkdir %s: %v, want EEXIST", name, err)
		}
	}
	v.Stop()
}

// TestStoreEnv mounts with the store given by SHEDFS_STORE instead of
// --store.
func TestStoreEnv(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := launchView(t, newMountpoint(t), []string{"SHEDFS_STORE=" + store}, []string{"mount", "--user", "alice"})
	v.Store, v.User = store, "alice"
	v.waitMounted()
	mustWrite(t, v.Path("f"), []byte("via env"), 0o644)
	v.Stop()
	if _, err := os.Stat(filepath.Join(store, "meta")); err != nil {
		t.Errorf("SHEDFS_STORE=%s: no meta/ in it after a mount: %v", store, err)
	}
	out, errOut, code := runCLIEnv(t, []string{"SHEDFS_STORE=" + store}, "fsck", "--dry-run")
	if code != 0 || !hasCleanLine(out+errOut) {
		t.Errorf("SHEDFS_STORE=%s shedfs fsck --dry-run: exit %d\nstdout:\n%s\nstderr:\n%s", store, code, out, errOut)
	}
}

// isErrno reports whether err wraps errno.
func isErrno(err error, errno unix.Errno) bool {
	return errors.Is(err, errno)
}

// TestQuickStop stops views right after they mount, several times over the
// same store: SIGTERM as soon as the mount shows up must still unmount
// cleanly and exit 0, and the store must be free for the next mount.
func TestQuickStop(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	for i := 0; i < 5; i++ {
		v := startView(t, store, "alice")
		if i > 0 {
			if got := string(mustRead(t, v.Path(fmt.Sprintf("f%d", i-1)))); got != "x" {
				t.Errorf("round %d: file of the previous round: %q", i, got)
			}
		}
		mustWrite(t, v.Path(fmt.Sprintf("f%d", i)), []byte("x"), 0o644)
		v.Stop()
		v = startView(t, store, "alice")
		v.Stop() // with no request served at all
	}
	fsckClean(t, store)
}

// TestHungDaemon stops the daemon (SIGSTOP) while a caller waits on it:
// Kill must free the caller with an error instead of leaving it stuck.
func TestHungDaemon(t *testing.T) {
	t.Parallel()
	v := startView(t, newStore(t), "alice")
	freeze(t, v)
	done := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(v.Path("never-looked-up"))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a lookup returned (%v) while the daemon was stopped", err)
	case <-time.After(300 * time.Millisecond):
	}
	v.Kill()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("the stuck read succeeded after the daemon was killed")
		}
		t.Logf("the stuck caller got: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the caller is still stuck 10s after Kill")
	}
	if _, ok := findMount(v.Dir); ok {
		t.Errorf("%s still mounted after Kill", v.Dir)
	}
}

// TestAbortConnection exercises the harness's last resort: aborting the
// FUSE connection of a stopped daemon through fusectl frees a waiting
// caller, and fusectl is left mounted only if it was mounted before.
func TestAbortConnection(t *testing.T) {
	t.Parallel()
	fusectlBefore := false
	for _, m := range mounts() {
		if m.fstype == "fusectl" {
			fusectlBefore = true
		}
	}
	v := startView(t, newStore(t), "alice")
	freeze(t, v)
	defer v.Kill()
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(v.Path("never-looked-up"))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the caller block
	v.mu.Lock()
	minor := v.devMin
	v.mu.Unlock()
	abortConnection(minor)
	select {
	case err := <-done:
		if !errors.Is(err, unix.ECONNABORTED) && !errors.Is(err, unix.ENOTCONN) {
			t.Errorf("caller after the abort: %v, want ECONNABORTED or ENOTCONN", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the caller is still stuck 10s after aborting the connection")
	}
	if !fusectlBefore {
		for _, m := range mounts() {
			if m.fstype == "fusectl" {
				t.Errorf("fusectl left mounted at %s", m.point)
			}
		}
	}
}

// freeze stops the daemon with SIGSTOP and waits until it is stopped, so
// that no request is answered afterwards.
func freeze(t testing.TB, v *View) {
	t.Helper()
	if err := v.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Every thread must have stopped, or be in uninterruptible sleep (disk
	// I/O: the store's reserve is allocated right after start, and on a
	// busy disk that can take long): such a thread stops on its way back
	// to user space, before it could answer a request. A thread still
	// running or sleeping in a read of the FUSE device could answer.
	tasks := fmt.Sprintf("/proc/%d/task", v.cmd.Process.Pid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		states, err := threadStates(tasks)
		if err != nil {
			t.Fatalf("daemon state: %v", err)
		}
		frozen := strings.Trim(states, "TtD") == "" && strings.ContainsAny(states, "Tt")
		if frozen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon threads not stopped 30 s after SIGSTOP: states %q", states)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// threadStates returns the state letter of each thread under dir
// (/proc/PID/task).
func threadStates(dir string) (string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, de := range des {
		data, err := os.ReadFile(filepath.Join(dir, de.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(data), ')'); i > 0 && i+2 < len(data) {
			b.WriteByte(data[i+2])
		}
	}
	return b.String(), nil
}
