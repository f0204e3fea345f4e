package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// serveLoopback mounts a plain go-fuse loopback of src at mnt and serves it
// until SIGTERM or SIGINT, or until someone unmounts it. It is the baseline
// "any FUSE filesystem written with go-fuse" that shedfs's metadata path is
// held to (docs/design.md, "Performance"), configured as a sensible user would: 1s
// entry and attribute timeouts, kernel permission checks, direct mount.
func serveLoopback(src, mnt string) error {
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		return fmt.Errorf("loopback root %s: %w", src, err)
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
	server, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return fmt.Errorf("mount loopback at %s: %w", mnt, err)
	}
	serveUntilSignal("loopback", server, mnt)
	return nil
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
