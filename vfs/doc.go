// Package vfs is the core of shedfs: the one place in a process that
// changes the namespace, admits growth of the store and fans changes out
// to the doors that show it. The FUSE views (fusefs), the admin API
// (daemon), the link server (web) and the command line without a daemon
// all call it, so that a rule spelled once holds whichever door a change
// comes through.
//
// A View is one user's world as a door serves it; its methods are the
// namespace operations by inode number (lookup, getattr, readlink, list,
// create, mkdir, mknod, symlink, link, unlink, rmdir, rename, setattr,
// truncate, statfs) and Open, whose Handle reads, writes, allocates,
// flushes, syncs and releases through the one open-file table of the
// process. Each decides by acl, records a refusal once with the door,
// and tells the other doors what changed (Frontend.Changed).
//
// It knows no protocol: it imports no go-fuse package, and a door attaches
// itself as a Frontend to be told what its caches must forget. The rules
// themselves stay pure functions in acl and zones; the core gathers what
// they need (the holder's usage with what is pending, its limit, the max
// file size), asks them, and acts on the decision.
//
// Growth of any kind (bytes written, inodes created, extended attribute
// bytes, imports and restores) goes through Admit: the holder's admission
// lock, acl's decision, eviction of the holder's trash when the quota
// refuses (the trash never causes EDQUOT), the store's disk (evicting the
// oldest trash of anyone when the disk is short), the cross-daemon
// allotment on a shared store, then the pending charge. This file's
// package is the only caller of quota.Accountant.MakeRoom.
package vfs
