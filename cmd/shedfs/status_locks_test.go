package main

import (
	"strings"
	"testing"

	"github.com/shedfs/shedfs/daemon"
)

// TestPrintLocksDaemon: on a store several daemons share each lock names
// its daemon in a DAEMON column; on one daemon's own store there is none.
func TestPrintLocksDaemon(t *testing.T) {
	one := daemon.LockInfo{User: "alice", Path: "/groups/team-alpha/f", Ino: 4096, Kind: "flock", Type: "write", PID: 19075}
	var b strings.Builder
	if err := printLocks(&b, []daemon.LockInfo{one}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "DAEMON") {
		t.Errorf("a lone daemon's locks with a DAEMON column:\n%s", b.String())
	}
	mine, theirs := one, one
	mine.Daemon, theirs.Daemon, theirs.User = "h1 pid 10", "h2 pid 20", "bob"
	b.Reset()
	if err := printLocks(&b, []daemon.LockInfo{mine, theirs}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasSuffix(lines[1], "DAEMON") ||
		!strings.HasSuffix(lines[2], "h1 pid 10") || !strings.HasSuffix(lines[3], "h2 pid 20") {
		t.Errorf("shared store's locks:\n%s", b.String())
	}
}
