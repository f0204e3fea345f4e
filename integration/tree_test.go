package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// entryInfo is what a tree comparison looks at for one path.
type entryInfo struct {
	Mode     uint32 // full st_mode: type and all permission bits
	UID, GID uint32
	Size     int64
	Mtime    unix.Timespec // not checked for symlinks (see compareTrees)
	Target   string        // symlink target
	Hash     string        // sha256 of a regular file's content
	LinkTo   string        // first path (in walk order) with the same inode
	Nlink    uint64
	Xattrs   string // sorted user.* xattrs other than user.shedfs.*, as k=v lines
}

// treeOpts says what compareTrees checks besides type, size and content.
type treeOpts struct {
	owner  bool // uid and gid
	mtime  bool // modification times (ns) of files and directories
	xattrs bool // user.* extended attributes
}

// scanTree walks root (not following symlinks) and describes every entry
// below it, keyed by the path relative to root. The root itself is "."
func scanTree(t testing.TB, root string) map[string]entryInfo {
	t.Helper()
	out := map[string]entryInfo{}
	seen := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", p, err)
		}
		e := entryInfo{
			Mode: st.Mode, UID: st.Uid, GID: st.Gid, Size: st.Size,
			Mtime: st.Mtim, Nlink: uint64(st.Nlink),
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			e.Target, err = os.Readlink(p)
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			if first, ok := seen[st.Ino]; ok {
				e.LinkTo = first
			} else {
				seen[st.Ino] = rel
			}
			e.Hash, err = hashFile(p)
			if err != nil {
				return err
			}
		case unix.S_IFDIR:
			e.Size = 0 // directory sizes are filesystem-specific
			e.Nlink = 0
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			e.Xattrs, err = userXattrs(p)
			if err != nil {
				return err
			}
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatalf("scanning %s: %v", root, err)
	}
	return out
}

// hashFile returns the hex sha256 of the content of p.
func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashBytes returns the hex sha256 of b.
func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// userXattrs lists the user.* xattrs of p other than shedfs's own
// user.shedfs.* attributes, as sorted "name=value" lines.
func userXattrs(p string) (string, error) {
	sz, err := unix.Llistxattr(p, nil)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return "", nil
		}
		return "", fmt.Errorf("llistxattr %s: %w", p, err)
	}
	if sz == 0 {
		return "", nil
	}
	buf := make([]byte, sz)
	sz, err = unix.Llistxattr(p, buf)
	if err != nil {
		return "", fmt.Errorf("llistxattr %s: %w", p, err)
	}
	var lines []string
	for _, name := range strings.Split(string(buf[:sz]), "\x00") {
		if !strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "user.shedfs.") {
			continue
		}
		val := make([]byte, 64<<10)
		n, err := unix.Lgetxattr(p, name, val)
		if err != nil {
			return "", fmt.Errorf("lgetxattr %s %s: %w", p, name, err)
		}
		lines = append(lines, name+"="+string(val[:n]))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

// compareTrees reports every difference between two scans.
func compareTrees(t testing.TB, what string, want, got map[string]entryInfo, o treeOpts) {
	t.Helper()
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	bad := 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 30 {
			t.Errorf(what+": "+format, args...)
		}
	}
	for _, p := range paths {
		w := want[p]
		g, ok := got[p]
		if !ok {
			report("%s missing", p)
			continue
		}
		isDir := w.Mode&unix.S_IFMT == unix.S_IFDIR
		isLink := w.Mode&unix.S_IFMT == unix.S_IFLNK
		wm, gm := w.Mode, g.Mode
		if isLink {
			// Symlink permission bits mean nothing on Linux.
			wm, gm = wm&unix.S_IFMT, gm&unix.S_IFMT
		}
		if p == "." {
			// The root of the copy is made by the test, not copied.
			continue
		}
		if wm != gm {
			report("%s: mode %#o, want %#o", p, gm, wm)
		}
		if w.Size != g.Size {
			report("%s: size %d, want %d", p, g.Size, w.Size)
		}
		if w.Hash != g.Hash {
			report("%s: content differs", p)
		}
		if w.Target != g.Target {
			report("%s: symlink target %q, want %q", p, g.Target, w.Target)
		}
		if w.LinkTo != g.LinkTo {
			report("%s: hard link to %q, want %q", p, g.LinkTo, w.LinkTo)
		}
		if !isDir && w.Nlink != g.Nlink {
			report("%s: nlink %d, want %d", p, g.Nlink, w.Nlink)
		}
		if o.owner && (w.UID != g.UID || w.GID != g.GID) {
			report("%s: owner %d:%d, want %d:%d", p, g.UID, g.GID, w.UID, w.GID)
		}
		if o.mtime && !isLink && w.Mtime != g.Mtime {
			report("%s: mtime %d.%09d, want %d.%09d", p, g.Mtime.Sec, g.Mtime.Nsec, w.Mtime.Sec, w.Mtime.Nsec)
		}
		if o.xattrs && w.Xattrs != g.Xattrs {
			report("%s: xattrs %q, want %q", p, g.Xattrs, w.Xattrs)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			report("%s: unexpected entry", p)
		}
	}
	if bad > 30 {
		t.Errorf("%s: %d differences in all", what, bad)
	}
}
