package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/daemon"
)

// srcFiles writes files named after their content into a fresh directory
// and returns it.
func srcFiles(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("content of "+n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// teamStore makes a store with alice, bob and carol, team-alpha with
// alice and bob, and alice's file in the group's zone.
func teamStore(t *testing.T) string {
	t.Helper()
	s := newStoreDir(t)
	for _, u := range []string{"alice", "bob", "carol"} {
		ok(t, "user", "add", u, "--store", s)
	}
	ok(t, "group", "add", "team-alpha", "--store", s)
	ok(t, "group", "add-member", "team-alpha", "alice", "bob", "--store", s)
	st, err := daemon.OpenStore(s, daemon.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, _ := st.Meta.GetGroup("team-alpha")
	if _, err := st.Meta.Create(g.Root, "plan.md", &shedfs.Inode{Mode: syscall.S_IFREG | 0o644, Owner: "alice", OwnMode: shedfs.OwnModeGroup}, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestImportCommand(t *testing.T) {
	s := teamStore(t)
	src := srcFiles(t, "a.txt", "b.txt")
	a, b := filepath.Join(src, "a.txt"), filepath.Join(src, "b.txt")
	if out := ok(t, "import", "--user", "alice", "--store", s, a, b); out != "imported 2 files (32 B) into uploads/ of alice\n" {
		t.Errorf("import: %q", out)
	}
	ok(t, "import", a, "--user", "alice", "--session", "s1", "--store", s)
	fails(t, "uploads/a.txt of user alice already exists; add --replace to overwrite it", "import", "--user", "alice", "--store", s, a)
	ok(t, "import", "--user", "alice", "--store", s, "--replace", a)

	long := filepath.Join(t.TempDir(), strings.Repeat("x", 255))
	if err := os.WriteFile(long, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, "import", "--user", "alice", "--store", s, long) // 255 bytes is fine

	fails(t, "no user named dave", "import", "--user", "dave", "--store", s, a)
	fails(t, "invalid user name", "import", "--user", "Dave", "--store", s, a)
	fails(t, "required flag --user not set", "import", "--store", s, a)
	fails(t, "give at least one FILE", "import", "--user", "alice", "--store", s)
	fails(t, "no such file or directory", "import", "--user", "alice", "--store", s, filepath.Join(src, "nope"))
	fails(t, "is not a regular file", "import", "--user", "alice", "--store", s, src)
	fails(t, "would both be named a.txt", "import", "--user", "alice", "--store", s, "--replace", a, a)
	fails(t, "invalid session name", "import", "--user", "alice", "--store", s, "--session", "..", a)
	fails(t, "session name", "import", "--user", "alice", "--store", s, "--session", strings.Repeat("s", 256), a)
	// A refusal of the second file still says the first went in.
	c := filepath.Join(src, "c.txt")
	os.WriteFile(c, []byte("c"), 0o600)
	fails(t, "after 1 of 2 files were imported", "import", "--user", "alice", "--store", s, c, b)

	ok(t, "quota", "set", "user:alice", "--bytes", "16KiB", "--store", s)
	big := filepath.Join(t.TempDir(), "big.bin")
	os.WriteFile(big, make([]byte, 64<<10), 0o600)
	fails(t, "over the quota of user alice", "import", "--user", "alice", "--store", s, big)

	out := ok(t, "import", "--user", "bob", "--store", s, "--json", b)
	if !strings.Contains(out, `"path": "uploads/b.txt"`) {
		t.Errorf("import --json: %s", out)
	}
}

func TestModeCommand(t *testing.T) {
	s := teamStore(t)
	out := ok(t, "mode", "get", "groups/team-alpha/plan.md", "--user", "bob", "--store", s)
	want := "path:   groups/team-alpha/plan.md (file, in the view of bob)\nzone:   group:team-alpha\nowner:  alice\nmode:   group\n" +
		"hash:   sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\nscan:   unscanned\n"
	if out != want {
		t.Errorf("mode get:\n%s\nwant:\n%s", out, want)
	}
	out = ok(t, "mode", "set", "groups/team-alpha/plan.md", "--user", "bob", "--store", s, "--mode", "owner", "--owner", "bob")
	if !strings.Contains(out, "owner:  bob\nmode:   owner\n") {
		t.Errorf("mode set:\n%s", out)
	}
	if out := ok(t, "mode", "get", "--json", "--user", "alice", "--store", s, "groups/team-alpha/plan.md"); !strings.Contains(out, `"mode": "owner"`) {
		t.Errorf("mode get --json: %s", out)
	}

	fails(t, `invalid mode "rw": use owner, group or owner_ro`, "mode", "set", "--user", "bob", "--store", s, "--mode", "rw", "groups/team-alpha/plan.md")
	fails(t, "give --mode, --owner or both", "mode", "set", "--user", "bob", "--store", s, "groups/team-alpha/plan.md")
	fails(t, "no groups/team-alpha/plan.md in the view of carol", "mode", "get", "--user", "carol", "--store", s, "groups/team-alpha/plan.md")
	fails(t, "no share/nope in the view of alice", "mode", "get", "--user", "alice", "--store", s, "share/nope")
	fails(t, "no user named dave", "mode", "get", "--user", "dave", "--store", s, "share")
	fails(t, "not a member of group team-alpha", "mode", "set", "--user", "alice", "--store", s, "--owner", "carol", "groups/team-alpha/plan.md")
	fails(t, "only in share/ and groups/", "mode", "set", "--user", "alice", "--store", s, "--mode", "owner", "output")
	fails(t, `".." is not allowed`, "mode", "get", "--user", "alice", "--store", s, "share/../output")
	fails(t, "give exactly one PATH", "mode", "get", "--user", "alice", "--store", s)
	fails(t, "required flag --user not set", "mode", "get", "--store", s, "share")
}

// TestFilesCommandsBothWays runs import and mode through a daemon and on
// the store directly, and insists on the same output.
func TestFilesCommandsBothWays(t *testing.T) {
	direct, served := teamStore(t), teamStore(t)
	st, err := daemon.OpenStore(served, daemon.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := daemon.Listen(daemon.SocketPath(served), daemon.NewLocal(st, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	src := srcFiles(t, "a.txt", "b.txt")
	a, b := filepath.Join(src, "a.txt"), filepath.Join(src, "b.txt")
	script := [][]string{
		{"import", "--user", "alice", a, b},
		{"import", "--user", "alice", a},
		{"import", "--user", "alice", "--replace", "--json", a},
		{"import", "--user", "alice", "--session", "s", a},
		{"import", "--user", "nobody", a},
		{"mode", "get", "--user", "alice", "uploads/s/a.txt"},
		{"mode", "set", "--user", "bob", "groups/team-alpha/plan.md", "--mode", "owner_ro"},
		{"mode", "set", "--user", "bob", "groups/team-alpha/plan.md", "--owner", "carol"},
		{"mode", "get", "--user", "carol", "groups/team-alpha/plan.md"},
		{"mode", "get", "--user", "bob", "groups/team-alpha/plan.md", "--json"},
	}
	ino := regexp.MustCompile(`"ino": \d+`)
	for _, args := range script {
		o1, e1, c1 := runCLI(t, append(args, "--store", direct)...)
		o2, e2, c2 := runCLI(t, append(args, "--store", served)...)
		o1, o2 = ino.ReplaceAllString(o1, "I"), ino.ReplaceAllString(o2, "I")
		if o1 != o2 || e1 != e2 || c1 != c2 {
			t.Errorf("shedfs %s differs:\ndirect: exit %d\n%s%s\nserved: exit %d\n%s%s", strings.Join(args, " "), c1, o1, e1, c2, o2, e2)
		}
	}
}
