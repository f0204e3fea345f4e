package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run `shedfs serve` as a real daemon with a mount root and
// administer it through the CLI, as an operator would: every command goes
// through the admin socket, and its effect must show in the views at once
// (or within the kernel's one-second entry timeout where the daemon cannot
// reach the kernel's cache, which the tests allow for by polling).

// serveDaemon is one `shedfs serve` child with its views under Root.
type serveDaemon struct {
	*View
	Root string
}

// startServe starts `shedfs serve` on store with a fresh mount root and
// waits until the view of every user in users is mounted. Whatever the
// test does, every view under the root is detached when it ends.
func startServe(t *testing.T, store string, users ...string) *serveDaemon {
	t.Helper()
	return startServeWith(t, store, nil, users...)
}

// startServeWith is startServe with extra flags for serve.
func startServeWith(t *testing.T, store string, extra []string, users ...string) *serveDaemon {
	t.Helper()
	root := newMountpoint(t)
	// Registered before launchView, so it runs after the harness has
	// stopped the daemon: anything still mounted under the root then is
	// left over, and goes.
	t.Cleanup(func() {
		for _, m := range mounts() {
			if strings.HasPrefix(m.point, root+"/") {
				t.Errorf("%s still mounted after serve stopped", m.point)
				abortAndDetach(m)
			}
		}
	})
	v := launchView(t, root, nil, append(append([]string{"serve", "--store", store}, extra...), "--mount-root"))
	v.Store = store
	s := &serveDaemon{View: v, Root: root}
	for _, u := range users {
		s.waitView(u)
	}
	// Admin commands sent before the daemon listens would open the store
	// themselves and find it locked.
	s.waitSocket()
	return s
}

// waitView waits until the view of user is mounted under the root.
func (s *serveDaemon) waitView(user string) {
	s.t.Helper()
	dir := filepath.Join(s.Root, user)
	deadline := time.Now().Add(mountTimeout)
	for {
		if _, ok := findMount(dir); ok {
			return
		}
		if s.exited() {
			s.t.Fatalf("shedfs serve exited before mounting %s: %v\nstderr:\n%s", dir, s.err, s.Stderr())
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("view %s not mounted after %v\nstderr:\n%s", dir, mountTimeout, s.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// In is a path in the view of user.
func (s *serveDaemon) In(user string, elem ...string) string {
	return filepath.Join(append([]string{s.Root, user}, elem...)...)
}

// adminOK runs an admin command that must succeed.
func adminOK(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("shedfs %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// adminFails runs an admin command that must fail with one line saying want.
func adminFails(t *testing.T, want string, args ...string) {
	t.Helper()
	out, errOut, code := runCLI(t, args...)
	what := "shedfs " + strings.Join(args, " ")
	if code == 0 {
		t.Errorf("%s: exit 0, want a failure\nstdout:\n%s", what, out)
		return
	}
	checkOneLine(t, what, errOut)
	if !strings.Contains(errOut, want) {
		t.Errorf("%s: stderr %q does not say %q", what, errOut, want)
	}
}

// listNames lists a directory, failing the test on error.
func listNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// within2s polls cond for up to two seconds: twice the kernel's entry
// timeout, for what the daemon cannot invalidate yet.
func within2s(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("%s: not so after 2s", what)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setupTeam creates alice, bob and carol, and team-alpha with alice and
// bob, with the store opened directly (no daemon yet).
func setupTeam(t *testing.T, store string) {
	t.Helper()
	for _, u := range []string{"alice", "bob", "carol"} {
		adminOK(t, "user", "add", u, "--store", store)
	}
	adminOK(t, "group", "add", "team-alpha", "--store", store)
	adminOK(t, "group", "add-member", "team-alpha", "alice", "bob", "--store", store)
}

// TestServeRemoveMember removes bob from team-alpha through the CLI while
// serve runs: groups/team-alpha leaves his view at once, and a handle he
// has open for writing on a group file fails on its next write. carol,
// never a member, never sees the group.
func TestServeRemoveMember(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	setupTeam(t, store)
	s := startServe(t, store, "alice", "bob", "carol")

	if got := listNames(t, s.In("bob", "groups")); !slices.Equal(got, []string{"team-alpha"}) {
		t.Fatalf("bob's groups/ lists %v, want [team-alpha]", got)
	}
	if got := listNames(t, s.In("carol", "groups")); len(got) != 0 {
		t.Errorf("carol's groups/ lists %v, want nothing", got)
	}
	mustWrite(t, s.In("alice", "groups", "team-alpha", "plan.md"), []byte("v1\n"), 0o644)
	f, err := os.OpenFile(s.In("bob", "groups", "team-alpha", "plan.md"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("bob opens the group file for writing: %v", err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("bob was here\n")); err != nil {
		t.Fatalf("bob writes while a member: %v", err)
	}

	adminOK(t, "group", "remove-member", "team-alpha", "bob", "--store", s.Store)

	if got := listNames(t, s.In("bob", "groups")); len(got) != 0 {
		t.Errorf("bob's groups/ lists %v right after his removal, want nothing", got)
	}
	if _, err := os.Stat(s.In("bob", "groups", "team-alpha")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat groups/team-alpha in bob's view after his removal: %v, want ENOENT", err)
	}
	if _, err := os.Stat(s.In("bob", "groups", "team-alpha", "plan.md")); err == nil {
		t.Errorf("bob still reaches groups/team-alpha/plan.md after his removal")
	}
	if _, err := f.Write([]byte("and again\n")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("bob's next write on his open handle: %v, want EACCES", err)
	}
	if got := string(mustRead(t, s.In("alice", "groups", "team-alpha", "plan.md"))); got != "v1\nbob was here\n" {
		t.Errorf("alice reads %q", got)
	}
	if got := listNames(t, s.In("carol", "groups")); len(got) != 0 {
		t.Errorf("carol's groups/ lists %v, want nothing", got)
	}
	if _, err := os.Stat(s.In("carol", "groups", "team-alpha")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat groups/team-alpha in carol's view: %v, want ENOENT", err)
	}

	// Adding him back shows the group again, at once.
	adminOK(t, "group", "add-member", "team-alpha", "bob", "--store", s.Store)
	if got := listNames(t, s.In("bob", "groups")); !slices.Equal(got, []string{"team-alpha"}) {
		t.Errorf("bob's groups/ lists %v after being added back", got)
	}
	f.Close()
	s.Stop()
	fsckClean(t, store)
}

// TestServeImportAndMode imports files through the daemon and overrides
// ownership, and checks both through the views.
func TestServeImportAndMode(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	setupTeam(t, store)
	s := startServe(t, store, "alice", "bob", "carol")
	src := t.TempDir()
	for _, n := range []string{"report.csv", "a.txt", "b.txt"} {
		mustWrite(t, filepath.Join(src, n), []byte("content of "+n), 0o600)
	}

	out := adminOK(t, "import", "--user", "alice", "--store", store, filepath.Join(src, "report.csv"))
	if !strings.Contains(out, "imported 1 file") {
		t.Errorf("import said %q", out)
	}
	up := s.In("alice", "uploads", "report.csv")
	within2s(t, "imported report.csv in alice's uploads/", func() bool {
		data, err := os.ReadFile(up)
		return err == nil && string(data) == "content of report.csv"
	})
	if _, err := os.Stat(s.In("bob", "uploads", "report.csv")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("bob's uploads/ shows alice's import: %v", err)
	}
	if _, err := os.OpenFile(up, os.O_WRONLY, 0); !errors.Is(err, syscall.EACCES) {
		t.Errorf("open an imported file for writing: %v, want EACCES", err)
	}
	if err := os.Truncate(up, 0); !errors.Is(err, syscall.EACCES) {
		t.Errorf("truncate an imported file: %v, want EACCES", err)
	}

	// An existing name needs --replace, which swaps the content.
	adminFails(t, "--replace", "import", "--user", "alice", "--store", store, filepath.Join(src, "report.csv"))
	mustWrite(t, filepath.Join(src, "report.csv"), []byte("second version"), 0o600)
	adminOK(t, "import", "--user", "alice", "--store", store, "--replace", filepath.Join(src, "report.csv"))
	within2s(t, "replaced report.csv in alice's view", func() bool {
		data, err := os.ReadFile(up)
		return err == nil && string(data) == "second version"
	})

	// A session directory, two files at once.
	adminOK(t, "import", "--user", "alice", "--session", "run-7", "--store", store,
		filepath.Join(src, "a.txt"), filepath.Join(src, "b.txt"))
	within2s(t, "uploads/run-7 lists a.txt and b.txt", func() bool {
		entries, err := os.ReadDir(s.In("alice", "uploads", "run-7"))
		if err != nil || len(entries) != 2 {
			return false
		}
		return entries[0].Name() == "a.txt" && entries[1].Name() == "b.txt"
	})
	if err := os.Remove(up); err != nil {
		t.Errorf("rm of an imported file: %v", err)
	}
	runTool(t, "", nil, "rm", "-rf", s.In("alice", "uploads", "run-7"))
	if got := listNames(t, s.In("alice", "uploads")); len(got) != 0 {
		t.Errorf("uploads/ lists %v after rm, want nothing", got)
	}
	adminFails(t, "no user named dave", "import", "--user", "dave", "--store", store, filepath.Join(src, "a.txt"))

	// Ownership override: alice's file, set by the admin in bob's view
	// of the group, seen through getfattr in both views.
	doc := s.In("alice", "groups", "team-alpha", "doc.txt")
	mustWrite(t, doc, []byte("draft"), 0o644)
	if out := adminOK(t, "mode", "get", "--user", "bob", "--store", store, "groups/team-alpha/doc.txt"); !strings.Contains(out, "owner:  alice") || !strings.Contains(out, "mode:   group") {
		t.Errorf("mode get:\n%s", out)
	}
	adminOK(t, "mode", "set", "--user", "bob", "--store", store, "groups/team-alpha/doc.txt", "--mode", "owner_ro", "--owner", "bob")
	for _, u := range []string{"alice", "bob"} {
		p := s.In(u, "groups", "team-alpha", "doc.txt")
		within2s(t, "user.shedfs.mode owner_ro in the view of "+u, func() bool {
			return getXattr(t, p, "user.shedfs.mode") == "owner_ro"
		})
		if got := getXattr(t, p, "user.shedfs.owner"); got != "bob" {
			t.Errorf("user.shedfs.owner in the view of %s: %q, want bob", u, got)
		}
	}
	within2s(t, "alice may no longer write doc.txt (owner_ro)", func() bool {
		f, err := os.OpenFile(doc, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
			return false
		}
		return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
	})
	adminFails(t, "not a member of group team-alpha", "mode", "set", "--user", "bob", "--store", store, "groups/team-alpha/doc.txt", "--owner", "carol")
	adminFails(t, "no groups/team-alpha/doc.txt in the view of carol", "mode", "get", "--user", "carol", "--store", store, "groups/team-alpha/doc.txt")
	adminFails(t, "invalid mode", "mode", "set", "--user", "alice", "--store", store, "groups/team-alpha/doc.txt", "--mode", "everyone")

	s.Stop()
	fsckClean(t, store)
}

// getXattr reads an extended attribute with getfattr, "" when unset.
func getXattr(t *testing.T, path, name string) string {
	t.Helper()
	if !requireTool(t, "getfattr") {
		t.Skip("getfattr is not installed")
	}
	out, err := exec.Command("getfattr", "--absolute-names", "--only-values", "-n", name, path).Output()
	if err != nil {
		return ""
	}
	return string(out)
}
