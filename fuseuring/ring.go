//go:build linux

package fuseuring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring ABI numbers (include/uapi/linux/io_uring.h). x/sys/unix has the
// syscall numbers but not the ring layout, so the few values the transport
// needs are spelled out here.
const (
	setupSQE128       = 1 << 10
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13
	enterGetEvents    = 1 << 0
	featSingleMmap    = 1 << 0
	offSQRing         = 0
	offCQRing         = 0x8000000
	offSQEs           = 0x10000000
	opNop             = 0
	opRead            = 22
	opURingCmd        = 46
	sqeSize           = 128 // IORING_SETUP_SQE128: FUSE's command needs the big SQE
	cqeSize           = 16
	sqeCmdOffset      = 48 // struct io_uring_sqe: cmd[] starts where addr3 is
	sqeCmdSize        = sqeSize - sqeCmdOffset
	paramsSize        = 120
	sqOffHead         = 40
	cqOffHead         = 80
)

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

func init() {
	// The layout is the kernel's ABI; a mistake here corrupts the ring,
	// so it is checked where it cannot be missed.
	if unsafe.Sizeof(params{}) != paramsSize || unsafe.Offsetof(params{}.sqOff) != sqOffHead || unsafe.Offsetof(params{}.cqOff) != cqOffHead {
		panic("fuseuring: io_uring_params layout")
	}
}

// cqe is struct io_uring_cqe (without CQE32: FUSE puts nothing in the
// second half).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// ring is one io_uring instance: a submission and a completion queue
// mapped from the kernel. It is used by one OS thread (the queue's
// loop), so it has no locks.
type ring struct {
	fd      int
	entries uint32
	flags   uint32

	sqMem, cqMem, sqeMem []byte

	sqHead, sqTail *uint32
	sqMask         uint32
	sqArray        []uint32
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []cqe
	sqes           []byte

	// pending counts SQEs written to the ring but not yet passed to
	// io_uring_enter.
	pending uint32
}

// errSetup wraps what io_uring_setup answered.
var errSetup = errors.New("io_uring_setup")

// newRing sets up a ring of at least entries SQEs. It asks for a single
// issuer with deferred task work first (the loop's thread is the only
// submitter, and the kernel then copies requests into the buffers only
// when that thread waits), and falls back to plain SQE128 on a kernel
// that refuses those flags.
func newRing(entries uint32, extraFlags uint32) (*ring, error) {
	var lastErr error
	for _, f := range []uint32{setupSQE128 | setupSingleIssuer | setupDeferTaskrun | extraFlags, setupSQE128 | extraFlags} {
		p := params{flags: f}
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
		if errno != 0 {
			lastErr = fmt.Errorf("%w (%d entries, flags %#x): %w", errSetup, entries, f, errno)
			if errno == unix.EINVAL {
				continue
			}
			return nil, lastErr
		}
		r := &ring{fd: int(fd), entries: p.sqEntries, flags: f}
		if err := r.mmap(&p); err != nil {
			unix.Close(r.fd)
			return nil, err
		}
		return r, nil
	}
	return nil, lastErr
}

func (r *ring) mmap(p *params) error {
	sqLen := int(p.sqOff.array + p.sqEntries*4)
	cqLen := int(p.cqOff.cqes + p.cqEntries*cqeSize)
	single := p.features&featSingleMmap != 0
	if single && cqLen > sqLen {
		sqLen = cqLen
	}
	var err error
	r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap io_uring SQ ring: %w", err)
	}
	if single {
		r.cqMem = r.sqMem
	} else if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.unmap()
		return fmt.Errorf("mmap io_uring CQ ring: %w", err)
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.unmap()
		return fmt.Errorf("mmap io_uring SQEs: %w", err)
	}
	r.sqHead = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.head]))
	r.sqTail = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.ringMask]))
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.array])), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.ringMask]))
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.cqMem[p.cqOff.cqes])), p.cqEntries)
	r.sqes = r.sqeMem
	return nil
}

func (r *ring) unmap() {
	if r.cqMem != nil && len(r.sqMem) > 0 && &r.cqMem[0] == &r.sqMem[0] {
		r.cqMem = nil
	}
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.sqMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	r.sqeMem, r.cqMem, r.sqMem = nil, nil, nil
}

// close releases the ring; the kernel cancels what is still queued on it.
func (r *ring) close() {
	r.unmap()
	unix.Close(r.fd)
}

// getSQE returns the next free SQE, zeroed, or nil when the SQ is full.
func (r *ring) getSQE() []byte {
	head := atomic.LoadUint32(r.sqHead)
	tail := *r.sqTail + r.pending
	if tail-head >= r.entries {
		return nil
	}
	idx := tail & r.sqMask
	r.sqArray[idx] = idx
	s := r.sqes[int(idx)*sqeSize : int(idx+1)*sqeSize]
	clear(s)
	r.pending++
	return s
}

// enter publishes the pending SQEs and, with wait, blocks until at least
// one completion is there. EINTR (a signal to the thread, or the kernel
// running task work) is not an error: the caller reaps and comes back.
func (r *ring) enter(wait bool) error {
	n := r.pending
	if n > 0 {
		atomic.StoreUint32(r.sqTail, *r.sqTail+n)
		r.pending = 0
	}
	var flags, minComplete uintptr
	if wait {
		flags, minComplete = enterGetEvents, 1
	}
	if n == 0 && !wait {
		return nil
	}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), minComplete, flags, 0, 0)
	if errno != 0 && errno != unix.EINTR && errno != unix.EAGAIN && errno != unix.EBUSY {
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
	return nil
}

// reap calls f for every completion there is and frees them.
func (r *ring) reap(f func(c cqe)) int {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		f(r.cqes[head&r.cqMask])
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}
