package daemon

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// TestSessionForkOverSocket opens forks through the admin API: one of a
// snapshot of a session (--from) and one of the session as it is
// (--fork), each with the source's tree and content; the refusals carry
// their codes; a fork kept at close keeps its content.
func TestSessionForkOverSocket(t *testing.T) {
	st := openTestStore(t)
	l := NewLocal(st, nil)
	serveTestAdmin(t, st, l)
	c := dialTest(t, st)
	ctx := context.Background()
	if _, err := c.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenSession(ctx, SessionOpenRequest{User: "alice", ID: "src"}); err != nil {
		t.Fatal(err)
	}
	ss, err := st.Meta.GetSession("alice", "src")
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, st, ss.Root, "notes.txt", 11)
	n, err := st.Meta.Lookup(ss.Root, "notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Blobs.OpenFile(n.Ino, true)
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("hello world")
	b.Close()
	if _, err := c.CreateSnapshot(ctx, SnapshotCreateRequest{User: "alice", Session: "src", Name: "before"}); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []struct {
		req  SessionOpenRequest
		code string
	}{
		{SessionOpenRequest{User: "alice", ID: "x", From: "before", Fork: "src"}, CodeInvalid},
		{SessionOpenRequest{User: "alice", ID: "x", From: "nosuch"}, CodeNotFound},
		{SessionOpenRequest{User: "alice", ID: "x", Fork: "nosuch"}, CodeNotFound},
		{SessionOpenRequest{User: "alice", ID: "x", Fork: "x"}, CodeInvalid},
	} {
		if _, err := c.OpenSession(ctx, bad.req); codeOf(t, err) != bad.code {
			t.Errorf("open %+v: %v, want %s", bad.req, err, bad.code)
		}
	}
	if list, _ := c.ListSessions(ctx, "alice"); len(list) != 1 {
		t.Fatalf("a refused fork left a session: %+v", list)
	}

	for _, req := range []SessionOpenRequest{
		{User: "alice", ID: "f1", From: "before"},
		{User: "alice", ID: "f2", Fork: "src"},
	} {
		info, err := c.OpenSession(ctx, req)
		if err != nil {
			t.Fatalf("open %+v: %v", req, err)
		}
		if info.Forked == nil || info.Forked.Entries != 2 || info.Forked.Bytes != 11 || info.From != req.From || info.Fork != req.Fork {
			t.Fatalf("open %+v: %+v forked %+v", req, info, info.Forked)
		}
		fs, _ := st.Meta.GetSession("alice", req.ID)
		fn, err := st.Meta.Lookup(fs.Root, "notes.txt")
		if err != nil || fn.Size != 11 {
			t.Fatalf("%s: notes.txt %+v %v", req.ID, fn, err)
		}
		if got, _ := os.ReadFile(st.Blobs.Path(fn.Ino)); string(got) != "hello world" {
			t.Fatalf("%s: notes.txt holds %q", req.ID, got)
		}
		if fs.From != req.From || fs.Fork != req.Fork {
			t.Fatalf("%s: session record %+v", req.ID, fs)
		}
	}
	// The diff of a fork not changed since is empty; a session that
	// started empty shows all of it as added.
	if d, err := c.DiffSession(ctx, "alice", "f1", "true"); err != nil || len(d.Added)+len(d.Removed)+len(d.Modified)+len(d.Renamed)+len(d.Modes) != 0 || d.Patch != "" {
		t.Errorf("diff of an unchanged fork: %+v %v", d, err)
	}
	if d, err := c.DiffSession(ctx, "alice", "src", "true"); err != nil || len(d.Added) != 1 || d.Added[0].Path != "notes.txt" ||
		d.Patch != "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+hello world\n\\ No newline at end of file\n" {
		t.Errorf("diff of a session that started empty: %+v %q %v", d, d.Patch, err)
	}
	if _, err := c.DiffSession(ctx, "alice", "nosuch", ""); codeOf(t, err) != CodeNotFound {
		t.Errorf("diff of no session: %v", err)
	}
	if _, err := c.ApplySession(ctx, SessionApplyRequest{User: "alice", ID: "src", To: "nosuch"}); codeOf(t, err) != CodeInvalid {
		t.Errorf("apply to no directory: %v", err)
	}
	if r, err := c.ApplySession(ctx, SessionApplyRequest{User: "alice", ID: "src", To: "", DryRun: true}); err != nil || len(r.Created) != 1 || r.Created[0] != "notes.txt" {
		t.Errorf("apply --dry-run: %+v %v", r, err)
	}

	if _, err := c.DeleteSnapshot(ctx, "alice", startName("f1")); codeOf(t, err) != CodeBusy {
		t.Errorf("delete the start snapshot of an open fork: %v", err)
	}

	// Kept at close, the fork's file is renumbered into alice's tree and
	// stays in the source's fork group.
	if _, err := c.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: "f2", Keep: true}); err != nil {
		t.Fatal(err)
	}
	kept, _, err := l.resolve("alice", "sessions/f2/notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(st.Blobs.Path(kept.Ino)); string(got) != "hello world" {
		t.Fatalf("kept fork's notes.txt holds %q", got)
	}
	group, err := st.Meta.ForkGroup(kept.Ino)
	if err != nil || len(group) == 0 || group[0] != n.Ino {
		t.Fatalf("fork group of the kept file: %v %v, want the source %d first", group, err, n.Ino)
	}
}

// TestForkCutShort: a session whose fork a crash cut short (no start
// snapshot) is closed to the trash at the next start; a completed fork
// and a plain session stay open.
func TestForkCutShort(t *testing.T) {
	st := openTestStore(t)
	l := NewLocal(st, nil)
	ctx := context.Background()
	if _, err := l.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.OpenSession(ctx, SessionOpenRequest{User: "alice", ID: "src"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.OpenSession(ctx, SessionOpenRequest{User: "alice", ID: "done", Fork: "src"}); err != nil {
		t.Fatal(err)
	}
	cut, err := st.Meta.OpenSessionAs(metadata.Session{User: "alice", ID: "cut", Fork: "src", Start: startName("cut")}, shedfs.Limit{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.core.Admin("alice").SessionOpened(cut); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, cut.Root, "partial", 3)
	if err := l.finishSessionCloses(); err != nil {
		t.Fatal(err)
	}
	var open []string
	list, _ := st.Meta.ListSessions("alice")
	for _, ss := range list {
		open = append(open, ss.ID)
	}
	if strings.Join(open, " ") != "done src" {
		t.Fatalf("open sessions after the start: %v, want done and src", open)
	}
	trash, err := l.ListTrash(ctx, TrashListRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range trash {
		found = found || e.Path == "sessions/cut/partial"
	}
	if !found {
		t.Fatalf("the cut fork's tree is not in the trash: %+v", trash)
	}
}
