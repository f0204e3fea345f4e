package integration

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestSetIDCleared checks that a view clears set-user-ID and set-group-ID
// where Linux does: views negotiate FUSE_HANDLE_KILLPRIV_V2, so the kernel
// leaves it to the daemon. A write, a truncate and an open with O_TRUNC by
// a caller without CAP_FSETID (uid 1000 here), a fallocate, and any chown,
// clear them; set-group-ID stays on a file without group execute, and
// root's writes keep both, as on a local disk.
func TestSetIDCleared(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice", "--uid", "1000", "--gid", "1000")
	openParents(t, v.Dir)
	script := "set -e\ncd '" + v.Dir + "'\n" + `
printf x > write; chmod 6755 write; printf y >> write
printf x > trunc; chmod 4644 trunc; truncate -s 0 trunc
printf x > otrunc; chmod 4755 otrunc; : > otrunc
printf x > chown; chmod 6755 chown; chown 1000:1000 chown
printf x > falloc; chmod 4755 falloc; fallocate -l 8192 falloc
printf x > sgid; chmod 2644 sgid; printf y >> sgid
printf x > both; chmod 6744 both; printf y >> both
printf x > plain; chmod 4755 plain; cat plain >/dev/null
exec 3>held; printf x >&3; chmod 4755 held; printf y >&3; exec 3>&-
stat -c '%n %a' write trunc otrunc chown falloc sgid both plain held
`
	out, err := runAs(t, 1000, 1000, script)
	if err != nil {
		t.Fatalf("as uid 1000: %v\n%s", err, out)
	}
	want := map[string]string{
		"write":  "755",  // a write clears both (group-executable)
		"trunc":  "644",  // ftruncate
		"otrunc": "755",  // open with O_TRUNC
		"chown":  "755",  // a chown, even to the same owner
		"falloc": "755",  // fallocate
		"sgid":   "2644", // set-group-ID without group execute stays
		"both":   "2744", // set-user-ID goes, set-group-ID stays
		"plain":  "4755", // reading changes nothing
		"held":   "755",  // a write clears a mode the open file holds
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, mode, _ := strings.Cut(line, " ")
		if w, ok := want[name]; ok && mode != w {
			t.Errorf("%s: mode %s after the change as uid 1000, want %s", name, mode, w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("%s: no mode in stat's output %q", name, out)
	}

	// Root has CAP_FSETID: its writes and truncates keep the bits.
	p := v.Path("root")
	mustWrite(t, p, []byte("x"), 0o755)
	if err := syscall.Chmod(p, 0o6755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := modeOf(t, p); got != 0o6755 {
		t.Errorf("root's write and truncate left mode %o, want 6755", got)
	}

	// A cleared bit is a mode change like any other: in the store (a
	// fresh mount of it shows it) and in the audit trail.
	v.Stop()
	v2 := startView(t, store, "alice", "--uid", "1000", "--gid", "1000")
	for _, name := range []string{"write", "held"} {
		if got := modeOf(t, v2.Path(name)); got != 0o755 {
			t.Errorf("%s: mode %o in a fresh view, want 755", name, got)
		}
	}
	v2.Stop()
	events, _, code := runCLI(t, "audit", "--store", store, "--op", "chmod", "--json")
	if code != 0 || !strings.Contains(events, `"/otrunc"`) {
		t.Errorf("audit --op chmod (exit %d) has no record of the cleared bits of /otrunc:\n%s", code, events)
	}
}

// TestSetIDRequests checks that the kernel stops asking for
// security.capability once it knows the daemon clears set-ID bits
// (FUSE_HANDLE_KILLPRIV_V2 makes the view SB_NOSEC): of several writes to
// a new file only the first is preceded by a GETXATTR, and a chown sends no
// GETATTR before its SETATTR. Before, each write cost one GETXATTR and each
// chown one GETATTR.
func TestSetIDRequests(t *testing.T) {
	t.Parallel()
	v, addr := startObservedView(t, newStore(t))
	f, err := os.OpenFile(v.Path("f"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := scrape(t, addr)
	for range 4 {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	afterWrites := scrape(t, addr)
	if got := requests(afterWrites, "write") - requests(before, "write"); got != 4 {
		t.Errorf("4 writes of 4 KiB came as %v WRITE requests, want 4", got)
	}
	if got := requests(afterWrites, "getxattr") - requests(before, "getxattr"); got != 1 {
		t.Errorf("4 writes to a new file cost %v GETXATTRs (security.capability), want 1", got)
	}
	if err := f.Chown(os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	afterChown := scrape(t, addr)
	if got := requests(afterChown, "getattr") - requests(afterWrites, "getattr"); got != 0 {
		t.Errorf("a chown cost %v GETATTRs, want 0", got)
	}
	if got := requests(afterChown, "setattr") - requests(afterWrites, "setattr"); got != 1 {
		t.Errorf("a chown cost %v SETATTRs, want 1", got)
	}
}

// requests sums shedfs_fuse_requests_total of one operation over its zones
// and results.
func requests(f families, op string) float64 {
	var sum float64
	for _, m := range f["shedfs_fuse_requests_total"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "op" && lp.GetValue() == op {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// modeOf is the permission and set-ID bits of path.
func modeOf(t testing.TB, path string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

// TestSetIDShared checks that a chown to -1:-1, which clears set-ID bits
// on Linux and reaches the daemon as a SETATTR that sets nothing, clears
// them only for a view that may write the file: a reader of another
// user's owner-mode file in share/ leaves it as it is.
func TestSetIDShared(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	for _, u := range []string{"alice", "bob"} {
		adminOK(t, "user", "add", u, "--store", store)
	}
	s := startServeWith(t, store, []string{"--share-mode", "owner"}, "alice", "bob")
	for _, name := range []string{"read", "own"} {
		mustWrite(t, s.In("alice", "share", name), []byte("x"), 0o755)
		if err := syscall.Chmod(s.In("alice", "share", name), 0o4755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(s.In("bob", "share", "read"), -1, -1); err != nil {
		t.Fatalf("chown -1:-1 in bob's view: %v", err)
	}
	if got := modeOf(t, s.In("alice", "share", "read")); got != 0o4755 {
		t.Errorf("bob's chown -1:-1 of alice's share/read left mode %o, want 4755", got)
	}
	if err := os.Chown(s.In("alice", "share", "own"), -1, -1); err != nil {
		t.Fatalf("chown -1:-1 in alice's view: %v", err)
	}
	if got := modeOf(t, s.In("alice", "share", "own")); got != 0o755 {
		t.Errorf("alice's chown -1:-1 of her share/own left mode %o, want 755", got)
	}
}
