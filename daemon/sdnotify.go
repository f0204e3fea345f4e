package daemon

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Notify sends state to the service manager through $NOTIFY_SOCKET
// (sd_notify(3)): "READY=1" once serve mounted every view, so that a
// Type=notify unit counts as started only then and units ordered after it
// find the views; "STOPPING=1" when it begins to stop. Without
// NOTIFY_SOCKET (not started by systemd, or not Type=notify) it does
// nothing. The protocol is one datagram on a unix socket, an abstract one
// when the path starts with '@', so no library is needed for it.
func Notify(state string) error {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil
	}
	return notify(state, -1)
}

// notify sends state, with the descriptor fd when not negative
// (SCM_RIGHTS: "FDSTORE=1", fdstore.go); without NOTIFY_SOCKET it fails.
func notify(state string, fd int) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return errors.New("no service manager ($NOTIFY_SOCKET unset)")
	}
	// A socket of its own, unconnected: net refuses a message with
	// descriptors on a connected datagram socket.
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("notify the service manager: %w", err)
	}
	defer unix.Close(sock)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	// x/sys maps a leading '@' to the abstract namespace's NUL.
	if err := unix.Sendmsg(sock, []byte(state), oob, &unix.SockaddrUnix{Name: path}, 0); err != nil {
		return fmt.Errorf("notify the service manager at %s: %w", path, err)
	}
	return nil
}
