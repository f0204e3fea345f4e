package integration

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSetattrUnchanged: chmod and chown to what a file already has (tar
// and cp -a do it for every file) are admitted like any other and change
// nothing, ctime included, and are not recorded as a chmod or chown; a
// real change moves ctime and is recorded, and a no-op chmod that the
// rules refuse is still refused.
func TestSetattrUnchanged(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	for _, u := range []string{"alice", "bob"} {
		adminOK(t, "user", "add", u, "--store", store)
	}
	s := startServe(t, store, "alice", "bob")
	p := s.In("alice", "share", "f")
	mustWrite(t, p, []byte("x"), 0o644)
	if out, code := tool(t, "setfattr", "-n", "user.shedfs.mode", "-v", "owner", p); code != 0 {
		t.Fatalf("setfattr -n user.shedfs.mode -v owner: exit %d %s", code, out)
	}
	ctime := func() time.Time {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return time.Unix(st.Ctim.Unix())
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	before := ctime()
	time.Sleep(20 * time.Millisecond)
	wantOK(t, "chmod to its mode", os.Chmod(p, 0o644))
	wantOK(t, "chown to its owner", os.Chown(p, int(st.Uid), int(st.Gid)))
	if got := ctime(); !got.Equal(before) {
		t.Errorf("ctime moved from %v to %v by a chmod and a chown that changed nothing", before, got)
	}
	wantErrno(t, "bob's chmod of alice's file to its mode", os.Chmod(s.In("bob", "share", "f"), 0o644), syscall.EPERM)
	wantOK(t, "chmod to a new mode", os.Chmod(p, 0o600))
	if got := ctime(); !got.After(before) {
		t.Errorf("ctime %v after a real chmod, want after %v", got, before)
	}
	recs := waitTrail(t, store, 5*time.Second, "the real chmod and bob's refusal", func(recs []trailRecord) bool {
		n := 0
		for _, r := range recs {
			if r.Path == "/share/f" && (r.Op == "chmod" || r.Result == "EPERM") {
				n++
			}
		}
		return n >= 2
	})
	n := 0
	for _, r := range recs {
		if r.Path == "/share/f" && (r.Op == "chmod" || r.Op == "chown") && r.Result == "ok" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d chmod/chown records of share/f, want 1 (the real change): %+v", n, recs)
	}
}
