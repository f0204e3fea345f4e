package agentfs

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shedfs/shedfs/acl"
)

// TestContent writes, reads in pieces, appends, edits and copies files
// through the core.
func TestContent(t *testing.T) {
	fx := newFixture(t)
	f := fx.fs(t, "alice", nil)
	ctx := context.Background()
	if _, err := f.Write(ctx, "output/notes.md", []byte("one\ntwo\n"), CreateOnly, ""); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "create an existing file", func() error {
		_, err := f.Write(ctx, "output/notes.md", []byte("x"), CreateOnly, "")
		return err
	}(), CodeExists)
	if _, err := f.Write(ctx, "output/notes.md", []byte("three\n"), Append, ""); err != nil {
		t.Fatal(err)
	}
	c, err := f.Read(ctx, "output/notes.md", 0, 5, false)
	if err != nil || c.Text != "one\nt" || c.EOF || c.NextOffset != 5 || c.Size != 14 || c.Encoding != "text" {
		t.Fatalf("first piece: %+v %v", c, err)
	}
	c, err = f.Read(ctx, "output/notes.md", c.NextOffset, 100, false)
	if err != nil || c.Text != "wo\nthree\n" || !c.EOF {
		t.Fatalf("second piece: %+v %v", c, err)
	}
	if _, n, err := f.Replace(ctx, "output/notes.md", "two", "TWO", false, 1<<20); err != nil || n != 1 {
		t.Fatalf("replace: %d %v", n, err)
	}
	wantCode(t, "replace what is not there", func() error {
		_, _, err := f.Replace(ctx, "output/notes.md", "four", "x", false, 1<<20)
		return err
	}(), CodeInvalidArgument)
	if _, err := f.Insert(ctx, "output/notes.md", 1, "zero", 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Insert(ctx, "output/notes.md", 0, "four", 1<<20); err != nil {
		t.Fatal(err)
	}
	if b, _, err := f.ReadAll(ctx, "output/notes.md", 1<<20); err != nil || string(b) != "zero\none\nTWO\nthree\nfour\n" {
		t.Fatalf("after the edits: %q %v", b, err)
	}
	wantCode(t, "a whole read past the bound", func() error { _, _, err := f.ReadAll(ctx, "output/notes.md", 4); return err }(), CodeFileTooLarge)
	wantCode(t, "a stale expectation", func() error {
		_, err := f.Write(ctx, "output/notes.md", []byte("x"), Overwrite, strings.Repeat("0", 64))
		return err
	}(), CodeConflict)

	bin := []byte{0, 1, 2, 0xff}
	if _, err := f.Write(ctx, "blob.bin", bin, Overwrite, ""); err != nil {
		t.Fatal(err)
	}
	if c, err := f.Read(ctx, "blob.bin", 0, 10, false); err != nil || c.Encoding != "base64" || !bytes.Equal(c.Data, bin) {
		t.Fatalf("binary read: %+v %v", c, err)
	}
	// Across zones a move is refused and a copy works.
	if _, err := f.Copy(ctx, "output/notes.md", "notes-copy.md", false, 1<<20); err != nil {
		t.Fatal(err)
	}
	if a, _ := f.Hash(ctx, "output/notes.md"); a == "" {
		t.Fatal("no hash")
	} else if b, _ := f.Hash(ctx, "notes-copy.md"); a != b {
		t.Fatal("the copy differs")
	}
	// A large write goes through in chunks and is charged.
	big := bytes.Repeat([]byte("0123456789abcdef"), 200_000) // 3.2 MB
	if _, err := f.Write(ctx, "big.txt", big, Overwrite, ""); err != nil {
		t.Fatal(err)
	}
	if in, err := f.Stat("big.txt"); err != nil || in.Size != uint64(len(big)) {
		t.Fatalf("big: %+v %v", in, err)
	}
	// Rules apply: uploads/ is read-only.
	if e := wantCode(t, "write into uploads/", func() error {
		_, err := f.Write(ctx, "uploads/x", []byte("x"), Overwrite, "")
		return err
	}(), CodePermissionDenied); e.Rule != acl.ReasonUploadsReadonly {
		t.Errorf("rule %q", e.Rule)
	}
}

// TestEditLocks: a lock taken by one holder refuses every other's change
// (FILE_LOCKED), not the holder's; save writes and lets go; cancel lets
// go; only the owner may force another's lock open.
func TestEditLocks(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	alice := fx.fs(t, "alice", nil)
	if _, err := alice.Mkdir("groups/team/docs", true); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Write(ctx, "groups/team/docs/plan.md", []byte("v1\n"), CreateOnly, ""); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.AddMember("team", "bob"); err != nil {
		t.Fatal(err)
	}
	bob := fx.fs(t, "bob", nil)
	l, err := bob.LockOpen(ctx, "groups/team/docs/plan.md", time.Minute, 1<<20)
	if err != nil || l.Text != "v1\n" || l.SHA256 == "" {
		t.Fatalf("lock_open: %+v %v", l, err)
	}
	locked := func(what string, err error) {
		t.Helper()
		if e := wantCode(t, what, err, CodeFileLocked); e.Rule != acl.ReasonEditLocked {
			t.Errorf("%s: rule %q", what, e.Rule)
		}
	}
	locked("alice writes", func() error {
		_, err := alice.Write(ctx, "groups/team/docs/plan.md", []byte("x"), Overwrite, "")
		return err
	}())
	locked("alice appends", func() error {
		_, err := alice.Write(ctx, "groups/team/docs/plan.md", []byte("x"), Append, "")
		return err
	}())
	locked("alice deletes", alice.Delete("groups/team/docs/plan.md", false))
	locked("alice renames", func() error {
		_, err := alice.Move("groups/team/docs/plan.md", "groups/team/docs/old.md", false)
		return err
	}())
	locked("alice locks", func() error { _, err := alice.LockOpen(ctx, "groups/team/docs/plan.md", 0, 100); return err }())
	if in, err := alice.Stat("groups/team/docs/plan.md"); err != nil || in.EditLockedBy != "bob" {
		t.Fatalf("stat shows the holder: %+v %v", in, err)
	}
	wantCode(t, "save without the lock", func() error {
		_, err := alice.LockSave(ctx, "groups/team/docs/plan.md", []byte("x"))
		return err
	}(), CodeConflict)
	if _, err := bob.LockSave(ctx, "groups/team/docs/plan.md", []byte("v2\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Write(ctx, "groups/team/docs/plan.md", []byte("v3\n"), Overwrite, ""); err != nil {
		t.Fatalf("after the save: %v", err)
	}
	// Cancel; and force by the owner (alice made the file).
	if _, err := bob.LockOpen(ctx, "groups/team/docs/plan.md", time.Minute, 100); err != nil {
		t.Fatal(err)
	}
	if err := bob.LockCancel("groups/team/docs/plan.md"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.LockOpen(ctx, "groups/team/docs/plan.md", time.Minute, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.LockOpen(ctx, "groups/team/docs/plan.md", time.Minute, 100); err == nil {
		t.Fatal("a second holder")
	}
	if err := alice.ForceUnlock("groups/team/docs/plan.md"); err != nil {
		t.Fatalf("the owner forces: %v", err)
	}
	// Expiry ends a lock by itself.
	if _, err := bob.LockOpen(ctx, "groups/team/docs/plan.md", 50*time.Millisecond, 100); err != nil {
		t.Fatal(err)
	}
	time.Sleep(80 * time.Millisecond)
	if _, err := alice.Write(ctx, "groups/team/docs/plan.md", []byte("v4\n"), Overwrite, ""); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if _, err := alice.LockOpen(ctx, "groups/team/docs/plan.md", time.Minute, 100); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "bob forces a lock of alice's file", bob.ForceUnlock("groups/team/docs/plan.md"), CodePermissionDenied)
}

// TestOwnership sets a group file's mode and gives it away as its owner
// may, and refuses what the rules refuse.
func TestOwnership(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	alice := fx.fs(t, "alice", nil)
	if err := fx.store.AddMember("team", "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Write(ctx, "groups/team/plan.md", []byte("x"), CreateOnly, ""); err != nil {
		t.Fatal(err)
	}
	if in, err := alice.SetMode("groups/team/plan.md", "owner"); err != nil || in.Ownership != "owner" {
		t.Fatalf("set mode: %+v %v", in, err)
	}
	bob := fx.fs(t, "bob", nil)
	if e := wantCode(t, "bob sets the mode of alice's file", func() error { _, err := bob.SetMode("groups/team/plan.md", "group"); return err }(), CodePermissionDenied); e.Rule != acl.ReasonOwnerOnly {
		t.Errorf("rule %q", e.Rule)
	}
	wantCode(t, "a bad mode", func() error { _, err := alice.SetMode("groups/team/plan.md", "rw"); return err }(), CodeInvalidArgument)
	wantCode(t, "to a non-member", func() error { _, err := alice.Chown("groups/team/plan.md", "carol"); return err }(), CodeInvalidArgument)
	if in, err := alice.Chown("groups/team/plan.md", "bob"); err != nil || in.Owner != "bob" {
		t.Fatalf("chown: %+v %v", in, err)
	}
	ro := fx.fs(t, "bob", &acl.Grant{Access: acl.AccessRead | acl.AccessList | acl.AccessWrite})
	if e := wantCode(t, "without metadata access", func() error { _, err := ro.SetMode("groups/team/plan.md", "group"); return err }(), CodePermissionDenied); e.Rule != acl.ReasonTokenAccess {
		t.Errorf("rule %q", e.Rule)
	}
}
