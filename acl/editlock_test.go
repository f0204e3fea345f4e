package acl

import (
	"syscall"
	"testing"
	"time"
)

func TestCheckEditLock(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	alice := Actor{User: "alice"}
	aliceRun := Actor{User: "alice", Session: "run1"}
	bob := Actor{User: "bob", Groups: []string{"team"}}
	held := &EditLock{User: "alice", Expires: now.Add(time.Minute)}
	heldRun := &EditLock{User: "alice", Session: "run1", Expires: now.Add(time.Minute)}
	expired := &EditLock{User: "alice", Expires: now}
	for _, c := range []struct {
		name string
		lock *EditLock
		a    Actor
		want syscall.Errno
	}{
		{"no lock", nil, bob, 0},
		{"holder", held, alice, 0},
		{"another user", held, bob, syscall.EACCES},
		{"the holder's session is someone else", held, aliceRun, syscall.EACCES},
		{"session holder", heldRun, aliceRun, 0},
		{"the user's main view is not the session", heldRun, alice, syscall.EACCES},
		{"expired at its instant", expired, bob, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := CheckEditLock(c.lock, c.a, now)
			if d.Errno != c.want || (c.want != 0 && d.Reason != ReasonEditLocked) {
				t.Fatalf("CheckEditLock = %v, want %v", d, c.want)
			}
		})
	}
}

func TestForceEditUnlock(t *testing.T) {
	lock := EditLock{User: "alice", Session: "run1"}
	for _, c := range []struct {
		name  string
		a     Actor
		owner string
		want  syscall.Errno
	}{
		{"holder", Actor{User: "alice", Session: "run1"}, "bob", 0},
		{"file's owner", Actor{User: "bob"}, "bob", 0},
		{"the holder's user, another view, owns the file", Actor{User: "alice"}, "alice", 0},
		{"someone else", Actor{User: "carol"}, "bob", syscall.EPERM},
		{"the holder's user, another view", Actor{User: "alice"}, "bob", syscall.EPERM},
	} {
		t.Run(c.name, func(t *testing.T) {
			if d := ForceEditUnlock(lock, c.a, Entry{Owner: c.owner}); d.Errno != c.want {
				t.Fatalf("ForceEditUnlock = %v, want %v", d, c.want)
			}
		})
	}
}
