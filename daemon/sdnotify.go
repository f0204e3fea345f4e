package daemon

import (
	"fmt"
	"net"
	"os"
)

// Notify sends state to the service manager through $NOTIFY_SOCKET
// (sd_notify(3)): "READY=1" once serve mounted every view, so that a
// Type=notify unit counts as started only then and units ordered after it
// find the views; "STOPPING=1" when it begins to stop. Without
// NOTIFY_SOCKET (not started by systemd, or not Type=notify) it does
// nothing. The protocol is one datagram on a unix socket, an abstract one
// when the path starts with '@' (which Go's resolver maps to the leading
// NUL), so no library is needed for it.
func Notify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify the service manager: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify the service manager: %w", err)
	}
	return nil
}
