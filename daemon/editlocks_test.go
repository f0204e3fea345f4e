package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/shedfs/shedfs/acl"
)

// TestEditLockAdmin lists the live edit locks and releases one as the
// administrator, over the admin socket as the CLI does.
func TestEditLockAdmin(t *testing.T) {
	st := openTestStore(t)
	l := NewLocal(st, nil)
	serveTestAdmin(t, st, l)
	c := dialTest(t, st)
	ctx := context.Background()
	if _, err := c.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	u, err := st.Meta.GetUser("alice")
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, st, u.Roots.Output, "report.md", 10)
	n, err := st.Meta.Lookup(u.Roots.Output, "report.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.core.TakeEditLock(n.Ino, acl.Actor{User: "alice", Session: "run1"}, "mcp", "output/report.md", time.Hour); err != nil {
		t.Fatal(err)
	}
	ls, err := c.ListEditLocks(ctx, "")
	if err != nil || len(ls) != 1 || ls[0].Path != "output/report.md" || ls[0].Session != "run1" || ls[0].Door != "mcp" {
		t.Fatalf("list: %+v %v", ls, err)
	}
	if ls, err := c.ListEditLocks(ctx, "bob"); err != nil || len(ls) != 0 {
		t.Fatalf("list bob's: %+v %v", ls, err)
	}
	if _, err := c.ReleaseEditLock(ctx, EditLockReleaseRequest{User: "alice", Path: "output/nothing"}); codeOf(t, err) != CodeNotFound {
		t.Errorf("release a missing file: %v", err)
	}
	got, err := c.ReleaseEditLock(ctx, EditLockReleaseRequest{User: "alice", Path: "output/report.md"})
	if err != nil || got.Session != "run1" {
		t.Fatalf("release: %+v %v", got, err)
	}
	if d := l.core.CheckEditLock(n.Ino, acl.Actor{User: "bob"}); !d.Allowed() {
		t.Errorf("after the release: %v", d)
	}
	if _, err := c.ReleaseEditLock(ctx, EditLockReleaseRequest{User: "alice", Path: "output/report.md"}); codeOf(t, err) != CodeNotFound {
		t.Errorf("release twice: %v", err)
	}
	if ls, err := c.ListEditLocks(ctx, ""); err != nil || len(ls) != 0 {
		t.Fatalf("list after: %+v %v", ls, err)
	}
}
