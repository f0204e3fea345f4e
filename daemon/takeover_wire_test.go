package daemon

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHandoverBatches: a handover of more views than one message can
// carry descriptors for (SCM_MAX_FD, 253) arrives whole over a real Unix
// socket, each descriptor in its view's place.
func TestHandoverBatches(t *testing.T) {
	const views = 2*maxHandedViews + 47
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*TakeoverConn, 2)
	for i, fd := range sp {
		f := os.NewFile(uintptr(fd), "takeover")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = NewTakeoverConn(c.(*net.UnixConn))
	}
	// Each view's descriptor is the write end of a pipe of its own: the
	// received one must write into that pipe.
	h := &Handover{Version: HandoverVersion}
	var fds, reads []int
	for i := range views {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		reads, fds = append(reads, p[0]), append(fds, p[1])
		h.Views = append(h.Views, HandedView{Key: "u" + string(rune('a'+i%26)), Mountpoint: "/m"})
	}
	sent := make(chan error, 1)
	go func() { sent <- conns[0].SendHandover(h, fds) }()
	got, gotFds, err := conns[1].ReceiveHandover()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if len(got.Views) != views || len(gotFds) != views {
		t.Fatalf("received %d views and %d descriptors, want %d", len(got.Views), len(gotFds), views)
	}
	for i, fd := range gotFds {
		if _, err := unix.Write(fd, []byte{byte(i)}); err != nil {
			t.Fatalf("descriptor %d: %v", i, err)
		}
		unix.Close(fd)
		b := make([]byte, 1)
		if n, err := unix.Read(reads[i], b); err != nil || n != 1 || b[0] != byte(i) {
			t.Fatalf("descriptor %d is not view %d's: read %v, %v", i, i, b[:n], err)
		}
	}
}
