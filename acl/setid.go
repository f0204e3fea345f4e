package acl

import "syscall"

// SetIDKilled is the mode a regular file is left with when a write, a
// truncate or a chown removes its set-ID bits, as Linux does and as the
// kernel leaves to a FUSE server that handles FUSE_HANDLE_KILLPRIV_V2:
// set-user-ID always goes; set-group-ID goes only with group execute
// (without it, the bit marks mandatory locking, not a privilege). Other
// file types keep their mode (a directory's set-group-ID is inheritance).
// The kernel decides when (a caller without CAP_FSETID, any chown); this
// decides what.
func SetIDKilled(mode uint32) uint32 {
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return mode
	}
	mode &^= syscall.S_ISUID
	if mode&syscall.S_IXGRP != 0 {
		mode &^= syscall.S_ISGID
	}
	return mode
}
