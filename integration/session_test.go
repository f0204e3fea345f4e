package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs/daemon"
)

// sessionOpen opens a session through the CLI and waits for its view.
func (s *serveDaemon) sessionOpen(t *testing.T, user, id string, extra ...string) {
	t.Helper()
	args := append([]string{"session", "open", "--store", s.Store, "--user", user, "--id", id, "--json"}, extra...)
	out := adminOK(t, args...)
	var info struct {
		ID, User, Mountpoint string
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("session open --json: %q: %v", out, err)
	}
	if info.ID != id || info.Mountpoint != filepath.Join(s.Root, user+"@"+id) {
		t.Fatalf("session open answered %+v", info)
	}
	s.waitView(user + "@" + id)
}

// sessionAudit returns the records `shedfs audit --json` gives with extra.
func sessionAudit(t *testing.T, store string, extra ...string) []map[string]any {
	t.Helper()
	out := adminOK(t, append([]string{"audit", "--store", store, "--json"}, extra...)...)
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			var r map[string]any
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("audit line %q: %v", line, err)
			}
			recs = append(recs, r)
		}
	}
	return recs
}

// TestSessions runs two sessions of alice at once through the kernel:
// scratch trees apart, home/ the same inodes as her main view, uploads/
// per session, the main view showing both read-only, bob seeing none, a
// session quota stopping dd while alice's own has room, df showing the
// session's limit, audit records carrying the session, close to the trash
// and back with restore, close --keep, and a --ttl closing a session.
func TestSessions(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--quota", "100M", "--store", store)
	adminOK(t, "user", "add", "bob", "--store", store)
	addr := freeAddr(t)
	s := startServeWith(t, store, []string{"--metrics", addr}, "alice", "bob")
	s.sessionOpen(t, "alice", "s1", "--quota", "1M")
	s.sessionOpen(t, "alice", "s2")
	if got := scrape(t, addr).value(t, "shedfs_sessions_open"); got != 2 {
		t.Errorf("shedfs_sessions_open %v with two sessions", got)
	}
	S1 := func(e ...string) string { return s.In("alice@s1", e...) }
	S2 := func(e ...string) string { return s.In("alice@s2", e...) }
	A := func(e ...string) string { return s.In("alice", e...) }

	// Two sessions, one name each, no collision.
	mustWrite(t, S1("notes.txt"), []byte("one"), 0o644)
	mustWrite(t, S2("notes.txt"), []byte("two"), 0o644)
	if a, b := string(mustRead(t, S1("notes.txt"))), string(mustRead(t, S2("notes.txt"))); a != "one" || b != "two" {
		t.Errorf("s1 and s2 notes.txt: %q %q", a, b)
	}
	names := listNames(t, S1())
	for _, want := range []string{"home", "output", "uploads", "share", "groups", "trash", "notes.txt"} {
		if !slices.Contains(names, want) {
			t.Errorf("session root lists %v, without %s", names, want)
		}
	}

	// home/ is alice's private tree: the same inodes, a write seen at once.
	mustWrite(t, A("plan.md"), []byte("v1"), 0o644)
	if a, h := inoOf(t, A("plan.md")), inoOf(t, S1("home", "plan.md")); a != h {
		t.Errorf("plan.md: inode %d in the main view, %d in home/", a, h)
	}
	if got := string(mustRead(t, S1("home", "plan.md"))); got != "v1" {
		t.Errorf("home/plan.md reads %q", got)
	}
	wantOK(t, "s1: write home/plan.md", writeFile(S1("home", "plan.md"), []byte("v2")))
	if got := string(mustRead(t, A("plan.md"))); got != "v2" {
		t.Errorf("main view reads %q after a write through s1's home/", got)
	}
	wantOK(t, "main: write plan.md", writeFile(A("plan.md"), []byte("v3")))
	if got := string(mustRead(t, S2("home", "plan.md"))); got != "v3" {
		t.Errorf("s2's home/ reads %q after a write in the main view", got)
	}
	wantErrno(t, "s1: mv notes.txt home/", os.Rename(S1("notes.txt"), S1("home", "notes.txt")), syscall.EXDEV)
	wantErrno(t, "s1: mkdir home", os.Mkdir(S1("home"), 0o755), syscall.EEXIST)

	// uploads/ of a session lists only what was imported for it.
	src := filepath.Join(t.TempDir(), "a.csv")
	mustWrite(t, src, []byte("x,y\n"), 0o644)
	adminOK(t, "import", "--store", store, "--user", "alice", "--session", "s1", src)
	src2 := filepath.Join(t.TempDir(), "b.csv")
	mustWrite(t, src2, []byte("z\n"), 0o644)
	adminOK(t, "import", "--store", store, "--user", "alice", "--session", "s2", src2)
	if got := listNames(t, S1("uploads")); !slices.Equal(got, []string{"a.csv"}) {
		t.Errorf("s1 uploads/ lists %v, want [a.csv]", got)
	}
	if got := listNames(t, S2("uploads")); !slices.Equal(got, []string{"b.csv"}) {
		t.Errorf("s2 uploads/ lists %v, want [b.csv]", got)
	}
	// What an open session relies on stays where it is.
	wantErrno(t, "main: rmdir uploads/s2", os.Remove(A("uploads", "s2")), syscall.EPERM)
	wantErrno(t, "main: mv sessions", os.Rename(A("sessions"), A("old")), syscall.EPERM)
	wantErrno(t, "s1: mv home/sessions", os.Rename(S1("home", "sessions"), S1("home", "old")), syscall.EPERM)

	// The main view shows both sessions read-only; a session shows none.
	if got := listNames(t, A("sessions")); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Errorf("main view sessions/ lists %v", got)
	}
	if got := string(mustRead(t, A("sessions", "s1", "notes.txt"))); got != "one" {
		t.Errorf("main view sessions/s1/notes.txt reads %q", got)
	}
	wantErrno(t, "main: write sessions/s1/notes.txt", writeFile(A("sessions", "s1", "notes.txt"), []byte("no")), syscall.EACCES)
	wantErrno(t, "main: create in sessions/s2", os.WriteFile(A("sessions", "s2", "new"), nil, 0o644), syscall.EACCES)
	wantErrno(t, "main: rmdir sessions/s1", os.Remove(A("sessions", "s1")), syscall.EPERM)
	if got := listNames(t, S1("home", "sessions")); len(got) != 0 {
		t.Errorf("s1 sees sessions %v in home/sessions", got)
	}
	if _, err := os.Stat(S1("home", "sessions", "s2", "notes.txt")); err == nil {
		t.Error("s1 reaches s2's scratch through home/sessions/s2")
	}
	if got := listNames(t, s.In("bob")); slices.Contains(got, "sessions") {
		t.Errorf("bob's view lists %v", got)
	}

	// The session's quota stops dd; alice's own quota has room.
	out, err := runToolErr("dd", "if=/dev/zero", "of="+S1("big"), "bs=64k", "count=32")
	if err == nil || !strings.Contains(out, "quota") {
		t.Errorf("dd of 2 MiB into a 1 MiB session: %v\n%s", err, out)
	}
	if fi, err := os.Stat(S1("big")); err != nil || fi.Size() > 1<<20 {
		t.Errorf("big after dd: %v %v", fi, err)
	}
	mustWrite(t, A("room"), make([]byte, 2<<20), 0o644)
	if out, _ := tool(t, "df", "-B1", "--output=size", S1()); !strings.Contains(out, strconv.Itoa(1<<20)) {
		t.Errorf("df in the session root:\n%s", out)
	}

	// Every audit record made in s1 carries it.
	var inS1 []map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for len(inS1) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		inS1 = sessionAudit(t, store, "--session", "s1")
	}
	home := false
	for _, r := range inS1 {
		home = home || r["zone"] == "private:alice" && r["path"] == "/home/plan.md"
	}
	if !home {
		t.Errorf("audit --session s1 has no record of the write to home/plan.md: %v", inS1)
	}
	// Changes to s1's scratch are made through s1's view only (the main
	// view's refusals there carry no session: it acted).
	for _, r := range sessionAudit(t, store, "--zone", "session") {
		if r["zone"] == "session:alice/s1" && r["result"] == "ok" && r["session"] != "s1" {
			t.Errorf("change in s1's scratch without its session: %v", r)
		}
		if r["zone"] == "session:alice/s1" && r["session"] == nil && r["view"] != "alice" {
			t.Errorf("record without a view: %v", r)
		}
	}

	// close --keep leaves s2's scratch in home/sessions/s2, writable.
	adminOK(t, "session", "close", "--store", store, "--user", "alice", "--keep", "s2")
	if _, ok := findMount(S2()); ok {
		t.Error("s2's view still mounted after close")
	}
	within2s(t, "kept s2 notes.txt", func() bool {
		b, err := os.ReadFile(A("sessions", "s2", "notes.txt"))
		return err == nil && string(b) == "two"
	})
	wantOK(t, "main: write the kept notes.txt", writeFile(A("sessions", "s2", "notes.txt"), []byte("kept")))

	// close moves s1's scratch to the trash; restore brings it back.
	time.Sleep(50 * time.Millisecond)
	before := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(50 * time.Millisecond)
	adminOK(t, "session", "close", "--store", store, "--user", "alice", "s1")
	within2s(t, "sessions/s1 gone", func() bool {
		_, err := os.Stat(A("sessions", "s1"))
		return os.IsNotExist(err)
	})
	if out := adminOK(t, "trash", "list", "--store", store, "--user", "alice"); !strings.Contains(out, "sessions/s1/notes.txt") {
		t.Errorf("trash list after close:\n%s", out)
	}
	adminOK(t, "restore", "--store", store, "--user", "alice", "--at", before, "sessions/s1")
	within2s(t, "restored s1 notes.txt", func() bool {
		b, err := os.ReadFile(A("sessions", "s1", "notes.txt"))
		return err == nil && string(b) == "one"
	})

	// A --ttl of 2 s closes the session.
	s.sessionOpen(t, "alice", "s3", "--ttl", "2s")
	deadline = time.Now().Add(6 * time.Second)
	for {
		_, mounted := findMount(s.In("alice@s3"))
		listed := adminOK(t, "session", "list", "--store", store, "--user", "alice", "--json")
		if !mounted && !strings.Contains(listed, `"s3"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("s3 still open 6 s after a 2 s ttl: mounted %v, list %s", mounted, listed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// scrape also fails on a label with '/': sessions get none.
	m := scrape(t, addr)
	if open, closes := m.value(t, "shedfs_sessions_open"), m.value(t, "shedfs_session_closes_total"); open != 0 || closes != 3 {
		t.Errorf("sessions open %v, closes %v after three closes", open, closes)
	}
	s.Stop()
	fsckClean(t, store)
}

// TestSessionRestart: serve remounts the open sessions when it starts
// again, with their files.
func TestSessionRestart(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	s.sessionOpen(t, "alice", "s1")
	mustWrite(t, s.In("alice@s1", "f"), []byte("kept across restarts"), 0o644)
	s.Stop()
	s = startServe(t, store, "alice", "alice@s1")
	if got := string(mustRead(t, s.In("alice@s1", "f"))); got != "kept across restarts" {
		t.Errorf("after restart: %q", got)
	}
	s.Stop()

	// Without a daemon, open works on the store; mount --session mounts
	// the one session's view in the foreground.
	adminOK(t, "session", "open", "--store", store, "--user", "alice", "--id", "s2")
	v := startView(t, store, "alice", "--session", "s2")
	mustWrite(t, v.Path("g"), []byte("in s2"), 0o644)
	if got := listNames(t, v.Path("home", "sessions")); len(got) != 0 {
		t.Errorf("s2's home/sessions lists %v", got)
	}
	if _, err := os.Stat(v.Path("f")); !os.IsNotExist(err) {
		t.Errorf("s2 sees s1's f: %v", err)
	}
	v.Stop()
}

// TestSessionHomeNegativeEntries: a name alice's main view was told is
// absent appears there at once when a session view creates it in home/,
// and the other way round — also for a name looked up before her first
// session opened. (Kernels keep absent names for an hour; the views that
// hold one must be told.)
func TestSessionHomeNegativeEntries(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	A := func(e ...string) string { return s.In("alice", e...) }
	absent := func(p string) {
		t.Helper()
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("stat %s: %v, want ENOENT", p, err)
		}
	}
	absent(A("before.txt")) // looked up before any session
	s.sessionOpen(t, "alice", "s1")
	S1 := func(e ...string) string { return s.In("alice@s1", e...) }
	absent(A("main.txt"))
	absent(S1("home", "sess.txt"))

	mustWrite(t, S1("home", "before.txt"), []byte("b"), 0o644)
	mustWrite(t, S1("home", "main.txt"), []byte("m"), 0o644)
	mustWrite(t, A("sess.txt"), []byte("s"), 0o644)
	for p, want := range map[string]string{A("before.txt"): "b", A("main.txt"): "m", S1("home", "sess.txt"): "s"} {
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Errorf("%s after a create in the other view: %q, %v", p, got, err)
		}
	}
}

// TestSessionForcedCloseHeldOpen: a session whose file is held open is
// closed by its --ttl and by close --force at once, whatever holds it:
// the view is detached and its connection aborted, so the holder's next
// read fails with ENOTCONN, and no other session waits meanwhile (an
// unrelated open and close take well under a second; before, the first
// waited 30 s for the kernel to let the busy view go, holding the
// daemon's lock).
func TestSessionForcedCloseHeldOpen(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "dave", "--store", store)
	adminOK(t, "user", "add", "bob", "--store", store)
	s := startServe(t, store, "dave", "bob")
	s.sessionOpen(t, "dave", "t1", "--ttl", "2s")
	s.sessionOpen(t, "dave", "t2")
	mustWrite(t, s.In("dave@t1", "f"), []byte("d\n"), 0o644)
	mustWrite(t, s.In("dave@t2", "g"), []byte("g\n"), 0o644)
	held1, err := os.Open(s.In("dave@t1", "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer held1.Close()
	held2, err := os.Open(s.In("dave@t2", "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer held2.Close()
	open := func(user, id string) bool {
		out := adminOK(t, "session", "list", "--store", store, "--user", user, "--json")
		return strings.Contains(out, `"`+id+`"`)
	}
	timed := func(what string, fn func()) {
		t.Helper()
		start := time.Now()
		fn()
		took := time.Since(start)
		t.Logf("%s took %v", what, took.Round(time.Millisecond))
		if took > 3*time.Second {
			t.Errorf("%s took %v while a session's file is held open", what, took)
		}
	}

	// t1's time is up while f is held open: it closes, and bob's open
	// does not wait for it.
	time.Sleep(3 * time.Second)
	timed("session open of bob while dave@t1 expires", func() { s.sessionOpen(t, "bob", "b1") })
	deadline := time.Now().Add(5 * time.Second)
	for open("dave", "t1") {
		if time.Now().After(deadline) {
			t.Fatalf("dave@t1 still open 8 s after its 2 s ttl, its file held open\nstderr:\n%s", s.Stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, ok := findMount(s.In("dave@t1")); ok {
		t.Error("dave@t1 still mounted after it expired")
	}
	buf := make([]byte, 8)
	_, err = held1.ReadAt(buf, 0)
	wantErrno(t, "read a file of an expired session held open", err, syscall.ENOTCONN)

	// close --force ends t2 at once, with g held open.
	timed("session close --force of dave@t2 with a file held open", func() {
		adminOK(t, "session", "close", "--store", store, "--user", "dave", "--force", "t2")
	})
	if open("dave", "t2") {
		t.Error("dave@t2 still open after close --force")
	}
	if _, ok := findMount(s.In("dave@t2")); ok {
		t.Error("dave@t2 still mounted after close --force")
	}
	_, err = held2.ReadAt(buf, 0)
	wantErrno(t, "read a file of a force-closed session held open", err, syscall.ENOTCONN)
	// The handles of the aborted views went with them: their kernels
	// will never release them, and nothing else is open.
	openFiles := func() int {
		out, errOut, code := runCLI(t, "status", "--json", "--store", store)
		if code != 0 {
			t.Fatalf("status: exit %d: %s", code, errOut)
		}
		var st struct {
			OpenFiles int `json:"open_files"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		return st.OpenFiles
	}
	for deadline := time.Now().Add(2 * time.Second); openFiles() != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%d files still open in the daemon after their views were aborted", openFiles())
			break
		}
	}
	timed("session close of bob@b1", func() {
		adminOK(t, "session", "close", "--store", store, "--user", "bob", "b1")
	})
	out := adminOK(t, "trash", "list", "--store", store, "--user", "dave")
	for _, want := range []string{"sessions/t1/f", "sessions/t2/g"} {
		if !strings.Contains(out, want) {
			t.Errorf("trash of dave without %s:\n%s", want, out)
		}
	}
	s.Stop()
	fsckClean(t, store)
}

// TestSessionTrashKeptAtClose: what a session removed is in its user's
// trash after close, with --keep or without, under sessions/ID/: the
// main view lists it in trash/ and an mv brings it back (before, the
// session's own trash was purged at close).
func TestSessionTrashKeptAtClose(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "erin", "--store", store)
	s := startServe(t, store, "erin")
	A := func(e ...string) string { return s.In("erin", e...) }
	for _, c := range []struct{ id, keep string }{{"e1", ""}, {"e2", "--keep"}} {
		s.sessionOpen(t, "erin", c.id)
		mustWrite(t, s.In("erin@"+c.id, "imp"), []byte("important "+c.id), 0o644)
		wantOK(t, "rm imp in "+c.id, os.Remove(s.In("erin@"+c.id, "imp")))
		args := []string{"session", "close", "--store", store, "--user", "erin", c.id}
		if c.keep != "" {
			args = append(args, c.keep)
		}
		adminOK(t, args...)
		out := adminOK(t, "trash", "list", "--store", store, "--user", "erin")
		if !strings.Contains(out, "sessions/"+c.id+"/imp") {
			t.Errorf("trash of erin after close %s of %s without sessions/%s/imp:\n%s", c.keep, c.id, c.id, out)
		}
	}
	var kept string
	within2s(t, "trash/sessions/e2/imp@… in the main view", func() bool {
		names, _ := os.ReadDir(A("trash", "sessions", "e2"))
		for _, n := range names {
			if strings.HasPrefix(n.Name(), "imp@") {
				kept = n.Name()
			}
		}
		return kept != ""
	})
	if kept != "" {
		wantOK(t, "mv the kept imp back", os.Rename(A("trash", "sessions", "e2", kept), A("sessions", "e2", "imp")))
		if got := string(mustRead(t, A("sessions", "e2", "imp"))); got != "important e2" {
			t.Errorf("restored imp reads %q", got)
		}
	}
	s.Stop()
	fsckClean(t, store)
}

// TestSessionCloseKilled: serve killed (-9) while a close without --keep
// moves a scratch tree of 5,000 files to the trash: the next serve
// finishes the close before it mounts anything, so the files are all in
// the trash and none is left live in sessions/ID (before, they stayed
// there). The move takes a few seconds; the test watches it through the
// admin socket and the main view, and if a loaded machine let a close
// finish before it was seen half-way, it tries again with a new session
// (the finished close's files are in the trash, as they should be).
func TestSessionCloseKilled(t *testing.T) {
	t.Parallel()
	const files = 5000
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	A := func(e ...string) string { return s.In("alice", e...) }
	admin, err := daemon.Dial(store)
	if err != nil {
		t.Fatalf("admin socket of serve: %v", err)
	}
	// listed reports whether session id is still open (listed).
	listed := func(id string) bool {
		list, err := admin.ListSessions(context.Background(), "alice")
		if err != nil {
			t.Fatalf("list sessions: %v", err)
		}
		return slices.ContainsFunc(list, func(ss daemon.SessionInfo) bool { return ss.ID == id })
	}
	// left counts the files of session id still live in sessions/id.
	left := func(id string) int {
		n := 0
		for d := range 10 {
			names, _ := os.ReadDir(A("sessions", id, "d"+strconv.Itoa(d)))
			n += len(names)
		}
		return n
	}
	// killedHalfWay fills session id, closes it, and kills serve once
	// the tree is in sessions/id and part of it in the trash; false if
	// the close was done before that was seen.
	killedHalfWay := func(id string) bool {
		s.sessionOpen(t, "alice", id)
		for d := range 10 {
			dir := s.In("alice@"+id, "d"+strconv.Itoa(d))
			mustMkdir(t, dir, 0o755)
			for i := range files / 10 {
				if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		closing := exec.Command(shedfsBin, "session", "close", "--store", store, "--user", "alice", id)
		closing.Env = childEnv(nil)
		if err := closing.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- closing.Wait() }()
		start := time.Now()
		for {
			if !listed(id) {
				if n := left(id); n > 0 && n < files {
					killServe(s)
					<-done
					t.Logf("killed with %d of %d files left in sessions/%s, %v after close began", n, files, id, time.Since(start).Round(time.Millisecond))
					return true
				}
			}
			select {
			case err := <-done:
				t.Logf("close of %s done (%v) in %v before it was seen half-way", id, err, time.Since(start).Round(time.Millisecond))
				return false
			default:
			}
			if time.Since(start) > time.Minute {
				t.Fatalf("close of %s neither done nor seen half-way through the trash in a minute (%d files left)", id, left(id))
			}
		}
	}
	id := ""
	for try := range 3 {
		if killedHalfWay("big" + strconv.Itoa(try)) {
			id = "big" + strconv.Itoa(try)
			break
		}
	}
	if id == "" {
		t.Fatal("3 closes of 5,000 files each done before they were seen half-way")
	}

	s = startServe(t, store, "alice")
	if _, err := os.Stat(A("sessions", id)); !os.IsNotExist(err) {
		t.Errorf("sessions/%s after the restart: %v (%d files left)", id, err, left(id))
	}
	var trash []map[string]any
	if err := json.Unmarshal([]byte(adminOK(t, "trash", "list", "--store", store, "--user", "alice", "--json")), &trash); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, e := range trash {
		if p, _ := e["path"].(string); strings.HasPrefix(p, "sessions/"+id+"/") {
			kept++
		}
	}
	if kept != files {
		t.Errorf("%d files of the session in the trash after the restart, want %d", kept, files)
	}
	s.Stop()
	fsckClean(t, store)
}

// TestSessionForcedCloseBound: a session whose view is also bind-mounted
// elsewhere (into a container, or a pod's volume by the CSI driver) is
// closed by close --force and by its --ttl at once, and the bind then
// fails with ENOTCONN. Before, the view's own mountpoint went but the
// bind kept its connection serving, and the close waited 30 s for the
// view to stop, then failed with the session still open.
func TestSessionForcedCloseBound(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "dave", "--store", store)
	s := startServe(t, store, "dave")
	s.sessionOpen(t, "dave", "b1")
	s.sessionOpen(t, "dave", "b2", "--ttl", "2s")
	bind := func(id string) string {
		dir := filepath.Join(t.TempDir(), "bound")
		mustMkdir(t, dir, 0o755)
		if err := syscall.Mount(s.In("dave@"+id), dir, "", syscall.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lazyUnmount(dir) })
		mustWrite(t, filepath.Join(dir, "f"), []byte("f\n"), 0o644)
		return dir
	}
	b1, b2 := bind("b1"), bind("b2")
	open := func(id string) bool {
		return strings.Contains(adminOK(t, "session", "list", "--store", store, "--user", "dave", "--json"), `"`+id+`"`)
	}

	start := time.Now()
	adminOK(t, "session", "close", "--store", store, "--user", "dave", "--force", "b1")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("close --force of a bound session took %v", took)
	}
	if open("b1") {
		t.Error("dave@b1 still open after close --force")
	}
	_, err := os.Stat(filepath.Join(b1, "f"))
	wantErrno(t, "stat in the bind of a force-closed session", err, syscall.ENOTCONN)

	deadline := time.Now().Add(8 * time.Second)
	for open("b2") {
		if time.Now().After(deadline) {
			t.Fatalf("dave@b2 still open 8 s after its 2 s ttl, its view bound elsewhere\nstderr:\n%s", s.Stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err = os.Stat(filepath.Join(b2, "f"))
	wantErrno(t, "stat in the bind of an expired session", err, syscall.ENOTCONN)
	s.Stop()
	fsckClean(t, store)
}
