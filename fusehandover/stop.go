//go:build linux

package fusehandover

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// stopSignalEvery is how often Stop wakes the threads still waiting in a
// read of the device.
const stopSignalEvery = 5 * time.Millisecond

// Stop makes server's readers leave the device, so that another Server
// (Adopt) can serve the connection, and returns once server's read loops
// ended; the Server then closes its own descriptor, so dev (from Device)
// must stay open: it keeps the connection alive. Requests the kernel
// queues meanwhile wait for the next reader.
//
// go-fuse has no way to stop reading without unmounting. Its readers wait
// in read(2) and end their loop on any error but EINTR and ENOENT. Stop
// sets O_NONBLOCK on the device's open file (which dev shares), so that a
// read finding no request fails with EAGAIN, and signals the process's
// threads with SIGURG (which the Go runtime expects to arrive at any
// time), so that a read already waiting restarts and finds O_NONBLOCK.
// A reader that finds a request serves it first.
func Stop(server *fuse.Server, dev int, timeout time.Duration) error {
	flags, err := unix.FcntlInt(uintptr(dev), unix.F_GETFL, 0)
	if err != nil {
		return fmt.Errorf("stop reading /dev/fuse: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(dev), unix.F_SETFL, flags|unix.O_NONBLOCK); err != nil {
		return fmt.Errorf("stop reading /dev/fuse: %w", err)
	}
	done := make(chan struct{})
	go func() {
		server.Wait()
		close(done)
	}()
	deadline := time.After(timeout)
	tick := time.NewTicker(stopSignalEvery)
	defer tick.Stop()
	for {
		wakeThreads()
		select {
		case <-done:
			return nil
		case <-deadline:
			return fmt.Errorf("stop reading /dev/fuse: readers still busy after %s", timeout)
		case <-tick.C:
		}
	}
}

// wakeThreads sends SIGURG to every thread of the process.
func wakeThreads() {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	pid := os.Getpid()
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = unix.Tgkill(pid, tid, unix.SIGURG)
		}
	}
}
