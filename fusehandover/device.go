//go:build linux

package fusehandover

import (
	"fmt"
	"os"
	"reflect"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Device returns a duplicate of the /dev/fuse descriptor a running Server
// reads; the caller owns it. go-fuse v2.12 does not export the descriptor:
// it is read through reflection and checked against the layout relied on
// (checkLayout), so that a go-fuse that changes it fails here instead of
// corrupting memory.
func Device(server *fuse.Server) (int, error) {
	if err := checkLayout(); err != nil {
		return -1, err
	}
	v := reflect.ValueOf(server).Elem()
	ffd := v.FieldByName("fuseFD")
	if ffd.IsNil() {
		return -1, fmt.Errorf("the server has no /dev/fuse descriptor")
	}
	ff := ffd.Elem().FieldByName("file")
	file := *(**os.File)(unsafe.Pointer(ff.UnsafeAddr()))
	if file == nil {
		return -1, fmt.Errorf("the mount has no /dev/fuse descriptor (unmounted?)")
	}
	rc, err := file.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("/dev/fuse descriptor: %w", err)
	}
	dup, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, fmt.Errorf("/dev/fuse descriptor: %w", err)
	}
	if derr != nil {
		return -1, fmt.Errorf("dup /dev/fuse: %w", derr)
	}
	return dup, nil
}

// checkLayout checks, on the types alone, what Device relies on: the
// Server holds its device in fuseFD.file.
func checkLayout() error {
	st := reflect.TypeOf(fuse.Server{})
	f, ok := st.FieldByName("fuseFD")
	if !ok || f.Type.Kind() != reflect.Pointer || f.Type.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("go-fuse layout changed: Server has no fuseFD")
	}
	if file, ok := f.Type.Elem().FieldByName("file"); !ok || file.Type != reflect.TypeOf((*os.File)(nil)) {
		return fmt.Errorf("go-fuse layout changed: fuseFD has no *os.File")
	}
	return nil
}
