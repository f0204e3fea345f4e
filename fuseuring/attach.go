//go:build linux

package fuseuring

import (
	"fmt"
	"os"
	"reflect"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// attach finds, in a running go-fuse Server, the two things go-fuse
// v2.12 does not export and a second transport needs:
//
//   - the protocol handler with the Server's own state. fuse.ProtocolServer
//     (exported, "experimental") parses a request from iovecs, calls the
//     RawFileSystem and writes the reply into iovecs; its only field is
//     the protocolServer the Server itself embeds first. Serving ring
//     requests through the Server's own protocolServer shares what INIT
//     negotiated and, above all, the table of requests in flight, which
//     is what makes an INTERRUPT read from /dev/fuse cancel a request
//     served by a ring.
//   - the /dev/fuse descriptor (duplicated: the rings hold their own).
//
// Both are read through reflection and checked against the layout they
// rely on, so a go-fuse that changes it makes Start fail with this error
// (and auto fall back to /dev/fuse) instead of corrupting memory. The
// upstream fix is small: a Server method returning its ProtocolServer and
// one returning the device fd (go-fuse issue #560 asks for io_uring).
func attach(server *fuse.Server) (*fuse.ProtocolServer, int, error) {
	if err := checkLayout(); err != nil {
		return nil, -1, err
	}
	ps := (*fuse.ProtocolServer)(unsafe.Pointer(server))

	v := reflect.ValueOf(server).Elem()
	ffd := v.FieldByName("fuseFD")
	if !ffd.IsValid() || ffd.Kind() != reflect.Pointer || ffd.IsNil() {
		return nil, -1, fmt.Errorf("go-fuse layout changed: Server has no fuseFD")
	}
	ff := ffd.Elem().FieldByName("file")
	if !ff.IsValid() || ff.Type() != reflect.TypeOf((*os.File)(nil)) {
		return nil, -1, fmt.Errorf("go-fuse layout changed: fuseFD has no *os.File")
	}
	file := *(**os.File)(unsafe.Pointer(ff.UnsafeAddr()))
	if file == nil {
		return nil, -1, fmt.Errorf("the mount has no /dev/fuse descriptor (unmounted?)")
	}
	rc, err := file.SyscallConn()
	if err != nil {
		return nil, -1, fmt.Errorf("/dev/fuse descriptor: %w", err)
	}
	dup, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, -1, fmt.Errorf("/dev/fuse descriptor: %w", err)
	}
	if derr != nil {
		return nil, -1, fmt.Errorf("dup /dev/fuse: %w", derr)
	}
	return ps, dup, nil
}

// checkLayout checks, on the types alone, what attach relies on: Server
// starts with the protocolServer that is ProtocolServer's only field, and
// holds its device in fuseFD.file.
func checkLayout() error {
	st := reflect.TypeOf(fuse.Server{})
	pt := reflect.TypeOf(fuse.ProtocolServer{})
	if st.NumField() == 0 || pt.NumField() != 1 {
		return fmt.Errorf("go-fuse layout changed: Server has %d fields, ProtocolServer %d", st.NumField(), pt.NumField())
	}
	first, inner := st.Field(0), pt.Field(0)
	if !first.Anonymous || first.Offset != 0 || first.Type != inner.Type || inner.Offset != 0 {
		return fmt.Errorf("go-fuse layout changed: Server does not start with ProtocolServer's %s", inner.Type)
	}
	f, ok := st.FieldByName("fuseFD")
	if !ok || f.Type.Kind() != reflect.Pointer || f.Type.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("go-fuse layout changed: Server has no fuseFD")
	}
	if file, ok := f.Type.Elem().FieldByName("file"); !ok || file.Type != reflect.TypeOf((*os.File)(nil)) {
		return fmt.Errorf("go-fuse layout changed: fuseFD has no *os.File")
	}
	return nil
}
