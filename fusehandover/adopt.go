//go:build linux

package fusehandover

import (
	"fmt"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fuseDevIocClone is FUSE_DEV_IOC_CLONE, _IOR(229, 0, uint32_t): it
// attaches a freshly opened /dev/fuse to the connection of another.
const fuseDevIocClone = 0x8004e500

// opInit is FUSE_INIT's opcode.
const opInit = 26

// Adopt returns a Server for raw on the connection dev (a descriptor of
// an initialised /dev/fuse, from Device in this or another process),
// ready for Serve. settings are what the kernel sent in the connection's
// INIT (Server.KernelSettings of the Server that mounted it); the reply
// go-fuse makes to them is returned, for the caller to check it is what
// the mounting Server answered (Negotiate).
//
// The Server reads its INIT from one end of a socket pair, where Adopt
// wrote it; once INIT is handled, that descriptor number is replaced
// (dup3) by a clone of dev, an open file of its own on the same
// connection: without the O_NONBLOCK Stop set on the old one, and alive
// when the old process closes its descriptors. The Server's mountpoint is
// go-fuse's /dev/fd/N form, so Server.Unmount refuses: unmount by path.
func Adopt(dev int, settings fuse.InitIn, raw fuse.RawFileSystem, opts *fuse.MountOptions) (*fuse.Server, fuse.InitOut, error) {
	clone, err := cloneDevice(dev)
	if err != nil {
		return nil, fuse.InitOut{}, err
	}
	server, out, err := adoptOn(clone, settings, raw, opts)
	if err != nil {
		unix.Close(clone)
	}
	return server, out, err
}

// adoptOn is Adopt with the clone made.
func adoptOn(clone int, settings fuse.InitIn, raw fuse.RawFileSystem, opts *fuse.MountOptions) (*fuse.Server, fuse.InitOut, error) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fuse.InitOut{}, fmt.Errorf("adopt /dev/fuse: %w", err)
	}
	defer unix.Close(sp[1])
	if err := writeInit(sp[1], settings); err != nil {
		unix.Close(sp[0])
		return nil, fuse.InitOut{}, err
	}
	o := *opts
	// Nothing is mounted: the magic mountpoint names the descriptor.
	o.DirectMount, o.DirectMountStrict = false, false
	server, err := fuse.NewServer(raw, fmt.Sprintf("/dev/fd/%d", sp[0]), &o)
	if err != nil {
		// NewServer closed sp[0].
		return nil, fuse.InitOut{}, fmt.Errorf("adopt /dev/fuse: %w", err)
	}
	out, err := readInitReply(sp[1])
	if err != nil {
		return nil, fuse.InitOut{}, err
	}
	// From here on the Server reads and writes the connection.
	if err := unix.Dup3(clone, sp[0], unix.O_CLOEXEC); err != nil {
		return nil, fuse.InitOut{}, fmt.Errorf("adopt /dev/fuse: %w", err)
	}
	unix.Close(clone)
	return server, out, nil
}

// Negotiate returns what go-fuse answers to the kernel settings with
// opts: what a Server made with them answered at INIT, given the same
// go-fuse. raw is not served; its Init is called.
func Negotiate(settings fuse.InitIn, raw fuse.RawFileSystem, opts *fuse.MountOptions) (fuse.InitOut, error) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fuse.InitOut{}, fmt.Errorf("negotiate: %w", err)
	}
	defer unix.Close(sp[1])
	if err := writeInit(sp[1], settings); err != nil {
		unix.Close(sp[0])
		return fuse.InitOut{}, err
	}
	o := *opts
	o.DirectMount, o.DirectMountStrict = false, false
	// The Server is never served: its descriptor closes with its
	// os.File, when the garbage collector finds it unreachable.
	if _, err := fuse.NewServer(raw, fmt.Sprintf("/dev/fd/%d", sp[0]), &o); err != nil {
		return fuse.InitOut{}, fmt.Errorf("negotiate: %w", err)
	}
	return readInitReply(sp[1])
}

// cloneDevice opens a /dev/fuse of its own on dev's connection.
func cloneDevice(dev int) (int, error) {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("clone /dev/fuse: %w", err)
	}
	src := uint32(dev)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fuseDevIocClone, uintptr(unsafe.Pointer(&src))); e != 0 {
		unix.Close(fd)
		return -1, fmt.Errorf("clone /dev/fuse: %w", e)
	}
	return fd, nil
}

// writeInit writes a FUSE_INIT request carrying the kernel's settings.
func writeInit(fd int, settings fuse.InitIn) error {
	in := settings
	in.InHeader = fuse.InHeader{Length: uint32(unsafe.Sizeof(in)), Opcode: opInit, Unique: 1}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&in)), unsafe.Sizeof(in))
	if _, err := unix.Write(fd, b); err != nil {
		return fmt.Errorf("write the INIT to adopt: %w", err)
	}
	return nil
}

// outHeader is struct fuse_out_header.
type outHeader struct {
	Len    uint32
	Error  int32
	Unique uint64
}

// readInitReply reads the Server's reply to writeInit's request.
func readInitReply(fd int) (fuse.InitOut, error) {
	var out fuse.InitOut
	buf := make([]byte, 4096)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return out, fmt.Errorf("read the INIT reply: %w", err)
	}
	hs := int(unsafe.Sizeof(outHeader{}))
	if n < hs {
		return out, fmt.Errorf("read the INIT reply: %d bytes", n)
	}
	h := (*outHeader)(unsafe.Pointer(&buf[0]))
	if h.Error != 0 {
		return out, fmt.Errorf("INIT refused: %w", unix.Errno(-h.Error))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&out)), unsafe.Sizeof(out)), buf[hs:n])
	return out, nil
}
