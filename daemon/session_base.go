package daemon

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// A base is a directory of the host (a repository checkout, a data set)
// that a session's scratch starts as a copy of (session open --base):
// copied at the open (cloned where the host filesystem can), so that
// nothing the session does reaches it and nothing done to it later
// reaches the session. Only the admin names one. Every lookup in it goes
// through openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
// RESOLVE_NO_XDEV and O_NOFOLLOW: nothing is followed out of the base or
// onto another filesystem, and a symlink is copied as a symlink.

// beneath is how every entry of a base is opened.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openBeneath opens name in directory dir, never following a symlink nor
// leaving dir.
func openBeneath(dir *os.File, name string, flags uint64) (*os.File, error) {
	fd, err := unix.Openat2(int(dir.Fd()), name, &unix.OpenHow{Flags: flags | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return nil, &os.PathError{Op: "openat2", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// baseSource walks the host directory base into the entries of a fork
// whose content is copied from it.
func baseSource(base string) (*vfs.ForkSource, error) {
	if !filepath.IsAbs(base) {
		return nil, errorf(CodeInvalid, "base %q: give an absolute path of the host", base)
	}
	root, err := os.OpenFile(base, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, errorf(CodeInvalid, "base %s: %v (a directory, not a symlink)", base, err)
	}
	defer root.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(root.Fd()), &st); err != nil {
		return nil, errorf(CodeInvalid, "base %s: %v", base, err)
	}
	es := []metadata.SnapEntry{{Path: "", Ino: st.Ino, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Mtime: time.Unix(st.Mtim.Unix())}}
	if err := walkBase(root, "", &es); err != nil {
		return nil, errorf(CodeInvalid, "base %s: %v", base, err)
	}
	return &vfs.ForkSource{Entries: es, Open: func(e metadata.SnapEntry) (*os.File, error) {
		dir, err := os.OpenFile(base, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, err
		}
		defer dir.Close()
		return openBeneath(dir, e.Path, unix.O_RDONLY)
	}}, nil
}

// walkBase adds the entries below directory dir (at rel in the base), in
// name order, parents before children.
func walkBase(dir *os.File, rel string, es *[]metadata.SnapEntry) error {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", cmpOr(rel, "."), err)
	}
	slices.Sort(names)
	for _, name := range names {
		p := path.Join(rel, name)
		var st unix.Stat_t
		if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				continue // gone meanwhile
			}
			return fmt.Errorf("stat %s: %w", p, err)
		}
		e := metadata.SnapEntry{Path: p, Ino: st.Ino, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Mtime: time.Unix(st.Mtim.Unix()), Nlink: uint32(st.Nlink)}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			e.Size = st.Size
		case syscall.S_IFLNK:
			buf := make([]byte, 4096)
			n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
			if err != nil {
				return fmt.Errorf("read link %s: %w", p, err)
			}
			e.Target = string(buf[:n])
		case syscall.S_IFDIR:
		default:
			continue // devices, fifos, sockets: not copied
		}
		*es = append(*es, e)
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			sub, err := openBeneath(dir, name, unix.O_RDONLY|unix.O_DIRECTORY)
			if err != nil {
				return fmt.Errorf("open %s: %w", p, err)
			}
			err = walkBase(sub, p, es)
			sub.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}
