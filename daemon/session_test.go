package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
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

// TestSessionCloseFinishedAtStart: a close stopped half-way, as a kill -9
// while the closed scratch tree goes to the trash name by name would stop
// it, is finished at the next start: every file in the trash under
// sessions/ID, sessions/ID gone, the mark dropped, fsck clean. A close
// marked just before the store changed (the session still open) is
// finished too, kept as it asked. Meanwhile the user cannot be removed.
func TestSessionCloseFinishedAtStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := OpenStore(dir, OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLocal(st, nil)
	ctx := context.Background()
	if _, err := l.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2", "s3"} {
		if _, err := l.OpenSession(ctx, SessionOpenRequest{User: "alice", ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	s1, err := st.Meta.GetSession("alice", "s1")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := st.Meta.Create(s1.Root, "d", &shedfs.Inode{Mode: syscall.S_IFDIR | 0o755}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const files = 40
	for i := range files {
		parent := s1.Root
		if i%2 == 1 {
			parent = sub.Ino
		}
		putBlobFile(t, st, parent, fmt.Sprintf("f%02d", i), 100)
	}
	s2, err := st.Meta.GetSession("alice", "s2")
	if err != nil {
		t.Fatal(err)
	}
	putBlobFile(t, st, s2.Root, "kept.txt", 10)

	stop := errors.New("killed")
	steps := 0
	l.trashStep = func() error {
		if steps++; steps > files/2 {
			return stop
		}
		return nil
	}
	if _, err := l.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: "s1"}); !errors.Is(err, stop) {
		t.Fatalf("close stopped half-way: %v", err)
	}
	if _, err := st.Meta.GetSession("alice", "s1"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("s1 after its close stopped in the trash step: %v", err)
	}
	if _, _, err := l.resolve("alice", "sessions/s1"); err != nil {
		t.Fatalf("sessions/s1 before the restart: %v", err)
	}
	// A close that failed half-way is finished by closing again.
	s3, err := st.Meta.GetSession("alice", "s3")
	if err != nil {
		t.Fatal(err)
	}
	putBlobFile(t, st, s3.Root, "a", 10)
	putBlobFile(t, st, s3.Root, "b", 10)
	steps = files
	if _, err := l.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: "s3"}); !errors.Is(err, stop) {
		t.Fatalf("close of s3 stopped: %v", err)
	}
	l.trashStep = nil
	if info, err := l.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: "s3"}); err != nil || info.Kept != "trash" {
		t.Fatalf("close s3 again: %+v %v", info, err)
	}
	if _, _, err := l.resolve("alice", "sessions/s3"); err == nil {
		t.Error("sessions/s3 after its close was finished")
	}
	if _, err := l.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: "s3"}); codeOf(t, err) != CodeNotFound {
		t.Errorf("close s3 a third time: %v", err)
	}
	// Killed right after marking s2's close.
	if err := st.Meta.BeginSessionClose(s2, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RemoveUser(ctx, "alice", true); codeOf(t, err) != CodeBusy {
		t.Errorf("remove a user whose session close is under way: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = OpenStore(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l = NewLocal(st, nil)
	if err := l.finishSessionCloses(); err != nil {
		t.Fatal(err)
	}
	if left, err := st.Meta.SessionCloses(""); err != nil || len(left) != 0 {
		t.Fatalf("closes under way after the start: %+v %v", left, err)
	}
	if _, _, err := l.resolve("alice", "sessions/s1"); !errors.Is(err, syscall.ENOENT) && codeOf(t, err) != CodeNotFound {
		t.Errorf("sessions/s1 after the start: %v", err)
	}
	trash, err := l.ListTrash(ctx, TrashListRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	inTrash := 0
	for _, e := range trash {
		if strings.HasPrefix(e.Path, "sessions/s1/") && e.Why == TrashSessionClose {
			inTrash++
		}
	}
	if inTrash != files {
		t.Errorf("%d files of s1 in the trash after the start, want %d: %+v", inTrash, files, trash)
	}
	if _, err := st.Meta.GetSession("alice", "s2"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("s2, whose close was marked, after the start: %v", err)
	}
	if n, _, err := l.resolve("alice", "sessions/s2/kept.txt"); err != nil || n.Size != 10 {
		t.Errorf("s2 closed with keep: kept.txt %+v %v", n, err)
	}
	rep, err := st.Meta.Check(st.Blobs, false, nil)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("fsck after the start: %+v %v", rep, err)
	}
}

// putBlobFile is putFile with a blob of the file's size.
func putBlobFile(t testing.TB, st *Store, dir uint64, name string, size uint64) {
	t.Helper()
	putFile(t, st, dir, name, size)
	n, err := st.Meta.Lookup(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Blobs.Truncate(n.Ino, int64(size)); err != nil {
		t.Fatal(err)
	}
}
