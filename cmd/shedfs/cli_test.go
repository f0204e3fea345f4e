package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/daemon"
)

// runCLI runs the command line in process and returns its output and status.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"shedfs"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// ok runs a command that must succeed and returns its output.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, args...)
	if code != 0 || errOut != "" {
		t.Fatalf("shedfs %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs a command that must fail with one line on stderr, starting
// with "shedfs: " and containing want.
func fails(t *testing.T, want string, args ...string) {
	t.Helper()
	out, errOut, code := runCLI(t, args...)
	if code == 0 {
		t.Errorf("shedfs %s: exit 0, want a failure\nstdout:\n%s", strings.Join(args, " "), out)
		return
	}
	if !strings.HasPrefix(errOut, "shedfs: ") || strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(errOut, "\n") {
		t.Errorf("shedfs %s: stderr is not one line starting with \"shedfs: \": %q", strings.Join(args, " "), errOut)
	}
	if !strings.Contains(errOut, want) {
		t.Errorf("shedfs %s: stderr %q does not say %q", strings.Join(args, " "), errOut, want)
	}
}

// newStoreDir creates a store with shedfs init (no other command creates
// one) and returns its directory.
func newStoreDir(t *testing.T) string {
	t.Helper()
	s := filepath.Join(t.TempDir(), "store")
	ok(t, "init", "--store", s)
	return s
}

// putData stores a file of size bytes in a user's private zone, as a view
// would, with the store opened directly.
func putData(t *testing.T, store, user string, size uint64) {
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
	n, err := st.Meta.Create(u.Roots.Private, "data", &shedfs.Inode{Mode: syscall.S_IFREG | 0o644}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Meta.Update(n.Ino, func(n *shedfs.Inode) error { n.Size = size; return nil }, nil); err != nil {
		t.Fatal(err)
	}
}

// checkTable insists that every line of a table has its columns at the
// same offsets as the header.
func checkTable(t *testing.T, out string, rows int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != rows+1 {
		t.Errorf("table has %d rows, want %d:\n%s", len(lines)-1, rows, out)
		return
	}
	starts := func(l string) []int {
		var idx []int
		for _, m := range regexp.MustCompile(`(^|  )\S`).FindAllStringIndex(l, -1) {
			idx = append(idx, m[1]-1)
		}
		return idx
	}
	head := starts(lines[0])
	for _, l := range lines[1:] {
		if got := starts(l); !reflect.DeepEqual(got, head) {
			t.Errorf("row %q has columns at %v, header at %v", l, got, head)
		}
	}
}

func TestUserCommands(t *testing.T) {
	s := newStoreDir(t)
	if out := ok(t, "user", "add", "alice", "--store", s, "--quota", "10GiB", "--inodes", "1000"); out != "user alice added\n" {
		t.Errorf("user add: %q", out)
	}
	ok(t, "user", "add", "--store", s, "--uid", "1000", "--gid", "1000", "bob")
	fails(t, "user alice already exists", "user", "add", "alice", "--store", s)
	for _, bad := range []string{"Alice", "al/ice", "-", "_x", strings.Repeat("a", 65), "é"} {
		fails(t, "invalid user name", "user", "add", "--store", s, "--", bad)
	}
	fails(t, "--uid and --gid go together", "user", "add", "carol", "--store", s, "--uid", "5")
	fails(t, "--quota", "user", "add", "carol", "--store", s, "--quota", "lots")
	fails(t, "give exactly one NAME", "user", "add", "--store", s)
	fails(t, "give exactly one NAME", "user", "add", "a", "b", "--store", s)
	fails(t, "no store given", "user", "list")
	fails(t, "does not exist", "user", "list", "--store", filepath.Join(t.TempDir(), "nope"))
	fails(t, "flag provided but not defined", "user", "list", "--store", s, "--colour")

	out := ok(t, "user", "list", "--store", s)
	checkTable(t, out, 2)
	if !strings.Contains(out, "alice") || !strings.Contains(out, "10 GiB") || !strings.Contains(out, "1000") {
		t.Errorf("user list:\n%s", out)
	}
	var users []daemon.UserInfo
	if err := json.Unmarshal([]byte(ok(t, "user", "list", "--json", "--store", s)), &users); err != nil || len(users) != 2 ||
		users[0].Limit != (daemon.Amount{Bytes: 10 << 30, Inodes: 1000}) || users[1].Uid != 1000 {
		t.Errorf("user list --json: %+v, %v", users, err)
	}
	show := ok(t, "user", "show", "bob", "--store", s)
	for _, want := range []string{"name:", "bob", "uid 1000, gid 1000", "quota:", "none"} {
		if !strings.Contains(show, want) {
			t.Errorf("user show lacks %q:\n%s", want, show)
		}
	}
	fails(t, "no user named carol", "user", "show", "carol", "--store", s)

	putData(t, s, "bob", 3<<20)
	fails(t, "user bob still has 1 file or directory (3 MiB); add --force", "user", "remove", "bob", "--store", s)
	if out := ok(t, "user", "remove", "bob", "--force", "--store", s); out != "user bob removed (1 entry, 3 MiB deleted)\n" {
		t.Errorf("user remove --force: %q", out)
	}
	if out := ok(t, "user", "remove", "alice", "--store", s); out != "user alice removed (0 entries, 0 B deleted)\n" {
		t.Errorf("user remove of an empty user: %q", out)
	}
	fails(t, "no user named alice", "user", "remove", "alice", "--store", s)
	if out := ok(t, "user", "list", "--store", s); strings.Count(out, "\n") != 1 {
		t.Errorf("user list of no users: %q", out)
	}
}

func TestGroupCommands(t *testing.T) {
	s := newStoreDir(t)
	ok(t, "user", "add", "alice", "--store", s)
	ok(t, "user", "add", "bob", "--store", s)
	if out := ok(t, "group", "add", "team-alpha", "--store", s); out != "group team-alpha added\n" {
		t.Errorf("group add: %q", out)
	}
	fails(t, "group team-alpha already exists", "group", "add", "team-alpha", "--store", s)
	fails(t, "invalid group name \"Team\"", "group", "add", "Team", "--store", s)
	out := ok(t, "group", "add-member", "team-alpha", "alice", "bob", "--store", s)
	if out != "alice added to group team-alpha\nbob added to group team-alpha\n" {
		t.Errorf("add-member: %q", out)
	}
	fails(t, "no user named carol", "group", "add-member", "team-alpha", "carol", "--store", s)
	fails(t, "no group named nope", "group", "add-member", "nope", "alice", "--store", s)
	fails(t, "invalid user name", "group", "add-member", "team-alpha", "Carol", "--store", s)
	fails(t, "give a GROUP and at least one USER", "group", "add-member", "team-alpha", "--store", s)
	ok(t, "group", "add", "ops", "--store", s)

	out = ok(t, "group", "list", "--store", s)
	checkTable(t, out, 2)
	if !strings.Contains(out, "alice,bob") {
		t.Errorf("group list:\n%s", out)
	}
	if out := ok(t, "group", "show", "team-alpha", "--store", s); !strings.Contains(out, "alice, bob") {
		t.Errorf("group show:\n%s", out)
	}
	if out := ok(t, "user", "show", "alice", "--store", s); !strings.Contains(out, "team-alpha") {
		t.Errorf("user show lacks the group:\n%s", out)
	}
	if out := ok(t, "group", "remove-member", "team-alpha", "bob", "--store", s); out != "bob removed from group team-alpha\n" {
		t.Errorf("remove-member: %q", out)
	}
	fails(t, "bob is not a member of group team-alpha", "group", "remove-member", "team-alpha", "bob", "--store", s)
	var g daemon.GroupInfo
	if err := json.Unmarshal([]byte(ok(t, "group", "show", "--json", "team-alpha", "--store", s)), &g); err != nil ||
		!reflect.DeepEqual(g.Members, []string{"alice"}) {
		t.Errorf("group show --json: %+v, %v", g, err)
	}
	ok(t, "group", "remove", "team-alpha", "--store", s)
	fails(t, "no group named team-alpha", "group", "show", "team-alpha", "--store", s)
}

// TestQuotaBelowUsage: a limit set below what the holder already uses is
// set (nothing is deleted), with one warning line on stderr saying by how
// much it is over, and quota show says it too (issue 27: it was silent
// until fsck failed).
func TestQuotaBelowUsage(t *testing.T) {
	s := newStoreDir(t)
	ok(t, "user", "add", "alice", "--store", s)
	putData(t, s, "alice", 3<<20)
	out, errOut, code := runCLI(t, "quota", "set", "user:alice", "--bytes", "1MiB", "--inodes", "2", "--store", s)
	if code != 0 {
		t.Fatalf("quota set below the usage: exit %d\n%s%s", code, out, errOut)
	}
	want := "shedfs: warning: user:alice is over its new limit by 2 MiB and 2 inodes: nothing was deleted; new data is refused until enough is deleted or the limit raised\n"
	if errOut != want {
		t.Errorf("quota set below the usage: stderr %q, want %q", errOut, want)
	}
	checkTable(t, out, 1)
	if !strings.Contains(out, "OVER") || !strings.Contains(out, "2 MiB, 2 inodes") {
		t.Errorf("quota set below the usage:\n%s", out)
	}
	show := ok(t, "quota", "show", "user:alice", "--store", s)
	if !strings.Contains(show, "2 MiB, 2 inodes") {
		t.Errorf("quota show of a holder over its limit:\n%s", show)
	}
	var qs []daemon.QuotaInfo
	if err := json.Unmarshal([]byte(ok(t, "quota", "show", "user:alice", "--json", "--store", s)), &qs); err != nil ||
		len(qs) != 1 || qs[0].Over != (daemon.Amount{Bytes: 2 << 20, Inodes: 2}) {
		t.Errorf("quota show --json: %+v, %v", qs, err)
	}
	// Raised above the usage: no warning, nothing over.
	if out := ok(t, "quota", "set", "user:alice", "--bytes", "none", "--inodes", "none", "--store", s); strings.Contains(out, "MiB, ") {
		t.Errorf("quota set above the usage still shows an overshoot:\n%s", out)
	}
}

func TestQuotaCommands(t *testing.T) {
	s := newStoreDir(t)
	ok(t, "user", "add", "alice", "--store", s)
	ok(t, "group", "add", "team-alpha", "--store", s)
	out := ok(t, "quota", "set", "user:alice", "--bytes", "1.5G", "--inodes", "100k", "--store", s)
	checkTable(t, out, 1)
	if !strings.Contains(out, "1.5 GiB") || !strings.Contains(out, "100000") || !strings.Contains(out, "0%") {
		t.Errorf("quota set:\n%s", out)
	}
	ok(t, "quota", "set", "group:team-alpha", "--bytes", "500M", "--store", s)
	ok(t, "quota", "set", "share", "--inodes", "10", "--store", s)
	for _, bad := range []struct{ value, want string }{
		{"10XB", "unknown unit"}, {"-1", "not a number"}, {"ten", "unknown unit"}, {"1.2.3G", "not a number"}, {"", "empty"}, {"99999999999T", "too large"},
	} {
		fails(t, bad.want, "quota", "set", "share", "--bytes", bad.value, "--store", s)
	}
	fails(t, "--inodes", "quota", "set", "share", "--inodes", "1.5", "--store", s)
	fails(t, "give --bytes, --inodes or both", "quota", "set", "share", "--store", s)
	fails(t, "invalid quota holder \"alice\"", "quota", "set", "alice", "--bytes", "1G", "--store", s)
	fails(t, "no user named bob", "quota", "set", "user:bob", "--bytes", "1G", "--store", s)
	fails(t, "no user named bob", "quota", "show", "user:bob", "--store", s)

	out = ok(t, "quota", "show", "--store", s)
	checkTable(t, out, 3)
	lines := strings.Split(out, "\n")
	for i, want := range []string{"group:team-alpha  0 B         500 MiB", "share", "user:alice"} {
		if !strings.HasPrefix(lines[i+1], want) {
			t.Errorf("quota show line %d: %q, want it to start with %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[2], "10%") {
		t.Errorf("share uses 1 of 10 inodes: %q", lines[2])
	}
	// Back to unlimited.
	ok(t, "quota", "set", "user:alice", "--bytes", "none", "--inodes", "0", "--store", s)
	var qs []daemon.QuotaInfo
	if err := json.Unmarshal([]byte(ok(t, "quota", "show", "user:alice", "--json", "--store", s)), &qs); err != nil ||
		len(qs) != 1 || qs[0].Limit != (daemon.Amount{}) || qs[0].Used.Inodes != 3 {
		t.Errorf("quota show --json: %+v, %v", qs, err)
	}
}

func TestStatusWithoutDaemon(t *testing.T) {
	s := newStoreDir(t)
	ok(t, "user", "add", "alice", "--store", s)
	out := ok(t, "status", "--store", s)
	for _, want := range []string{"daemon:      not running", "users:       1", "last fsck:   never", "views:       no daemon", "requests:    no daemon", "store size:  "} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var st daemon.Status
	if err := json.Unmarshal([]byte(ok(t, "status", "--json", "--store", s)), &st); err != nil || st.Daemon || st.Users != 1 {
		t.Errorf("status --json: %+v, %v", st, err)
	}
}

// TestCLIBothWays runs the same commands against a store opened directly
// and against a store served by a daemon's admin socket: output, errors and
// exit codes are the same.
func TestCLIBothWays(t *testing.T) {
	direct := newStoreDir(t)
	served := newStoreDir(t)
	st, err := daemon.OpenStore(served, daemon.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := daemon.Listen(daemon.SocketPath(served), daemon.NewLocal(st, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	script := [][]string{
		{"user", "add", "alice", "--quota", "1G"},
		{"user", "add", "bob", "--uid", "10", "--gid", "20"},
		{"user", "add", "alice"},
		{"user", "add", "Nope"},
		{"group", "add", "team-alpha"},
		{"group", "add-member", "team-alpha", "alice", "bob"},
		{"group", "add-member", "team-alpha", "zed"},
		{"group", "remove-member", "team-alpha", "bob"},
		{"group", "list"},
		{"group", "list", "--json"},
		{"user", "list"},
		{"quota", "set", "share", "--bytes", "2T"},
		{"quota", "set", "group:nope", "--bytes", "2T"},
		{"quota", "show"},
		{"quota", "show", "user:alice", "--json"},
		{"user", "remove", "bob"},
		{"user", "remove", "bob"},
		{"group", "remove", "team-alpha"},
		{"user", "list", "--json"},
	}
	created := regexp.MustCompile(`"created": "[^"]*"`)
	for _, args := range script {
		o1, e1, c1 := runCLI(t, append(args, "--store", direct)...)
		o2, e2, c2 := runCLI(t, append(args, "--store", served)...)
		o1, o2 = created.ReplaceAllString(o1, "T"), created.ReplaceAllString(o2, "T")
		if o1 != o2 || e1 != e2 || c1 != c2 {
			t.Errorf("shedfs %s differs:\ndirect: exit %d\n%s%s\nserved: exit %d\n%s%s", strings.Join(args, " "), c1, o1, e1, c2, o2, e2)
		}
	}
	// The served store is held open by this process, so the commands
	// above can only have gone through the socket; without it they fail.
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	fails(t, "locked by another process, and no daemon answered on "+daemon.SocketPath(served), "user", "list", "--store", served)
}

// TestCommandWaitsForHolder: a command that finds the store locked by
// another process does not fail at once: the holder may be a daemon that
// answers on its socket a moment later (a loaded machine, or one still
// starting), or another command that lets go; either way the command
// gets through. (Held for good, it fails with a line that says what was
// tried: TestCLIBothWays.)
func TestCommandWaitsForHolder(t *testing.T) {
	const late = 400 * time.Millisecond
	for _, tc := range []struct {
		name string
		// after is what the holder does once late is over.
		after func(t *testing.T, dir string, st *daemon.Store)
	}{
		{"a daemon answers late", func(t *testing.T, dir string, st *daemon.Store) {
			srv, err := daemon.Listen(daemon.SocketPath(dir), daemon.NewLocal(st, nil), nil)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { srv.Shutdown(context.Background()) })
		}},
		{"another command lets go", func(t *testing.T, dir string, st *daemon.Store) {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newStoreDir(t)
			st, err := daemon.OpenStore(dir, daemon.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(late)
				tc.after(t, dir, st)
			}()
			start := time.Now()
			ok(t, "user", "add", "alice", "--store", dir)
			if took := time.Since(start); took < late/2 {
				t.Errorf("the command got through in %v, before the holder acted", took)
			}
			<-done
		})
	}
}

func TestFlagsFirst(t *testing.T) {
	app := newApp(nil, nil)
	for _, tc := range []struct{ in, want string }{
		{"shedfs user add alice --store S", "shedfs user add --store S alice"},
		{"shedfs user add alice --store=S --json", "shedfs user add --store=S --json alice"},
		{"shedfs --log-level debug user remove bob --force --store S", "shedfs --log-level debug user remove --force --store S bob"},
		{"shedfs user add --store S -- -bad", "shedfs user add --store S -- -bad"},
		{"shedfs user add x --uid -1 --gid 5", "shedfs user add --uid -1 --gid 5 x"},
		{"shedfs group add-member g a b --store S", "shedfs group add-member --store S g a b"},
		{"shedfs user", "shedfs user"},
		{"shedfs unknown a --x", "shedfs unknown a --x"},
		{"shedfs mount /mnt --store S --user alice", "shedfs mount --store S --user alice /mnt"},
		// Global flags after the command go before it.
		{"shedfs serve --store S --log-format json --mount-root R", "shedfs --log-format json serve --store S --mount-root R"},
		{"shedfs --log-level debug serve --log-format=json --store S", "shedfs --log-format=json --log-level debug serve --store S"},
	} {
		got := strings.Join(flagsFirst(app, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("flagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestMissingRequiredFlag: a required flag left out is one line naming the
// flag and pointing at --help, never the command's help text (issue 27),
// with or without arguments, for commands and subcommands alike.
func TestMissingRequiredFlag(t *testing.T) {
	s := newStoreDir(t)
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--user", []string{"session", "open", "--store", s}},
		{"--user", []string{"session", "close", "--store", s, "x"}},
		{"--user", []string{"import", "--store", s}},
		{"--user", []string{"import", "--store", s, "f"}},
		{"--user", []string{"mount", "--store", s, "/nonexistent/mnt"}},
		{"--at", []string{"restore", "--store", s, "--user", "alice", "p"}},
		{"--mount-root", []string{"serve", "--store", s}},
		{"--from", []string{"migrate", "--to", "etcd://127.0.0.1:1/x"}},
	} {
		want := "required flag " + c.flag + " not set (see shedfs " + c.args[0]
		fails(t, want, c.args...)
		out, errOut, _ := runCLI(t, c.args...)
		if !strings.Contains(errOut, " --help)") {
			t.Errorf("shedfs %s: %q does not point at --help", strings.Join(c.args, " "), errOut)
		}
		if out != "" {
			t.Errorf("shedfs %s: printed %d lines on stdout besides the error:\n%s", strings.Join(c.args, " "), strings.Count(out, "\n"), out)
		}
	}
}

// TestNoRequiredFlagLeft: every required flag is checked by
// checkRequiredFlags, none by urfave/cli, which would print the help text
// before its error.
func TestNoRequiredFlagLeft(t *testing.T) {
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
					t.Errorf("shedfs %s%s: flag --%s is still Required for urfave/cli: give checkRequiredFlags its type", prefix, c.Name, f.Names()[0])
				}
			}
			walk(prefix+c.Name+" ", c.Subcommands)
		}
	}
	walk("", newApp(io.Discard, io.Discard).Commands)
}

// TestOnlyInitCreatesAStore: shedfs init creates a store (and leaves an
// existing one as it is); every other command refuses a directory that
// holds none, missing or empty, with one line saying how to create one,
// and writes nothing there (issue 27).
func TestOnlyInitCreatesAStore(t *testing.T) {
	typo := filepath.Join(t.TempDir(), "typo")
	empty := t.TempDir()
	for _, args := range [][]string{
		{"user", "add", "alice"},
		{"group", "add", "team"},
		{"quota", "show"},
		{"user", "list"},
		{"status"},
		{"fsck"},
		{"fsck", "--dry-run"},
		{"audit"},
	} {
		fails(t, "store "+typo+" does not exist (create one with: shedfs init --store "+typo+")", append(args, "--store", typo)...)
		fails(t, empty+" holds no shedfs store (create one with: shedfs init --store "+empty+")", append(args, "--store", empty)...)
	}
	if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused command made the store directory: %v", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("a refused command wrote %d entries into an empty directory", len(ents))
	}
	if out := ok(t, "init", "--store", typo); out != "store "+typo+" created\n" {
		t.Errorf("init: %q", out)
	}
	ok(t, "user", "add", "alice", "--store", typo)
	if out := ok(t, "init", "--store", typo); out != "store "+typo+" exists already; left as it is\n" {
		t.Errorf("init of an existing store: %q", out)
	}
	if out := ok(t, "user", "list", "--store", typo); !strings.Contains(out, "alice") {
		t.Errorf("init of an existing store lost its user:\n%s", out)
	}
	fails(t, "no arguments", "init", "--store", typo, "extra")
}
