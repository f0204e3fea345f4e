package fusefs

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The kernel reads ahead of a sequential reader of a FUSE mount at most
// the mount's read_ahead_kb, which starts at 128 KiB whatever the
// daemon's INIT reply asks for: a cold read of a large file then came to
// the daemon in 128 KiB READs, one or two at a time. Raised after mount
// (as root, through the mount's backing device info in sysfs), the kernel
// sends READs of the full request size (viewMaxWrite) and keeps several
// in flight. A small or random read is not read ahead any further.

// viewReadAheadKB is the read-ahead of every view, in KiB: four requests
// of viewMaxWrite.
const viewReadAheadKB = 4 * viewMaxWrite / 1024

// readAheadPath is the sysfs file holding the read-ahead of the mount at
// mountpoint.
func readAheadPath(mountpoint string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", mountpoint, err)
	}
	return fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev)), nil
}

// setReadAhead raises the read-ahead of the mount at mountpoint to
// viewReadAheadKB. The view works without it, only slower to read large
// files cold.
func setReadAhead(mountpoint string) error {
	path, err := readAheadPath(mountpoint)
	if err != nil {
		return fmt.Errorf("read-ahead: %w", err)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(viewReadAheadKB)), 0); err != nil {
		return fmt.Errorf("read-ahead: %w", err)
	}
	return nil
}
