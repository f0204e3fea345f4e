package acl

import (
	"syscall"
	"testing"
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
	}
	for _, tt := range tests {
		if tt.d.Errno != tt.want || tt.d.Reason != tt.why {
			t.Errorf("%s: %v %q, want %v %q", tt.name, tt.d.Errno, tt.d.Reason, tt.want, tt.why)
		}
	}
}
