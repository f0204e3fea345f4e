//go:build linux

package fuseuring

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/fusehandover"
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
	dup, err := fusehandover.Device(server)
	if err != nil {
		return nil, -1, err
	}
	return ps, dup, nil
}

// checkLayout checks, on the types alone, what attach relies on: Server
// starts with the protocolServer that is ProtocolServer's only field (the
// device is found by fusehandover.Device, which checks its own).
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
	return nil
}
