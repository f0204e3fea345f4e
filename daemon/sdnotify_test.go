package daemon

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestNotify: Notify sends its state as one datagram to $NOTIFY_SOCKET, a
// path or an abstract name, and does nothing without it.
func TestNotify(t *testing.T) {
	for _, name := range []string{filepath.Join(t.TempDir(), "notify"), "@shedfs-test-notify-" + time.Now().Format("150405.000000000")} {
		ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("NOTIFY_SOCKET", name)
		if err := Notify("READY=1\nSTATUS=serving 2 views"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		buf := make([]byte, 256)
		ln.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := ln.Read(buf)
		ln.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := string(buf[:n]); got != "READY=1\nSTATUS=serving 2 views" {
			t.Errorf("%s: got %q", name, got)
		}
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if err := Notify("READY=1"); err != nil {
		t.Errorf("without NOTIFY_SOCKET: %v", err)
	}
}
