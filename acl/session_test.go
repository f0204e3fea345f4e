package acl

import (
	"syscall"
	"testing"

	"github.com/shedfs/shedfs/zones"
)

// Row: a session's scratch is written only from its own view; the main
// view and other sessions read it; home/ is reserved in its root.
func TestRowSession(t *testing.T) {
	s1 := zones.SessionZone("alice", "s1")
	inS1 := Actor{User: "alice", Session: "s1"}
	inS2 := Actor{User: "alice", Session: "s2"}
	main := Actor{User: "alice"}
	scratchRoot := root(s1, "alice", none)
	scratchFile := file(s1, "alice", none)
	scratchDir := dir(s1, "alice", none)
	const R = ReasonSessionReadonly
	run(t, []row{
		{"own_write", Write(inS1, scratchFile, Quota{}, 0, 10), 0, ""},
		{"own_create", Create(inS1, scratchRoot, "f", Quota{}), 0, ""},
		{"own_unlink", Unlink(inS1, scratchDir, "f", scratchFile), 0, ""},
		{"own_home_reserved", Create(inS1, scratchRoot, "home", Quota{}), syscall.EEXIST, ReasonReservedName},
		{"own_uploads_reserved", Unlink(inS1, scratchRoot, "uploads", uploadsDir), syscall.EPERM, ReasonReservedName},
		{"own_sessions_free", Create(inS1, scratchRoot, "sessions", Quota{}), 0, ""},
		{"home_is_free_in_private", Create(main, aliceRoot, "home", Quota{}), 0, ""},
		{"own_writes_home", Write(inS1, alicePriv, Quota{}, 0, 10), 0, ""},
		{"scratch_to_home_exdev", Rename(inS1, scratchRoot, "a", scratchFile, alicePrivDir, "a", nil), syscall.EXDEV, ReasonCrossZone},
		{"main_reads", Read(main, scratchFile), 0, ""},
		{"main_lists", CheckDir(main, OpRead, scratchDir, ""), 0, ""},
		{"main_write", Write(main, scratchFile, Quota{}, 0, 10), syscall.EACCES, R},
		{"main_create", Create(main, scratchDir, "f", Quota{}), syscall.EACCES, R},
		{"main_unlink", Unlink(main, scratchDir, "f", scratchFile), syscall.EACCES, R},
		{"main_setattr", Setattr(main, scratchFile, false), syscall.EACCES, R},
		{"main_rmdir_root", Rmdir(main, alicePrivDir, "s1", scratchRoot), syscall.EPERM, ReasonReservedName},
		{"other_session_write", Write(inS2, scratchFile, Quota{}, 0, 10), syscall.EACCES, R},
		{"bob_reads_not", Read(bob, scratchFile), syscall.ENOENT, ReasonNotVisible},
	})
}
