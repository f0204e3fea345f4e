package acl

import (
	"syscall"
	"testing"
)

func TestLockLost(t *testing.T) {
	for _, tc := range []struct {
		name         string
		lost, unlock bool
		errno        syscall.Errno
		reason       string
	}{
		{"held", false, false, 0, ""},
		{"held_unlock", false, true, 0, ""},
		{"lost_io", true, false, syscall.EIO, ReasonLockLost},
		{"lost_unlock", true, true, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := LockLost(tc.lost, tc.unlock)
			if d.Errno != tc.errno || d.Reason != tc.reason {
				t.Errorf("got %v %q, want %v %q", d.Errno, d.Reason, tc.errno, tc.reason)
			}
		})
	}
}
