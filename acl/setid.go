package acl

import "syscall"

// SetIDKilled is the mode an entry is left with when a write, a truncate
// or a chown removes its set-ID bits, as Linux does and as the kernel
// leaves to a FUSE server that handles FUSE_HANDLE_KILLPRIV_V2:
// set-user-ID always goes; set-group-ID goes only with group execute
// (without it, the bit marks mandatory locking, not a privilege). That
// holds for every type but a directory, which keeps its mode (its
// set-group-ID is inheritance, and Linux's chown leaves directories
// alone): a write or a truncate reaches only regular files, but a chown
// of a fifo, a socket or a symlink clears the bits too (pjdfstest
// chown/00.t). The kernel decides when (a caller without CAP_FSETID, any
// chown of a non-directory); this decides what.
func SetIDKilled(mode uint32) uint32 {
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		return mode
	}
	mode &^= syscall.S_ISUID
	if mode&syscall.S_IXGRP != 0 {
		mode &^= syscall.S_ISGID
	}
	return mode
}
