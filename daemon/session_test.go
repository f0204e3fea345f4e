package daemon

import (
	"context"
	"testing"
)

// TestSessionsOverSocket opens, lists and closes sessions through the
// admin API as the CLI does with a daemon, on a store without views:
// refusals carry their codes, close without --keep sends the scratch to
// the trash, with --keep it stays in sessions/ID, and a user with an
// open session is not removed.
func TestSessionsOverSocket(t *testing.T) {
	st := openTestStore(t)
	l := NewLocal(st, nil)
	serveTestAdmin(t, st, l)
	c := dialTest(t, st)
	ctx := context.Background()
	if _, err := c.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []SessionOpenRequest{
		{User: "nobody", ID: "s1"},
		{User: "alice", ID: "Bad/Id"},
		{User: "alice", ID: "s1", TTL: "soon"},
		{User: "alice", ID: "s1", Quota: Amount{Bytes: -1}},
	} {
		if _, err := c.OpenSession(ctx, bad); err == nil {
			t.Errorf("open %+v succeeded", bad)
		}
	}
	s1, err := c.OpenSession(ctx, SessionOpenRequest{User: "alice", ID: "s1", TTL: "1h", Quota: Amount{Bytes: 1 << 20}})
	if err != nil || s1.ID != "s1" || s1.Expires == nil || s1.Quota.Bytes != 1<<20 || s1.Usage.Inodes != 1 {
		t.Fatalf("open s1: %+v %v", s1, err)
	}
	anon, err := c.OpenSession(ctx, SessionOpenRequest{User: "alice"})
	if err != nil || len(anon.ID) != 8 {
		t.Fatalf("open without id: %+v %v", anon, err)
	}
	if _, err := c.OpenSession(ctx, SessionOpenRequest{User: "alice", ID: "s1"}); codeOf(t, err) != CodeExists {
		t.Errorf("open s1 twice: %v", err)
	}
	ss, err := st.Meta.GetSession("alice", "s1")
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, st, ss.Root, "notes.txt", 100)
	list, err := c.ListSessions(ctx, "alice")
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := c.RemoveUser(ctx, "alice", true); codeOf(t, err) != CodeBusy {
		t.Errorf("remove a user with open sessions: %v", err)
	}

	closed, err := c.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: "s1"})
	if err != nil || closed.Kept != "trash" {
		t.Fatalf("close s1: %+v %v", closed, err)
	}
	trash, err := c.ListTrash(ctx, TrashListRequest{User: "alice"})
	if err != nil || len(trash) != 1 || trash[0].Why != TrashSessionClose {
		t.Errorf("trash after close: %+v %v", trash, err)
	}
	if _, err := c.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: "s1"}); codeOf(t, err) != CodeNotFound {
		t.Errorf("close s1 twice: %v", err)
	}
	if _, err := c.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: anon.ID, Keep: true}); err != nil {
		t.Fatal(err)
	}
	if n, _, err := l.resolve("alice", "sessions/"+anon.ID); err != nil || !n.IsDir() {
		t.Errorf("kept session: %v %v", n, err)
	}
	if _, err := c.OpenSession(ctx, SessionOpenRequest{User: "alice", ID: anon.ID}); codeOf(t, err) != CodeExists {
		t.Errorf("open the id of a kept session: %v", err)
	}
}
