package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Helpers shared by the policy, escape and coherence tests, on top of the
// serve harness of admin_test.go (startServe, setupTeam, adminOK): one
// daemon, three views (alice and bob in team-alpha, carol outside it).

// startTeam makes a store with alice, bob, carol and team-alpha (alice,
// bob), starts `shedfs serve` on it and waits for the three views.
func startTeam(t *testing.T) *serveDaemon {
	t.Helper()
	store := newStore(t)
	setupTeam(t, store)
	return startServe(t, store, "alice", "bob", "carol")
}

// wantErrno fails the test unless err carries errno want. what says which
// attempt it was, as a shell user would have typed it.
func wantErrno(t *testing.T, what string, err error, want syscall.Errno) bool {
	t.Helper()
	if errors.Is(err, want) {
		return true
	}
	if err == nil {
		t.Errorf("%s: succeeded, want %s (%v)", what, unix.ErrnoName(want), want)
	} else {
		t.Errorf("%s: %v, want %s (%v)", what, err, unix.ErrnoName(want), want)
	}
	return false
}

// wantOK fails the test if err is not nil.
func wantOK(t *testing.T, what string, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want success", what, err)
		return false
	}
	return true
}

// openWrite opens path for writing with extra flags and closes it again.
func openWrite(path string, flags int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|flags, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// writeFile opens path for writing, writes data at offset 0 and closes it,
// returning the first error.
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// setx sets an xattr through the kernel.
func setx(path, name, value string) error {
	return unix.Setxattr(path, name, []byte(value), 0)
}

// getx reads an xattr through the kernel and fails the test on error.
func getx(t *testing.T, path, name string) string {
	t.Helper()
	v, err := getxattr(path, name)
	if err != nil {
		t.Errorf("getxattr %s %s: %v", path, name, err)
	}
	return v
}

// tool runs a program and returns its combined output and exit status
// (-1 if it could not run), without failing the test.
func tool(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	out, err := runToolErr(name, args...)
	return out, exitCode(err)
}

// runToolErr runs a program with a timeout and returns its combined output
// and error.
func runToolErr(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// auditRecord is one line of `shedfs audit --json`.
type auditRecord struct {
	Time   time.Time `json:"time"`
	User   string    `json:"user"`
	Zone   string    `json:"zone"`
	Path   string    `json:"path"`
	Op     string    `json:"op"`
	Result string    `json:"result"`
	Rule   string    `json:"rule"`
}

func (r auditRecord) String() string {
	return fmt.Sprintf("%s %s %s %s %s %s", r.User, r.Zone, r.Op, r.Path, r.Result, r.Rule)
}

// auditDenied runs `shedfs audit --denied --json` against store (through
// the daemon when one runs) and returns the records.
func auditDenied(t *testing.T, store string, extra ...string) []auditRecord {
	t.Helper()
	args := append([]string{"audit", "--store", store, "--denied", "--json"}, extra...)
	out := adminOK(t, args...)
	var recs []auditRecord
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r auditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("shedfs %s: line %q is not JSON: %v", strings.Join(args, " "), line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// auditWant is a denial the audit trail must hold. zone "*" stands for
// any zone, but one must be named.
type auditWant struct {
	user, zone, op, pathSuffix, result, rule string
}

func (w auditWant) match(r auditRecord) bool {
	zoneOK := r.Zone == w.zone || w.zone == "*" && r.Zone != ""
	return r.User == w.user && zoneOK && r.Op == w.op && strings.HasSuffix(r.Path, w.pathSuffix) &&
		r.Result == w.result && r.Rule == w.rule
}

// checkAudit waits (the recorder writes in batches) up to 5 s for every
// wanted denial to show in the trail of store, and reports those missing.
func checkAudit(t *testing.T, store string, wants []auditWant) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var recs []auditRecord
	for {
		recs = auditDenied(t, store)
		missing := 0
		for _, w := range wants {
			found := false
			for _, r := range recs {
				if w.match(r) {
					found = true
					break
				}
			}
			if !found {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var have strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&have, "  %s\n", r)
	}
	for _, w := range wants {
		found := false
		for _, r := range recs {
			if w.match(r) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("audit trail has no denial {user %s, zone %s, op %s, path ...%s, result %s, rule %s}",
				w.user, w.zone, w.op, w.pathSuffix, w.result, w.rule)
		}
	}
	t.Logf("denials in the audit trail (%d):\n%s", len(recs), have.String())
}

// waitSocket waits until the daemon of s answers on the admin socket of
// its store. startServe waits for views only; with no user there is none
// to wait for, and a CLI command run before the socket exists would open
// the store itself and lock the daemon out.
func (s *serveDaemon) waitSocket() {
	s.t.Helper()
	sock := filepath.Join(s.Store, "admin.sock")
	deadline := time.Now().Add(mountTimeout)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		if s.exited() {
			s.t.Fatalf("shedfs serve exited before listening on %s: %v\nstderr:\n%s", sock, s.err, s.Stderr())
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("shedfs serve: no answer on %s after %v\nstderr:\n%s", sock, mountTimeout, s.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mountsUnder lists the mount points below root.
func mountsUnder(root string) []string {
	var out []string
	for _, m := range mounts() {
		if strings.HasPrefix(m.point, root+"/") {
			out = append(out, m.point)
		}
	}
	return out
}

// TestServeLifecycle tries `shedfs serve` as a new user would: start it on
// an empty store, add a user and see the view appear, use it, remove the
// user and see the view go, stop with SIGTERM: exit 0, nothing mounted.
func TestServeLifecycle(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	s := startServe(t, store)
	s.waitSocket()
	fi, err := os.Stat(s.Root)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("mount root %s has mode %v, want 0700", s.Root, fi.Mode().Perm())
	}
	if got := mountsUnder(s.Root); len(got) != 0 {
		t.Errorf("serve on an empty store mounted %v", got)
	}

	adminOK(t, "user", "add", "dave", "--store", store)
	// The command returns once the daemon has the user; the view must be
	// mounted by then or very soon after.
	start := time.Now()
	s.waitView("dave")
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("dave's view appeared %v after `shedfs user add` returned", d)
	}
	got := listNames(t, s.In("dave"))
	if strings.Join(got, " ") != strings.Join(reservedNames, " ") {
		t.Errorf("a new user's view lists %v, want %v", got, reservedNames)
	}
	mustWrite(t, s.In("dave", "notes.txt"), []byte("hello"), 0o644)
	if out := adminOK(t, "user", "list", "--store", store); !strings.Contains(out, "dave") {
		t.Errorf("user list through the daemon does not show dave:\n%s", out)
	}

	// dave has data: removal asks for --force and says what will go.
	out, errOut, code := runCLI(t, "user", "remove", "dave", "--store", store)
	if code == 0 {
		t.Errorf("user remove of a user with data: exit 0 without --force\n%s", out)
	} else {
		checkOneLine(t, "shedfs user remove dave (with data, no --force)", errOut)
		if !strings.Contains(errOut, "--force") {
			t.Errorf("user remove without --force: %q does not mention --force", errOut)
		}
	}
	if _, ok := findMount(s.In("dave")); !ok {
		t.Errorf("a refused user remove unmounted dave's view")
	}
	adminOK(t, "user", "remove", "dave", "--force", "--store", store)
	if _, ok := findMount(s.In("dave")); ok {
		// Strict: the view goes with the user. Measure how late it is.
		start := time.Now()
		for time.Since(start) < 5*time.Second {
			if _, ok := findMount(s.In("dave")); !ok {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("dave's view still mounted when `shedfs user remove --force` returned (gone %v later)", time.Since(start))
	}
	if _, err := os.Stat(s.In("dave", "notes.txt")); err == nil {
		t.Errorf("dave's file still reachable after his removal")
	}

	s.Stop()
	if got := mountsUnder(s.Root); len(got) != 0 {
		t.Errorf("mounts left under %s after SIGTERM: %v", s.Root, got)
	}
	if !strings.Contains(s.Stderr(), "stopped cleanly") {
		t.Logf("serve stderr does not say it stopped cleanly:\n%s", s.Stderr())
	}
	fsckClean(t, store)
}
