package fusefs

import "github.com/hanwen/go-fuse/v2/fuse"

// Views do not negotiate FUSE_AUTO_INVAL_DATA, which go-fuse asks for by
// default. With it, the kernel drops an inode's cached pages whenever
// fresh attributes show an mtime other than the one it holds; and since a
// view's kernel does not keep mtime itself on a write (no writeback cache),
// every file written, then stat'd, then read lost its pages to the stat's
// GETATTR and was read again from the daemon: one READ per file that the
// page cache had. The daemon tells every kernel what it must drop on its
// own: a change made through another view, by the admin or by another
// daemon is pushed as an invalidation of the pages (invalidate.go,
// remote.go; every write's range to every view holding the inode, since
// the kernel reads its other pages without asking) and bumps the content
// version that decides FOPEN_KEEP_CACHE at the next open (vfs/versions.go),
// and a change of size still drops the pages past it as before. So the
// mtime check only dropped pages that were current (docs/performance.md,
// "Requests per operation").
const viewDisabledCapabilities = fuse.CAP_AUTO_INVAL_DATA
