package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/daemon"
)

// putBlob is putData with the blob the size promises.
func putBlob(t *testing.T, store, user string, size uint64) {
	t.Helper()
	st, err := daemon.OpenStore(store, daemon.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u, err := st.Meta.GetUser(user)
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.Meta.Create(u.Roots.Private, "blob", &shedfs.Inode{Mode: syscall.S_IFREG | 0o644}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Blobs.Truncate(n.Ino, int64(size)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Meta.Update(n.Ino, func(n *shedfs.Inode) error { n.Size = size; return nil }, nil); err != nil {
		t.Fatal(err)
	}
}

// TestFsckOverQuota: a holder above its limit (here a limit lowered below
// the usage) is reported by fsck and by fsck --dry-run as over-quota and
// not repaired, with exit status 1 like every unrepaired problem; nothing
// is deleted, and within the limit again fsck is clean.
func TestFsckOverQuota(t *testing.T) {
	store := newStoreDir(t)
	ok(t, "user", "add", "alice", "--store", store)
	putBlob(t, store, "alice", 2<<20)
	if _, errOut, code := runCLI(t, "quota", "set", "user:alice", "--bytes", "1MiB", "--store", store); code != 0 || !strings.Contains(errOut, "warning: user:alice is over its new limit by 1 MiB") {
		t.Errorf("quota set below the usage: exit %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{{"fsck", "--dry-run"}, {"fsck"}} {
		out, errOut, code := runCLI(t, append(args, "--store", store)...)
		if code != 1 {
			t.Errorf("shedfs %s: exit %d, want 1\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		if !strings.Contains(out, "over-quota") || !strings.Contains(out, "user:alice: 2097152 bytes used, limit 1048576 (1048576 over)") ||
			!strings.Contains(out, "NOT repaired: raise the limit or delete data") {
			t.Errorf("shedfs %s says:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(errOut, "1 of 1 problems not repaired") {
			t.Errorf("shedfs %s: stderr %q", strings.Join(args, " "), errOut)
		}
	}
	if out := ok(t, "quota", "show", "user:alice", "--json", "--store", store); !strings.Contains(out, `"bytes": 2097152`) {
		t.Errorf("fsck changed the usage of an over-quota holder:\n%s", out)
	}
	ok(t, "quota", "set", "user:alice", "--bytes", "2MiB", "--store", store)
	if out := ok(t, "fsck", "--store", store); !strings.Contains(out, "fsck: clean") {
		t.Errorf("fsck within the limit: %s", out)
	}
}

// TestFsckWhileServed: fsck of an embedded store a daemon serves, --dry-run
// included, fails with one line that names the daemon (its pid, from the
// admin socket) and says what to do, not just "store is locked by another
// process" (issue 27).
func TestFsckWhileServed(t *testing.T) {
	store := newStoreDir(t)
	st, err := daemon.OpenStore(store, daemon.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := daemon.Listen(daemon.SocketPath(store), daemon.NewLocal(st, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	want := fmt.Sprintf("served by the shedfs daemon with pid %d (admin socket %s): stop it (kill -TERM %d), then run shedfs fsck", os.Getpid(), daemon.SocketPath(store), os.Getpid())
	for _, args := range [][]string{{"fsck", "--dry-run"}, {"fsck"}} {
		fails(t, want, append(args, "--store", store)...)
	}
}
