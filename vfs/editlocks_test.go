package vfs

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/metadata"
)

// TestEditLocks: a lock taken through the core binds everyone else at
// once (from memory), its holder not; a second core on the same store
// (a restart) knows it from the store; a release needs the holder or the
// file's owner; an expired lock binds nobody.
func TestEditLocks(t *testing.T) {
	f := newFixture(t, nil)
	n := f.file(t, "notes.md", 10)
	alice := acl.Actor{User: "alice"}
	run := acl.Actor{User: "alice", Session: "run1"}
	bob := acl.Actor{User: "bob"}
	if d := f.core.CheckEditLock(n.Ino, bob); !d.Allowed() {
		t.Fatalf("no lock yet: %v", d)
	}
	if _, err := f.core.TakeEditLock(n.Ino, run, "mcp", "notes.md", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, a := range []acl.Actor{alice, bob} {
		if d := f.core.CheckEditLock(n.Ino, a); d.Errno != syscall.EACCES || d.Reason != acl.ReasonEditLocked {
			t.Errorf("%+v writes a locked file: %v", a, d)
		}
		if d := f.core.CheckEditLockNamed(n.Ino, a); d.Errno != syscall.EACCES {
			t.Errorf("%+v renames a locked file: %v", a, d)
		}
	}
	if d := f.core.CheckEditLock(n.Ino, run); !d.Allowed() {
		t.Errorf("the holder is refused: %v", d)
	}
	held, err := f.core.TakeEditLock(n.Ino, bob, "api", "notes.md", time.Minute)
	if !errors.Is(err, metadata.ErrEditLocked) || held == nil || held.Session != "run1" {
		t.Fatalf("a second take: %+v %v", held, err)
	}

	// A restart: a new core on the same store knows the lock.
	again := New(f.store, f.blobs, Options{})
	if d := again.CheckEditLock(n.Ino, bob); d.Errno != syscall.EACCES {
		t.Fatalf("after a restart: %v", d)
	}
	mayRelease := func(a acl.Actor) func(acl.EditLock) acl.Decision {
		return func(l acl.EditLock) acl.Decision { return acl.ForceEditUnlock(l, a, acl.EntryOf(n)) }
	}
	if _, err := again.ReleaseEditLock(n.Ino, mayRelease(bob)); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("bob releases alice's lock: %v", err)
	}
	if d := again.CheckEditLock(n.Ino, bob); d.Errno != syscall.EACCES {
		t.Fatalf("a refused release let go: %v", d)
	}
	// alice owns the file: she may release the lock her session holds.
	if _, err := again.ReleaseEditLock(n.Ino, mayRelease(alice)); err != nil {
		t.Fatal(err)
	}
	if d := again.CheckEditLock(n.Ino, bob); !d.Allowed() {
		t.Fatalf("after the release: %v", d)
	}
	if _, err := again.ReleaseEditLock(n.Ino, nil); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("release twice: %v", err)
	}

	// Expiry.
	if _, err := again.TakeEditLock(n.Ino, alice, "mcp", "notes.md", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := again.CheckEditLock(n.Ino, bob); d.Errno != syscall.EACCES {
		t.Fatalf("short lock: %v", d)
	}
	time.Sleep(60 * time.Millisecond)
	if d := again.CheckEditLock(n.Ino, bob); !d.Allowed() {
		t.Fatalf("an expired lock binds: %v", d)
	}
}

// TestPurgeEditLocks: an expired lock's record goes, and the core's copy
// with it.
func TestPurgeEditLocks(t *testing.T) {
	f := newFixture(t, nil)
	n := f.file(t, "a", 1)
	if _, err := f.core.TakeEditLock(n.Ino, acl.Actor{User: "alice"}, "mcp", "a", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if got, err := f.core.PurgeEditLocks(time.Now()); err != nil || got != 1 {
		t.Fatalf("purge: %d %v", got, err)
	}
	if f.core.edits.live.Load() != 0 {
		t.Fatal("the core's copy keeps an expired lock")
	}
	if ls, _ := f.store.ListEditLocks(); len(ls) != 0 {
		t.Fatalf("records left: %+v", ls)
	}
}
