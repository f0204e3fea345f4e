package metadata

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestEditLocks takes, renews, refuses, releases and purges edit locks.
func TestEditLocks(t *testing.T) {
	s := newStore(t)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	alice := EditLock{Ino: 7, User: "alice", Path: "notes.md", Taken: now, Expires: now.Add(time.Minute)}
	got, err := s.TakeEditLock(alice, now)
	if err != nil || got.User != "alice" {
		t.Fatalf("take: %+v %v", got, err)
	}
	// Another holder is refused and told who holds it; so is the same
	// user through a session.
	for _, other := range []EditLock{
		{Ino: 7, User: "bob", Taken: now, Expires: now.Add(time.Hour)},
		{Ino: 7, User: "alice", Session: "run1", Taken: now, Expires: now.Add(time.Hour)},
	} {
		held, err := s.TakeEditLock(other, now.Add(time.Second))
		if !errors.Is(err, ErrEditLocked) || !errors.Is(err, syscall.EBUSY) || held == nil || held.User != "alice" || held.Session != "" {
			t.Fatalf("take by %s/%s: %+v %v", other.User, other.Session, held, err)
		}
	}
	// The holder renews: the lock keeps its start.
	renew := alice
	renew.Taken, renew.Expires = now.Add(30*time.Second), now.Add(10*time.Minute)
	if got, err := s.TakeEditLock(renew, now.Add(30*time.Second)); err != nil || !got.Taken.Equal(now) || !got.Expires.Equal(renew.Expires) {
		t.Fatalf("renew: %+v %v", got, err)
	}
	// Once expired, anyone takes it.
	bob := EditLock{Ino: 7, User: "bob", Taken: now.Add(time.Hour), Expires: now.Add(2 * time.Hour)}
	if got, err := s.TakeEditLock(bob, now.Add(time.Hour)); err != nil || got.User != "bob" || !got.Taken.Equal(bob.Taken) {
		t.Fatalf("take an expired lock: %+v %v", got, err)
	}
	if _, err := s.TakeEditLock(EditLock{Ino: 8, User: "bob", Expires: now}, now); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("take an already expired lock: %v", err)
	}
	// Release asks the caller.
	no := errors.New("not yours")
	if _, err := s.ReleaseEditLock(7, func(l EditLock) error { return no }); !errors.Is(err, no) {
		t.Fatalf("release refused: %v", err)
	}
	if l, err := s.GetEditLock(7); err != nil || l.User != "bob" {
		t.Fatalf("a refused release changed the lock: %+v %v", l, err)
	}
	if _, err := s.ReleaseEditLock(7, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReleaseEditLock(7, nil); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("release twice: %v", err)
	}
	// Purge takes the expired ones only.
	for i, d := range []time.Duration{time.Minute, time.Hour, 2 * time.Hour} {
		if _, err := s.TakeEditLock(EditLock{Ino: uint64(20 + i), User: "alice", Expires: now.Add(d)}, now); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.PurgeEditLocks(now.Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if ls, err := s.ListEditLocks(); err != nil || len(ls) != 1 || ls[0].Ino != 22 {
		t.Fatalf("list: %+v %v", ls, err)
	}
}
