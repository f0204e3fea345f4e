package main

import (
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// loopbackPassthroughArg is the optional last argument of the hidden
// -serve-loopback command that lets the loopback hand its files to the
// kernel (target loopback-pt).
const loopbackPassthroughArg = "passthrough"

// serveLoopback mounts a plain go-fuse loopback of src at mnt and serves it
// until SIGTERM or SIGINT, or until someone unmounts it. It is the baseline
// "any FUSE filesystem written with go-fuse" that shedfs's metadata path is
// held to (docs/design.md, "Performance"), configured as a sensible user would: 1s
// entry and attribute timeouts, kernel permission checks, direct mount.
//
// Without passthrough it is the anchor the targets were set against (issue
// 28): go-fuse's loopback on /dev/fuse, every read and write a round trip
// to this process. go-fuse's loopback files offer the kernel their
// descriptor (FilePassthroughFder), which as root on a kernel with FUSE
// passthrough makes reads and writes bypass the daemon altogether: a
// different, faster anchor, kept as target loopback-pt. Taking
// CAP_PASSTHROUGH out of INIT is enough: the kernel then refuses the
// backing files and go-fuse stops asking.
func serveLoopback(src, mnt string, passthrough bool) error {
	server, err := mountLoopback(src, mnt, passthrough, nil)
	if err != nil {
		return err
	}
	serveUntilSignal("loopback", server, mnt)
	return nil
}

// mountLoopback mounts the loopback of serveLoopback; debug, when set,
// gets go-fuse's log of every request and reply (tests).
func mountLoopback(src, mnt string, passthrough bool, debug *log.Logger) (*fuse.Server, error) {
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		return nil, fmt.Errorf("loopback root %s: %w", src, err)
	}
	sec := time.Second
	opts := &fs.Options{
		AttrTimeout:     &sec,
		EntryTimeout:    &sec,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			DirectMount: true,
			FsName:      src,
			Name:        "shedfs-bench-loopback",
			Options:     []string{"default_permissions"},
		},
	}
	if !passthrough {
		opts.MountOptions.DisabledCapabilities = fuse.CAP_PASSTHROUGH
	}
	if debug != nil {
		opts.MountOptions.Debug = true
		opts.MountOptions.Logger = debug
	}
	server, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return nil, fmt.Errorf("mount loopback at %s: %w", mnt, err)
	}
	return server, nil
}

// serveUntilSignal serves the mount of a baseline child (loopback, memfs)
// at mnt until SIGTERM or SIGINT unmounts it, or someone else does.
func serveUntilSignal(name string, server *fuse.Server, mnt string) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		slog.Info(name+": unmounting", "signal", sig.String(), "mnt", mnt)
		if err := server.Unmount(); err != nil {
			slog.Error(name+": unmount failed", "mnt", mnt, "err", err)
			// Detach so the caller is never left with a mount behind.
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	}()
	server.Wait()
}
