package acl

import (
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
)

func TestSnapshotRules(t *testing.T) {
	tests := []struct {
		name string
		d    Decision
		want syscall.Errno
		why  string
	}{
		{"read", SnapshotRead(), 0, ""},
		{"change", SnapshotChange(), syscall.EROFS, ReasonSnapshotReadonly},
		{"copy within the quota", SnapshotCopy(Quota{Usage: shedfs.Usage{Bytes: 10}, Limit: shedfs.Limit{Bytes: 20}}, 10), 0, ""},
		{"copy past the quota", SnapshotCopy(Quota{Usage: shedfs.Usage{Bytes: 10}, Limit: shedfs.Limit{Bytes: 20}}, 11), syscall.EDQUOT, ReasonQuotaBytes},
		{"copy without a quota", SnapshotCopy(Quota{Usage: shedfs.Usage{Bytes: 10}}, 1<<40), 0, ""},
	}
	for _, tt := range tests {
		if tt.d.Errno != tt.want || tt.d.Reason != tt.why {
			t.Errorf("%s: %v %q, want %v %q", tt.name, tt.d.Errno, tt.d.Reason, tt.want, tt.why)
		}
	}
}
