package daemon

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// CheckFuse tells, before anything is opened, whether this machine can
// mount FUSE at all.
func CheckFuse() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("cannot use /dev/fuse (is the fuse module loaded, and are we root?): %w", err)
	}
	return f.Close()
}

// CheckMountpoint insists on an existing, empty directory, so a mount never
// hides files that are already there.
func CheckMountpoint(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, syscall.ENOTCONN) {
			return fmt.Errorf("mountpoint %s: a dead mount is still there (transport endpoint is not connected); run umount -l %s", dir, dir)
		}
		return fmt.Errorf("mountpoint: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mountpoint %s is not a directory", dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("mountpoint: %w", err)
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); !errors.Is(err, io.EOF) {
		if err != nil {
			return fmt.Errorf("mountpoint: %w", err)
		}
		return fmt.Errorf("mountpoint %s is not empty", dir)
	}
	return nil
}

// EnsureUser creates user on first use, so a single mount command is
// enough to start.
func EnsureUser(s *Store, user string) error {
	_, err := s.Meta.GetUser(user)
	if errors.Is(err, fs.ErrNotExist) {
		_, err = s.Meta.AddUser(user)
	}
	if err != nil {
		return fmt.Errorf("user %q: %w", user, err)
	}
	return nil
}
