//go:build linux

// Package fuseuring serves a go-fuse mount over FUSE-over-io_uring (Linux
// 6.14+): one ring per possible CPU, each with a few queue entries that own
// a header buffer and a payload buffer. The kernel delivers a request into
// an entry's buffers as the completion of the entry's last submission; the
// loop hands the request to the same go-fuse protocol code, and therefore
// the same fuse.RawFileSystem, that serves /dev/fuse, writes the reply into
// the entry's buffers and submits COMMIT_AND_FETCH, which carries the reply
// and waits for the entry's next request.
//
// go-fuse's Server goes on reading /dev/fuse: the kernel still sends FORGET
// and INTERRUPT there, and notifications are written there. Requests served
// here are registered in the Server's own table of requests in flight, so
// an INTERRUPT it reads cancels a request served by a ring (a blocked lock
// wait ends with EINTR).
package fuseuring

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// ParamPath is the fuse module's switch for io_uring: off by default, only
// root may turn it on, and the daemon never does it for the operator.
const ParamPath = "/sys/module/fuse/parameters/enable_uring"

// ErrDisabled is returned when the kernel does not offer the transport.
var ErrDisabled = errors.New("FUSE over io_uring is off: " + ParamPath + " is not Y (echo Y > " + ParamPath + " as root)")

// ErrUnsupported is returned when the kernel has no FUSE io_uring at all.
var ErrUnsupported = errors.New("this kernel has no FUSE over io_uring (" + ParamPath + " is missing; Linux 6.14+ with CONFIG_FUSE_IO_URING)")

// Enabled says whether the kernel offers FUSE over io_uring to new mounts:
// nil, ErrDisabled, or ErrUnsupported.
func Enabled() error {
	b, err := os.ReadFile(ParamPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ErrUnsupported
		}
		return fmt.Errorf("read %s: %w", ParamPath, err)
	}
	if strings.TrimSpace(string(b)) != "Y" {
		return ErrDisabled
	}
	return nil
}

// Capability is the INIT flag (flags2 bit 9, FUSE_OVER_IO_URING) a
// daemon sets in MountOptions.ExtraCapabilities to accept io_uring; the
// kernel offers it only when the module parameter is on.
const Capability = fuse.CAP_OVER_IO_URING

// Options size a transport.
type Options struct {
	// Depth is the number of entries per queue (per CPU): how many
	// requests of one CPU the daemon works on at once. A request that
	// blocks (a lock wait) holds its entry until it ends.
	Depth int
	// MaxWrite is the mount's MaxWrite; the kernel requires payload
	// buffers that hold the largest request.
	MaxWrite int
	// Logger receives what the kernel refused; nil: slog.Default().
	Logger *slog.Logger
	// Served is called once for every request served over a ring.
	Served func()
	// Dev, when set, is called once for every request the file system
	// gets over /dev/fuse (all of them if the rings do not start).
	Dev func()

	onRing *sync.Map // the requests being served by a ring, for Dev
}

// DefaultDepth is the entries per queue: enough for a few concurrent
// requests per CPU, and one blocked lock wait without stalling the CPU's
// other requests, while a view's idle cost stays a few payload buffers
// per CPU (their pages are only resident once a request used them).
const DefaultDepth = 4

// Transport is the set of rings serving one mount.
type Transport struct {
	queues []*queue
	wg     sync.WaitGroup
	fd     int
	once   sync.Once
}

// Start registers rings for the mount server serves. It must run once
// INIT is answered and before any other request is read: once INIT said
// FUSE_OVER_IO_URING, the kernel holds every request until each CPU's
// queue has an entry (or a registration failed). Wrap arranges that. On
// error nothing is left registered and the mount goes on over /dev/fuse.
func Start(server *fuse.Server, opts Options) (*Transport, error) {
	if opts.Depth <= 0 {
		opts.Depth = DefaultDepth
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Served == nil {
		opts.Served = func() {}
	}
	if server.KernelSettings().Flags64()&Capability == 0 {
		return nil, fmt.Errorf("the kernel did not offer FUSE_OVER_IO_URING in INIT (was %s off at mount time?)", ParamPath)
	}
	ps, fd, err := attach(server)
	if err != nil {
		return nil, err
	}
	nq, err := possibleCPUs()
	if err != nil {
		fallBack(fd)
		unix.Close(fd)
		return nil, err
	}
	page := os.Getpagesize()
	maxPages := (opts.MaxWrite-1)/page + 1
	payload := PayloadSize(opts.MaxWrite, maxPages, page)
	t := &Transport{fd: fd}
	started := make(chan error, nq)
	for qid := range nq {
		q := &queue{t: t, ps: ps, fd: fd, qid: uint16(qid), depth: opts.Depth, payloadSize: payload, log: opts.Logger, served: opts.Served, onRing: opts.onRing}
		if q.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
			t.finish()
			fallBack(fd)
			return nil, fmt.Errorf("eventfd: %w", err)
		}
		t.queues = append(t.queues, q)
	}
	for _, q := range t.queues {
		t.wg.Add(1)
		go q.run(started)
	}
	var first error
	for range nq {
		if err := <-started; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		t.Close()
		fallBack(fd)
		t.finish()
		return nil, first
	}
	go func() {
		t.wg.Wait()
		t.finish()
	}()
	return t, nil
}

// finish closes what the rings shared, once they have all stopped.
func (t *Transport) finish() {
	t.once.Do(func() {
		for _, q := range t.queues {
			unix.Close(q.efd)
		}
		unix.Close(t.fd)
	})
}

// Queues is the number of rings (one per possible CPU).
func (t *Transport) Queues() int { return len(t.queues) }

// Close stops the rings. The kernel ends them by itself when the mount
// goes (unmount, abort, the daemon's death); Close is for a transport
// that must stop while the mount stays.
func (t *Transport) Close() {
	for _, q := range t.queues {
		q.stop()
	}
	t.wg.Wait()
}

// Wait returns once every ring has stopped.
func (t *Transport) Wait() { t.wg.Wait() }

// possibleCPUs is the kernel's num_possible_cpus(): the ring has a queue
// per possible CPU and serves nothing until every one has an entry.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, fmt.Errorf("possible CPUs: %w", err)
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

// parseCPUList counts the CPUs in a kernel CPU list ("0-3,8").
func parseCPUList(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("CPU list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		n += b - a + 1
	}
	if n == 0 {
		return 0, fmt.Errorf("CPU list %q is empty", s)
	}
	return n, nil
}

// queue is one ring: its entries, their buffers, and the loop that serves
// them on a thread of its own.
type queue struct {
	t           *Transport
	ps          *fuse.ProtocolServer
	fd          int
	qid         uint16
	depth       int
	payloadSize int
	log         *slog.Logger
	served      func()
	onRing      *sync.Map

	r       *ring
	hdrMem  []byte
	ents    []entry
	efd     int
	efdBuf  []byte
	stopped atomic.Bool

	mu   sync.Mutex
	done []int // entries whose request a goroutine finished
	live int   // entries the kernel still holds or we work on
}

// entry is one queue entry: a header buffer, a payload buffer and the
// iovec pair that names them to the kernel.
type entry struct {
	hdr     []byte
	payload []byte
	iov     *[2]unix.Iovec
	commit  uint64
	unique  uint64
}

const efdTag = ^uint64(0)

func (q *queue) stop() {
	if q.stopped.CompareAndSwap(false, true) {
		var one [8]byte
		one[0] = 1
		unix.Write(q.efd, one[:])
	}
}

// run owns the ring: it is created, fed and reaped on one locked thread
// (the kernel copies requests into the buffers in that thread's context).
func (q *queue) run(started chan<- error) {
	defer q.t.wg.Done()
	// Never unlocked: the thread ends with the goroutine, and its CPU
	// mask (pin) with it, instead of going back to the scheduler.
	runtime.LockOSThread()
	q.pin()
	if err := q.setup(); err != nil {
		q.release()
		started <- err
		return
	}
	started <- nil
	q.loop()
	q.release()
}

// pin keeps the queue's thread on the CPU whose requests it serves (the
// kernel queues a request on its caller's CPU), as libfuse does, when the
// process may run there.
func (q *queue) pin() {
	var all, one unix.CPUSet
	if unix.SchedGetaffinity(0, &all) != nil || !all.IsSet(int(q.qid)) {
		return
	}
	one.Set(int(q.qid))
	unix.SchedSetaffinity(0, &one)
}

func (q *queue) setup() error {
	var err error
	if q.r, err = newRing(uint32(q.depth+1), 0); err != nil {
		return err
	}
	// Headers, iovecs and the eventfd's counter live outside the Go heap:
	// the kernel holds their addresses.
	per := (HeaderSize + 15) &^ 15
	iovOff := per * q.depth
	size := iovOff + q.depth*int(unsafe.Sizeof([2]unix.Iovec{})) + 8
	if q.hdrMem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return fmt.Errorf("header buffers: %w", err)
	}
	q.efdBuf = q.hdrMem[size-8:]
	q.ents = make([]entry, q.depth)
	for i := range q.ents {
		e := &q.ents[i]
		e.hdr = q.hdrMem[i*per : i*per+HeaderSize]
		// Anonymous memory is resident only where a request wrote: an
		// idle entry costs its page tables, not its megabyte.
		if e.payload, err = unix.Mmap(-1, 0, q.payloadSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
			return fmt.Errorf("payload buffer: %w", err)
		}
		e.iov = (*[2]unix.Iovec)(unsafe.Pointer(&q.hdrMem[iovOff+i*int(unsafe.Sizeof([2]unix.Iovec{}))]))
		e.iov[0].Base, e.iov[0].Len = &e.hdr[0], uint64(len(e.hdr))
		e.iov[1].Base, e.iov[1].Len = &e.payload[0], uint64(len(e.payload))
	}
	q.armEventfd()
	for i := range q.ents {
		sqe := q.r.getSQE()
		encodeURingCmd(sqe, q.fd, cmdRegister, uintptr(unsafe.Pointer(q.ents[i].iov)), uint64(i), cmdReq{qid: q.qid})
	}
	q.live = q.depth
	// A refused registration completes at once; an accepted one only
	// when a request comes. Submit without waiting, then look.
	if err := q.r.enter(false); err != nil {
		return err
	}
	var refused error
	q.r.reap(func(c cqe) {
		if c.userData != efdTag && c.res < 0 && refused == nil {
			refused = fmt.Errorf("FUSE_IO_URING_CMD_REGISTER (queue %d): %w", q.qid, unix.Errno(-c.res))
		}
		if c.userData != efdTag && c.res >= 0 {
			q.handle(int(c.userData))
		}
	})
	return refused
}

func (q *queue) release() {
	if q.r != nil {
		q.r.close()
	}
	for _, e := range q.ents {
		if e.payload != nil {
			unix.Munmap(e.payload)
		}
	}
	if q.hdrMem != nil {
		unix.Munmap(q.hdrMem)
	}
}

func (q *queue) armEventfd() {
	sqe := q.r.getSQE()
	sqe[0] = opRead
	putU32(sqe[4:], uint32(int32(q.efd)))
	putU64(sqe[8:], ^uint64(0))
	putU64(sqe[16:], uint64(uintptr(unsafe.Pointer(&q.efdBuf[0]))))
	putU32(sqe[24:], 8)
	putU64(sqe[32:], efdTag)
}

func (q *queue) loop() {
	for !q.stopped.Load() && q.live > 0 {
		if err := q.r.enter(true); err != nil {
			q.log.Error("fuse io_uring: ring failed", "queue", q.qid, "err", err)
			return
		}
		q.r.reap(func(c cqe) {
			if c.userData == efdTag {
				q.collectDone()
				q.armEventfd()
				return
			}
			i := int(c.userData)
			if c.res < 0 {
				// The connection ended (unmount, abort) or the
				// kernel refused a reply: the entry is gone.
				q.mu.Lock()
				q.live--
				q.mu.Unlock()
				if e := unix.Errno(-c.res); e != unix.ENOTCONN && e != unix.ECONNABORTED && e != unix.ECANCELED {
					q.log.Warn("fuse io_uring: entry ended", "queue", q.qid, "err", e)
				}
				return
			}
			q.handle(i)
		})
	}
}

// collectDone submits the replies goroutines finished.
func (q *queue) collectDone() {
	q.mu.Lock()
	done := q.done
	q.done = nil
	q.mu.Unlock()
	for _, i := range done {
		q.commit(i)
	}
}

// mayBlock is the request that can wait without bound in the file system
// (a lock wait): it is served on a goroutine of its own so that the
// entry's queue goes on with the CPU's other requests. Every other
// request is served on the ring's thread, as libfuse does: handing each
// to a goroutine and its reply back through the eventfd made memfs over
// io_uring 3-5× slower than over /dev/fuse (docs/performance.md). The
// price: a handler that waited for a later request of the same CPU's
// queue would wait for ever. The lock wait is the one such wait served
// apart; no other is known in shedfs, but none is ruled out either
// (docs/design.md, "FUSE over io_uring").
func mayBlock(opcode uint32) bool { return opcode == opSetLkW }

const opSetLkW = 33

// handle serves the request the kernel put into entry i.
func (q *queue) handle(i int) {
	e := &q.ents[i]
	req, err := parseRequest(e.hdr, e.payload)
	e.commit, e.unique = req.commitID, req.unique
	if err != nil {
		q.log.Warn("fuse io_uring: bad request", "queue", q.qid, "err", err)
		setError(e.hdr, req.unique, req.commitID, int32(unix.EIO))
		q.commit(i)
		return
	}
	if mayBlock(req.opcode) {
		go func() {
			q.serve(e, req)
			q.mu.Lock()
			q.done = append(q.done, i)
			q.mu.Unlock()
			var one [8]byte
			one[0] = 1
			unix.Write(q.efd, one[:])
		}()
		return
	}
	q.serve(e, req)
	q.commit(i)
}

// serve runs the request through go-fuse and leaves the reply in the
// entry's buffers.
func (q *queue) serve(e *entry, req request) {
	q.served()
	if q.onRing != nil {
		q.onRing.Store(req.unique, struct{}{})
		defer q.onRing.Delete(req.unique)
	}
	in := [][]byte{req.inHeader, req.opHeader, req.payload}
	out := [][]byte{e.hdr[:outHeaderSize], e.payload}
	n, st := q.ps.HandleRequest(in, out)
	if !st.Ok() || n < outHeaderSize {
		// go-fuse refused before writing a reply (a request too
		// short, buffers too small): the kernel still needs one.
		code := int32(unix.EIO)
		if !st.Ok() {
			code = int32(st)
		}
		setError(e.hdr, req.unique, req.commitID, code)
		return
	}
	setReply(e.hdr, req.commitID, n)
}

func (q *queue) commit(i int) {
	sqe := q.r.getSQE()
	if sqe == nil {
		// More entries than SQ slots cannot happen (the ring has
		// depth+1); flush and retry rather than lose the reply.
		q.r.enter(false)
		if sqe = q.r.getSQE(); sqe == nil {
			q.log.Error("fuse io_uring: submission queue full", "queue", q.qid)
			return
		}
	}
	e := &q.ents[i]
	encodeURingCmd(sqe, q.fd, cmdCommitAndFetch, uintptr(unsafe.Pointer(e.iov)), uint64(i), cmdReq{qid: q.qid, commitID: e.commit})
}

// fallBack makes the kernel give up io_uring for the connection on fd:
// a refused REGISTER clears the connection's io_uring flag and releases
// the requests held for the ring. Without it, a mount whose INIT accepted
// io_uring but whose rings never came up would hang every request.
func fallBack(fd int) {
	// A single-issuer ring takes submissions from the thread that made it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := newRing(2, 0)
	if err != nil {
		return
	}
	defer r.close()
	var iov [2]unix.Iovec // a zero-length header: -EINVAL
	sqe := r.getSQE()
	encodeURingCmd(sqe, fd, cmdRegister, uintptr(unsafe.Pointer(&iov)), 0, cmdReq{})
	r.enter(true)
	runtime.KeepAlive(&iov)
	r.reap(func(cqe) {})
}

// Wrap prepares a mount for the transport: it adds Capability to mo and
// returns fs with an Init that starts the rings right after go-fuse
// answers INIT (go-fuse calls RawFileSystem.Init then, before it reads the
// next request). done gets the transport, or why there is none; the mount
// is served over /dev/fuse then. When this go-fuse's layout is not the one
// attach knows, Wrap leaves mo and fs alone (the kernel must not be told
// io_uring without rings to follow) and calls done with the reason.
func Wrap(fs fuse.RawFileSystem, mo *fuse.MountOptions, opts Options, done func(*Transport, error)) fuse.RawFileSystem {
	if err := checkLayout(); err != nil {
		done(nil, err)
		return fs
	}
	mo.ExtraCapabilities |= Capability
	if opts.Dev != nil {
		opts.onRing = &sync.Map{}
		fs = &counting{RawFileSystem: fs, onRing: opts.onRing, dev: opts.Dev}
	}
	return &initHook{RawFileSystem: fs, opts: opts, done: done}
}

type initHook struct {
	fuse.RawFileSystem
	opts Options
	done func(*Transport, error)
}

func (h *initHook) Init(s *fuse.Server) {
	h.RawFileSystem.Init(s)
	t, err := Start(s, h.opts)
	h.done(t, err)
}
