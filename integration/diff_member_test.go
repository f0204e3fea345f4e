package integration

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestRemovedMemberHandleAfterLookup is issue 24, bug 15: a member holds
// an append handle on a group file, is removed from the group, and looks
// the group up again (`ls groups/team-alpha`, which answers ENOENT). His
// next write on the handle must still be refused with EACCES, as without
// the lookup, and not fail with EIO.
func TestRemovedMemberHandleAfterLookup(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	setupTeam(t, store)
	s := startServe(t, store, "alice", "bob")

	mustWrite(t, s.In("alice", "groups", "team-alpha", "g.txt"), []byte("v1\n"), 0o644)
	f, err := os.OpenFile(s.In("bob", "groups", "team-alpha", "g.txt"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("bob opens the group file for appending: %v", err)
	}
	defer f.Close()

	adminOK(t, "group", "remove-member", "team-alpha", "bob", "--store", s.Store)

	if _, err := os.ReadDir(s.In("bob", "groups", "team-alpha")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("ls groups/team-alpha in bob's view after his removal: %v, want ENOENT", err)
	}
	if _, err := f.Write([]byte("x\n")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("bob's write on his open handle after the removal and a lookup: %v, want EACCES", err)
	}
	if got := string(mustRead(t, s.In("alice", "groups", "team-alpha", "g.txt"))); got != "v1\n" {
		t.Errorf("alice reads %q, want %q", got, "v1\n")
	}
}
