package acl

import (
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

func TestOpenContent(t *testing.T) {
	pending := shedfs.Content{State: shedfs.ScanPending, Writer: "alice"}
	infected := shedfs.Content{State: shedfs.ScanInfected, Detail: "Eicar", Writer: "alice"}
	failed := shedfs.Content{State: shedfs.ScanError, Detail: "clamd down"}
	for _, tc := range []struct {
		name     string
		user     string
		c        shedfs.Content
		failOpen bool
		errno    syscall.Errno
		reason   string
	}{
		{"clean", "bob", shedfs.Content{State: shedfs.ScanClean}, false, 0, ""},
		{"unscanned", "bob", shedfs.Content{}, false, 0, ""},
		{"pending_writer", "alice", pending, false, 0, ""},
		{"pending_other_view", "bob", pending, false, syscall.EAGAIN, ReasonScanPending},
		{"pending_no_writer", "alice", shedfs.Content{State: shedfs.ScanPending}, false, syscall.EAGAIN, ReasonScanPending},
		{"infected_other", "bob", infected, false, syscall.EACCES, ReasonInfected},
		{"infected_writer", "alice", infected, false, syscall.EACCES, ReasonInfected},
		{"infected_fail_open", "bob", infected, true, syscall.EACCES, ReasonInfected},
		{"error_fail_closed", "bob", failed, false, syscall.EAGAIN, ReasonScanPending},
		{"error_fail_open", "bob", failed, true, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := OpenContent(tc.user, tc.c, tc.failOpen)
			if d.Errno != tc.errno || d.Reason != tc.reason {
				t.Fatalf("got %v %q, want %v %q", d.Errno, d.Reason, tc.errno, tc.reason)
			}
		})
	}
}

func TestScanLabel(t *testing.T) {
	for _, c := range []shedfs.Content{
		{State: shedfs.ScanClean}, {State: shedfs.ScanPending}, {State: shedfs.ScanUnscanned},
		{State: shedfs.ScanInfected, Detail: "Eicar-Test.UNOFFICIAL"}, {State: shedfs.ScanError, Detail: "size limit: x"},
	} {
		got, err := shedfs.ParseScanLabel(c.ScanLabel())
		if err != nil || got.State != c.State || got.Detail != c.Detail {
			t.Errorf("%q read back as %+v, %v", c.ScanLabel(), got, err)
		}
	}
}
