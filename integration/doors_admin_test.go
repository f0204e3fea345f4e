package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/scan/clamdtest"
)

// TestAdminDoorsReachKernels: the admin's changes of the trash, the
// quarantine, groups and users — trash purge, quarantine delete, group
// add-member, remove-member and remove, user set (owner and quota) and
// user remove — are each seen at once by a view whose kernel had looked
// the name up before: they are operations of the core (vfs.Core.Admin),
// which tells every view. Each check is one try, not a poll; the kernel
// caches names and attributes for an hour.
func TestAdminDoorsReachKernels(t *testing.T) {
	t.Parallel()
	cd := theClamd(t)
	store := newStore(t)
	setupTeam(t, store)
	s := startServeWith(t, store, []string{"--clamd", cd.Addr(), "--scan-wait", "3s"}, "alice", "bob", "carol")
	A := func(p ...string) string { return s.In("alice", p...) }
	B := func(p ...string) string { return s.In("bob", p...) }
	C := func(p ...string) string { return s.In("carol", p...) }
	seen := func(t *testing.T, what, p string) {
		t.Helper()
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %s before: %v", what, p, err)
		}
	}
	absent := func(t *testing.T, what, p string) {
		t.Helper()
		if _, err := os.Stat(p); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("%s: %s before: %v, want ENOENT", what, p, err)
		}
	}
	goneNow := func(t *testing.T, what, p string) {
		t.Helper()
		if _, err := os.Stat(p); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("%s: %s at once: %v, want ENOENT", what, p, err)
		}
	}
	thereNow := func(t *testing.T, what, p string) {
		t.Helper()
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %s at once: %v", what, p, err)
		}
	}

	t.Run("trash purge", func(t *testing.T) {
		mustWrite(t, A("p.txt"), []byte("to purge"), 0o644)
		if err := os.Remove(A("p.txt")); err != nil {
			t.Fatal(err)
		}
		names := trashNames(t, A("trash"), "p.txt")
		if len(names) != 1 {
			t.Fatalf("trash/ lists %v for p.txt", names)
		}
		kept := A("trash", names[0])
		seen(t, "trash purge", kept)
		adminOK(t, "trash", "purge", "--holder", "user:alice", "--all", "--store", store)
		goneNow(t, "a trash purge", kept)
	})

	t.Run("quarantine delete", func(t *testing.T) {
		q := A("share", "q.txt")
		mustWrite(t, q, []byte(clamdtest.EICAR), 0o644)
		waitXattr(t, q, "user.shedfs.scan", 10*time.Second, func(v string) bool { return v == "infected:"+clamdtest.EICARSignature })
		seen(t, "quarantine delete", B("share", "q.txt"))
		adminOK(t, "quarantine", "delete", "--store", store, fmt.Sprint(inoOf(t, q)))
		goneNow(t, "a quarantine delete, in bob's view", B("share", "q.txt"))
		goneNow(t, "a quarantine delete, in alice's view", q)
	})

	t.Run("group add-member", func(t *testing.T) {
		mustWrite(t, A("groups", "team-alpha", "g.txt"), []byte("team"), 0o644)
		absent(t, "add-member", C("groups", "team-alpha"))
		adminOK(t, "group", "add-member", "team-alpha", "carol", "--store", store)
		thereNow(t, "a member added", C("groups", "team-alpha", "g.txt"))
	})

	t.Run("group remove-member", func(t *testing.T) {
		seen(t, "remove-member", C("groups", "team-alpha", "g.txt"))
		adminOK(t, "group", "remove-member", "team-alpha", "carol", "--store", store)
		goneNow(t, "a member removed", C("groups", "team-alpha"))
	})

	t.Run("group remove", func(t *testing.T) {
		adminOK(t, "group", "add", "team-beta", "--store", store)
		adminOK(t, "group", "add-member", "team-beta", "alice", "--store", store)
		mustWrite(t, A("groups", "team-beta", "b.txt"), []byte("beta"), 0o644)
		seen(t, "group remove", A("groups", "team-beta", "b.txt"))
		adminOK(t, "group", "remove", "team-beta", "--force", "--store", store)
		goneNow(t, "a group removed", A("groups", "team-beta"))
	})

	t.Run("user set owner", func(t *testing.T) {
		mustWrite(t, B("o.txt"), []byte("own"), 0o644)
		var st unix.Stat_t
		if err := unix.Stat(B("o.txt"), &st); err != nil || st.Uid == 4321 {
			t.Fatalf("o.txt before: %v uid %d", err, st.Uid)
		}
		adminOK(t, "user", "set", "bob", "--uid", "4321", "--gid", "4322", "--store", store)
		if err := unix.Stat(B("o.txt"), &st); err != nil || st.Uid != 4321 || st.Gid != 4322 {
			t.Errorf("o.txt at once after user set: %v %d:%d, want 4321:4322", err, st.Uid, st.Gid)
		}
	})

	t.Run("user set quota", func(t *testing.T) {
		var st unix.Statfs_t
		if err := unix.Statfs(B(), &st); err != nil {
			t.Fatal(err)
		}
		adminOK(t, "user", "set", "bob", "--quota", "8M", "--store", store)
		if err := unix.Statfs(B(), &st); err != nil || uint64(st.Blocks)*uint64(st.Bsize) != 8<<20 {
			t.Errorf("df of bob's view at once after user set --quota 8M: %v, %d blocks of %d", err, st.Blocks, st.Bsize)
		}
	})

	t.Run("user remove", func(t *testing.T) {
		adminOK(t, "user", "add", "dave", "--store", store)
		s.waitView("dave")
		mustWrite(t, s.In("dave", "d.txt"), []byte("dave"), 0o644)
		seen(t, "user remove", s.In("dave", "d.txt"))
		adminOK(t, "user", "remove", "dave", "--force", "--store", store)
		if _, ok := findMount(filepath.Join(s.Root, "dave")); ok {
			t.Errorf("dave's view still mounted right after user remove")
		}
	})
	fsckOnline(t, s)
}
