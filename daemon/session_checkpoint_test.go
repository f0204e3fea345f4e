package daemon

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSessionCheckpoints: a session with checkpoints is snapshotted when
// its tree changed since the last look, not otherwise, keeps the last N,
// and its checkpoints go with its close; bad settings are refused.
func TestSessionCheckpoints(t *testing.T) {
	st := openTestStore(t)
	l := NewLocal(st, nil)
	serveTestAdmin(t, st, l)
	c := dialTest(t, st)
	ctx := context.Background()
	if _, err := c.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []SessionOpenRequest{
		{User: "alice", ID: "x", CheckpointEvery: "1s"},
		{User: "alice", ID: "x", CheckpointEvery: "often"},
		{User: "alice", ID: "x", CheckpointKeep: 3},
	} {
		if _, err := c.OpenSession(ctx, bad); codeOf(t, err) != CodeInvalid {
			t.Errorf("open %+v: %v", bad, err)
		}
	}
	if _, err := c.OpenSession(ctx, SessionOpenRequest{User: "alice", ID: "w", CheckpointEvery: "10s", CheckpointKeep: 2}); err != nil {
		t.Fatal(err)
	}
	ss, err := st.Meta.GetSession("alice", "w")
	if err != nil || ss.CheckpointEvery != 10*time.Second || ss.CheckpointKeep != 2 {
		t.Fatalf("session record %+v %v", ss, err)
	}
	names := func() []string {
		list, err := l.ListSnapshots(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sn := range list {
			out = append(out, sn.Name)
		}
		return out
	}
	state := map[string]*checkpointState{}
	now := time.Now()
	look := func(after time.Duration) {
		t.Helper()
		if err := l.checkpoint(ss, state, "k", now.Add(after)); err != nil {
			t.Fatal(err)
		}
	}
	look(0)
	if n := names(); len(n) != 0 {
		t.Fatalf("the first look took %v", n)
	}
	putFile(t, st, ss.Root, "a", 1)
	look(5 * time.Second)
	if n := names(); len(n) != 0 {
		t.Fatalf("a look before the interval took %v", n)
	}
	look(10 * time.Second)
	look(20 * time.Second) // no change since
	if n := names(); len(n) != 1 || !strings.HasPrefix(n[0], "auto-w-") {
		t.Fatalf("after one change: %v", n)
	}
	first := names()[0]
	putFile(t, st, ss.Root, "b", 1)
	look(30 * time.Second)
	putFile(t, st, ss.Root, "c", 1)
	look(40 * time.Second)
	if n := names(); len(n) != 2 || strings.Contains(strings.Join(n, " "), first) {
		t.Fatalf("after three changes, keeping 2: %v (the first was %s)", n, first)
	}
	if _, err := c.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: "w"}); err != nil {
		t.Fatal(err)
	}
	if n := names(); len(n) != 0 {
		t.Fatalf("checkpoints left after the close: %v", n)
	}
}
