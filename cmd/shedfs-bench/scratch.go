package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The -scratch-fs flag: where the targets live when the -dir's filesystem
// would skew the numbers (workfs.go).
const (
	scratchAuto = "auto" // a scratch filesystem only when -dir's skews creates (the default)
	scratchOff  = "off"  // never: measure on -dir's filesystem whatever it is
)

// scratchAutoSize is the size of the sparse image -scratch-fs auto makes:
// room for the full run (a 1 GiB sequential file, the Go tree, 100,000-entry
// directories, 1,000 views' stores) and, at one inode per 8 KiB, three
// million inodes (the opt-in rss workload's store of a million files).
// It is cut to 90% of the free space of -dir's filesystem, since the image
// may fill up to its size.
const scratchAutoSize int64 = 24 << 30

// scratchMinSize is the smallest image the bench makes (ext4's journal
// alone wants tens of MiB).
const scratchMinSize int64 = 256 << 20

// parseScratchFlag reads -scratch-fs: "auto", "off" (also "none", "0") or
// a size such as 8GiB, which always makes a scratch filesystem.
func parseScratchFlag(v string) (mode string, size int64, err error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case scratchAuto:
		return scratchAuto, 0, nil
	case scratchOff, "none", "0", "":
		return scratchOff, 0, nil
	}
	size, err = parseSize(v)
	if err != nil {
		return "", 0, fmt.Errorf("-scratch-fs: want auto, off or a size: %w", err)
	}
	if size < scratchMinSize {
		return "", 0, fmt.Errorf("-scratch-fs: %s is too small (at least %s)", humanBytes(size), humanBytes(scratchMinSize))
	}
	return "size", size, nil
}

// scratchFS is a journaled ext4 made for one run: a sparse image file in a
// directory of its own under -dir, loop-mounted there. Every target of
// the run lives on it, so that none pays for another's deletes; it is
// unmounted and removed at the end, on errors and on Ctrl-C as well.
type scratchFS struct {
	Dir   string `json:"-"`     // holds the image and the mount point
	Image string `json:"image"` // the sparse image file
	Mount string `json:"mount"` // its mount point
	Size  int64  `json:"size"`  // the image's apparent size
	Mode  string `json:"flag"`  // -scratch-fs: auto or the size asked for
}

// makeScratchFS creates, formats and mounts a scratch filesystem of size
// bytes under parent. On an error it leaves nothing behind.
func makeScratchFS(ctx context.Context, parent string, size int64, mode string) (s *scratchFS, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("-scratch-fs needs root to loop-mount its image (run as root, or pass -scratch-fs off)")
	}
	for _, tool := range []string{"mkfs.ext4", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("-scratch-fs needs %s (Debian: e2fsprogs, mount): %w", tool, err)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil {
		return nil, fmt.Errorf("scratch filesystem: statfs %s: %w", parent, err)
	}
	free := int64(st.Bavail) * st.Bsize
	if mode == scratchAuto {
		size = min(scratchAutoSize, free/10*9)
		if size < scratchMinSize {
			return nil, fmt.Errorf("scratch filesystem: only %s free in %s (pass -scratch-fs off to measure there anyway)", humanBytes(free), parent)
		}
	} else if size > free {
		return nil, fmt.Errorf("scratch filesystem: an image of %s may fill up to that, and %s has only %s free (pass a smaller -scratch-fs)", humanBytes(size), parent, humanBytes(free))
	}
	dir, err := os.MkdirTemp(parent, "shedfs-bench-scratch-")
	if err != nil {
		return nil, fmt.Errorf("scratch filesystem: %w", err)
	}
	// The mount point as mountinfo will show it (remove looks for it there).
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	} else {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("scratch filesystem: %w", err)
	}
	s = &scratchFS{Dir: dir, Image: filepath.Join(dir, "fs.img"), Mount: filepath.Join(dir, "mnt"), Size: size, Mode: mode}
	if mode != scratchAuto {
		s.Mode = humanBytes(size)
	}
	defer func() {
		if err != nil {
			if rerr := s.remove(); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	f, err := os.OpenFile(s.Image, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return s, fmt.Errorf("scratch image: %w", err)
	}
	err = f.Truncate(size) // sparse: blocks are taken as the run writes them
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return s, fmt.Errorf("scratch image: %w", err)
	}
	if err := os.Mkdir(s.Mount, 0o755); err != nil {
		return s, fmt.Errorf("scratch mount point: %w", err)
	}
	// One inode per 8 KiB (the default 16 KiB gives 1.5M on 24 GiB). The
	// inode tables are left for the kernel to initialize (lazy_itable_init)
	// and the mount tells it not to do so in the background (noinit_itable),
	// so that no ext4lazyinit thread writes gigabytes of zeroes during the
	// measurements; a scratch filesystem never needs e2fsck.
	if err := runQuiet(ctx, "mkfs.ext4", "-q", "-F", "-i", "8192", "-E", "lazy_itable_init=1,lazy_journal_init=1", s.Image); err != nil {
		if ctx.Err() != nil {
			return s, fmt.Errorf("scratch filesystem: interrupted: %w", ctx.Err())
		}
		return s, fmt.Errorf("scratch filesystem: %w", err)
	}
	// mount -o loop sets the loop device to clear itself on umount; it is
	// not killed half-way by a Ctrl-C (remove undoes a finished mount).
	if err := runQuiet(context.WithoutCancel(ctx), "mount", "-t", "ext4", "-o", "loop,noinit_itable", s.Image, s.Mount); err != nil {
		return s, fmt.Errorf("scratch filesystem: %w", err)
	}
	slog.Info("scratch filesystem mounted", "image", s.Image, "size", humanBytes(size), "mount", s.Mount)
	return s, nil
}

// remove unmounts the scratch filesystem (its loop device goes with it)
// and deletes the image and its directory. It refuses while a FUSE mount
// is left below it (the work directory's cleanup said so already), since
// detaching would hide it.
func (s *scratchFS) remove() error {
	if mounted, err := isMountPoint(s.Mount); err != nil {
		return fmt.Errorf("scratch filesystem: %w", err)
	} else if mounted {
		if left, err := fuseMountsUnder(s.Mount); err != nil || len(left) > 0 {
			return fmt.Errorf("scratch filesystem left mounted at %s, FUSE mounts below it (%v, %v): `umount -l` them, then `umount %s && rm -r %s`", s.Mount, firstN(left, 3), err, s.Mount, s.Dir)
		}
		// A child just killed may still hold a file open for a moment.
		var uerr error
		for i := 0; i < 20; i++ {
			if uerr = unix.Unmount(s.Mount, 0); uerr == nil || !errors.Is(uerr, unix.EBUSY) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if uerr != nil {
			slog.Warn("scratch filesystem busy, detaching it", "mount", s.Mount, "err", uerr)
			if err := unix.Unmount(s.Mount, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount the scratch filesystem %s: %v; detach: %w (remove %s by hand)", s.Mount, uerr, err, s.Dir)
			}
		}
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("remove the scratch filesystem's image: %w", err)
	}
	slog.Info("scratch filesystem removed", "image", s.Image)
	return nil
}

// isMountPoint reports whether dir is a mount point (of any filesystem) in
// this process's mount namespace.
func isMountPoint(dir string) (bool, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("read mountinfo: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && unescapeMountinfo(f[4]) == dir {
			return true, nil
		}
	}
	return false, nil
}

// runQuiet runs a command and returns its output only with an error.
func runQuiet(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// prepareWorkFS looks at parent's filesystem and, as -scratch-fs asks,
// makes the scratch filesystem the targets will live on instead (nil when
// they live in parent). The finding is logged either way.
func prepareWorkFS(ctx context.Context, cfg *config, parent string) (*scratchFS, workFS, error) {
	dirFS, err := detectWorkFS("/", parent)
	if err != nil {
		slog.Warn("could not tell the work filesystem's journal", "dir", parent, "err", err)
	}
	switch {
	case cfg.scratchMode == scratchOff || (cfg.scratchMode == scratchAuto && !dirFS.SkewsCreate):
		if dirFS.SkewsCreate {
			slog.Warn("the work filesystem skews creates, and -scratch-fs off keeps the run on it", "dir", parent, "fs", dirFS.String(), "why", skewWarning)
		}
		return nil, dirFS, nil
	case cfg.scratchMode == scratchAuto && os.Geteuid() != 0:
		slog.Warn("the work filesystem skews creates, and a journaled scratch filesystem needs root: measuring on it anyway", "dir", parent, "fs", dirFS.String(), "why", skewWarning)
		return nil, dirFS, nil
	}
	if dirFS.SkewsCreate {
		slog.Warn("the work filesystem skews creates: every target runs on a journaled scratch filesystem instead", "dir", parent, "fs", dirFS.String(), "why", skewWarning)
	}
	s, err := makeScratchFS(ctx, parent, cfg.scratchSize, cfg.scratchMode)
	return s, dirFS, err
}
