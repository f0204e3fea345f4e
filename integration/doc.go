// Package integration holds the end-to-end tests of shedfs: they mount real
// views with the shedfs binary running as a child process (serving and using
// a FUSE mount from one process deadlocks) and act on them through the kernel,
// with os calls and real tools (tar, git, cp, dd, df), go-fuse's posixtest
// suite, bad input, persistence across remounts and a kill -9 crash test.
//
// The tests need root and /dev/fuse. Without them they are skipped with a
// clear message, or fail when the CI environment variable is "true".
// SHEDFS_BIN may name a prebuilt binary; otherwise TestMain builds
// ./cmd/shedfs into a temporary directory.
//
// The package has no code of its own besides this comment: everything lives
// in _test.go files.
package integration
