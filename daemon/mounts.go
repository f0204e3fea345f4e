package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// prepareMountRoot clears what a crashed daemon left under the mount root,
// then makes sure the root exists with mode 0700: only root (and container
// runtimes acting as root) reach the views below it.
func (d *Daemon) prepareMountRoot() error {
	root := d.cfg.MountRoot
	if err := d.clearStaleMounts(root); err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("mount root: %w", err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("mount root: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mount root %s is not a directory", root)
	}
	if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(root, 0o700); err != nil {
			return fmt.Errorf("mount root: %w", err)
		}
		d.log.Info("mount root set to mode 0700", "path", root, "was", st.Mode().Perm().String())
	}
	return nil
}

// clearStaleMounts detaches FUSE mounts under root that no process serves
// any more: those /proc/self/mountinfo lists, deepest first, and entries
// that stat with ENOTCONN ("transport endpoint is not connected"). No
// other daemon can be serving them, since this one holds the store lock.
func (d *Daemon) clearStaleMounts(root string) error {
	mounts, err := fuseMountsUnder(root)
	if err != nil {
		d.log.Warn("cannot read the mount table; checking entries only", "err", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if !errors.Is(err, unix.ENOTCONN) {
			return fmt.Errorf("mount root: %w", err)
		}
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if _, err := os.Stat(p); errors.Is(err, unix.ENOTCONN) && !contains(mounts, p) {
			mounts = append(mounts, p)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	for _, p := range mounts {
		if d.adoptedAt(p) {
			continue // taken over from the previous daemon, not stale
		}
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("clear stale mount %s: %w", p, err)
		}
		d.log.Warn("cleared a stale mount left by a previous run", "path", p)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// fuseMountsUnder lists the FUSE mount points strictly below root, from
// /proc/self/mountinfo.
func fuseMountsUnder(root string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	defer f.Close()
	return parseMountinfo(bufio.NewScanner(f), root)
}

// parseMountinfo picks from mountinfo lines (proc(5)) the mount points
// strictly below root whose file system type is fuse or fuse.*.
func parseMountinfo(sc *bufio.Scanner, root string) ([]string, error) {
	prefix := strings.TrimSuffix(filepath.Clean(root), "/") + "/"
	var out []string
	for sc.Scan() {
		mp, _, ok := fuseMountLine(sc.Text())
		if !ok {
			continue
		}
		if strings.HasPrefix(mp, prefix) && !contains(out, mp) {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	return out, nil
}

// MountedAt reports whether path is a mount point in this process's mount
// namespace, as /proc/self/mountinfo lists it (any file system).
func MountedAt(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("mount table: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && unescapeMountinfo(fields[4]) == path {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("mount table: %w", err)
	}
	return false, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) the kernel
// puts in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// fuseConnection returns the number fusectl names the FUSE connection of
// the mount at mnt by (the minor of its device), from
// /proc/self/mountinfo; false when mnt is not a FUSE mount there.
func fuseConnection(mnt string) (int, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return parseConnection(bufio.NewScanner(f), filepath.Clean(mnt))
}

// parseConnection picks from mountinfo lines the connection number of the
// last FUSE mount at mnt.
func parseConnection(sc *bufio.Scanner, mnt string) (int, bool) {
	conn, found := 0, false
	for sc.Scan() {
		mp, majmin, ok := fuseMountLine(sc.Text())
		if !ok || mp != mnt {
			continue
		}
		_, minor, _ := strings.Cut(majmin, ":")
		if n, err := strconv.Atoi(minor); err == nil {
			conn, found = n, true
		}
	}
	return conn, found
}

// fuseMountLine reads one mountinfo line (proc(5)): its mount point and
// major:minor, ok when its file system type is fuse or fuse.*.
func fuseMountLine(line string) (mnt, majmin string, ok bool) {
	fields := strings.Fields(line)
	// id parent major:minor root mountpoint options [optional...] - fstype source superopts
	sep := -1
	for i, f := range fields {
		if f == "-" && i >= 6 {
			sep = i
			break
		}
	}
	if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
		return "", "", false
	}
	fstype := fields[sep+1]
	if fstype != "fuse" && !strings.HasPrefix(fstype, "fuse.") {
		return "", "", false
	}
	return unescapeMountinfo(fields[4]), fields[2], true
}

// fuseConnections is where fusectl lists the kernel's FUSE connections.
const fuseConnections = "/sys/fs/fuse/connections"

// abortConnection aborts FUSE connection conn through fusectl, mounting
// fusectl for the duration when it is not mounted: the kernel fails every
// request of the connection at once (ENOTCONN to the processes holding
// its files), and the view serving it stops. It is how a forced session
// close ends a view whose files are held open, instead of waiting for
// the last holder as a lazy detach alone does.
func abortConnection(conn int) error {
	file := filepath.Join(fuseConnections, strconv.Itoa(conn), "abort")
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		if err := unix.Mount("fusectl", fuseConnections, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("abort FUSE connection %d: mount fusectl: %w", conn, err)
		}
		defer unix.Unmount(fuseConnections, unix.MNT_DETACH)
	}
	if err := os.WriteFile(file, []byte("1"), 0); err != nil {
		return fmt.Errorf("abort FUSE connection %d: %w", conn, err)
	}
	return nil
}
