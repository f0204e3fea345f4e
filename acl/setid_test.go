package acl

import (
	"syscall"
	"testing"
)

func TestSetIDKilled(t *testing.T) {
	const reg = syscall.S_IFREG
	for _, tc := range []struct {
		name string
		mode uint32
		want uint32
	}{
		{"plain file", reg | 0o644, reg | 0o644},
		{"set-user-ID", reg | 0o4755, reg | 0o755},
		{"set-user-ID, not executable", reg | 0o4644, reg | 0o644},
		{"set-group-ID, group-executable", reg | 0o2755, reg | 0o755},
		{"set-group-ID without group execute (mandatory locking mark) stays", reg | 0o2644, reg | 0o2644},
		{"both, group-executable", reg | 0o6775, reg | 0o775},
		{"both, not group-executable", reg | 0o6744, reg | 0o2744},
		{"sticky bit stays", reg | 0o5755, reg | 0o1755},
		{"directory keeps set-group-ID (inheritance)", syscall.S_IFDIR | 0o2775, syscall.S_IFDIR | 0o2775},
		{"symlink", syscall.S_IFLNK | 0o777, syscall.S_IFLNK | 0o777},
		// A chown of any non-directory clears them (pjdfstest chown/00.t).
		{"fifo, both, group-executable", syscall.S_IFIFO | 0o6555, syscall.S_IFIFO | 0o555},
		{"socket, both, group-executable", syscall.S_IFSOCK | 0o6555, syscall.S_IFSOCK | 0o555},
		{"fifo, both, not group-executable", syscall.S_IFIFO | 0o6644, syscall.S_IFIFO | 0o2644},
		{"socket, set-user-ID", syscall.S_IFSOCK | 0o4755, syscall.S_IFSOCK | 0o755},
		{"directory keeps set-user-ID too", syscall.S_IFDIR | 0o6755, syscall.S_IFDIR | 0o6755},
	} {
		if got := SetIDKilled(tc.mode); got != tc.want {
			t.Errorf("%s: SetIDKilled(%o) = %o, want %o", tc.name, tc.mode, got, tc.want)
		}
	}
}
