package fusefs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// Views negotiate FUSE_HANDLE_KILLPRIV_V2: the daemon clears set-user-ID
// and set-group-ID itself where Linux does (acl.SetIDKilled), and in
// exchange the kernel marks the view's superblock SB_NOSEC. Without it,
// the kernel asks for security.capability before every write(2) and
// refreshes the attributes with a GETATTR before every chown of a file:
// for the untar of the Go tree, about 12,000 GETXATTRs and 11,500
// GETATTRs that the daemon answered with nothing to say, since views
// store no security.* attribute (docs/design.md, "Kernel requests"; docs/performance.md, "Fewer kernel requests per file").
const viewCapabilities = fuse.CAP_HANDLE_KILLPRIV_V2

// setIDKillingFS is the view's go-fuse bridge with what the bridge does
// not pass on to file handles: the kernel's FUSE_WRITE_KILL_SUIDGID, set
// on a WRITE by a caller without CAP_FSETID. It marks the write for its
// handle (handle.killSetIDOnWrite) while the bridge runs it.
type setIDKillingFS struct {
	fuse.RawFileSystem
	v *View
}

// Write implements fuse.RawFileSystem.
func (k *setIDKillingFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer k.mark(in)()
	return k.RawFileSystem.Write(cancel, in, data)
}

// Writev implements fuse.RawFileSystem.
func (k *setIDKillingFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	defer k.mark(in)()
	return k.RawFileSystem.Writev(cancel, in, data)
}

// mark records a write that must clear set-ID bits and returns what
// forgets it once the write is answered.
func (k *setIDKillingFS) mark(in *fuse.WriteIn) func() {
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID == 0 {
		return func() {}
	}
	key := setIDWrite{pid: in.Pid, ino: k.v.storeIno(in.NodeId)}
	k.v.setIDWrites.add(key, 1)
	return func() { k.v.setIDWrites.add(key, -1) }
}

// setIDWrite names a write in flight: a thread does one write at a time,
// and the kernel passes its id with every request.
type setIDWrite struct {
	pid uint32
	ino uint64
}

// setIDWrites are the writes in flight that must clear set-ID bits, one
// table per view, counted (pid 0 is every thread outside the daemon's PID
// namespace).
type setIDWrites struct {
	// marked counts the writes in flight in the table, so that every
	// other WRITE (a root caller's, or with none marked) skips the lock.
	marked atomic.Int64
	mu     sync.Mutex
	flying map[setIDWrite]int
}

func (w *setIDWrites) add(key setIDWrite, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.flying == nil {
		w.flying = make(map[setIDWrite]int)
	}
	w.marked.Add(int64(n))
	if w.flying[key] += n; w.flying[key] <= 0 {
		delete(w.flying, key)
	}
}

func (w *setIDWrites) has(key setIDWrite) bool {
	if w.marked.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flying[key] > 0
}

// killSetIDOnWrite clears the file's set-ID bits before a write the
// kernel marked, as write(2) does on Linux. The writer's own kernel keeps
// the file's mode across a WRITE (it drops only size and times), so it is
// told here, before the reply: `stat -c %a` right after the write must
// not show the old bits. An attribute-only invalidation takes no lock the
// writing request holds (no pages), so it may be sent from the callback.
func (h *handle) killSetIDOnWrite(ctx context.Context) syscall.Errno {
	v := h.node.v
	c, ok := fuse.FromContext(ctx)
	if !ok || !v.setIDWrites.has(setIDWrite{pid: c.Pid, ino: h.node.ino}) {
		return 0
	}
	killed, e := h.node.killSetID()
	if killed {
		v.tell(attrOf(h.node.ino))
	}
	return e
}

// killSetIDAfter clears the set-ID bits after a SETATTR that the kernel
// marked FATTR_KILL_SUIDGID (a chown, or a truncate by a caller without
// CAP_FSETID) and succeeded, and answers with the attributes then. So
// does a SETATTR that sets nothing at all: it is what is left of the
// kernel's own clearing (file_remove_privs) once it leaves the bits to
// the daemon, sent before a write, fallocate or copy_file_range by a
// caller without CAP_FSETID to a file it knows has them, and for a
// chown to -1:-1 (which clears them too). For fallocate and
// copy_file_range it is the only word the daemon gets. Nothing admitted
// such a request, so it clears only what the caller may write: a chown
// to -1:-1 by a reader of a shared file leaves it as it is (Linux
// refuses it with EPERM once the mode would change; here the kernel has
// already answered for the mode).
func (n *node) killSetIDAfter(in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if in.Valid&fuse.FATTR_KILL_SUIDGID == 0 && (in.Valid != 0 || !n.mayWrite()) {
		return 0
	}
	killed, e := n.killSetID()
	if e != 0 || !killed {
		return e
	}
	return n.attr(out)
}

// mayWrite reports whether acl lets the view write n's content.
func (n *node) mayWrite() bool {
	rec, e := n.load()
	return e == 0 && acl.Write(n.v.actor(), acl.EntryOf(rec), acl.Quota{}, rec.Size, rec.Size).Allowed()
}

// killSetID clears n's set-ID bits where acl.SetIDKilled says so, as a
// mode change of its own: committed, audited as a chmod and told to the
// other views. It reports whether the mode changed.
func (n *node) killSetID() (bool, syscall.Errno) {
	f := n.v.fs
	rec, e := n.load()
	if e != 0 {
		return false, e
	}
	if acl.SetIDKilled(rec.Mode) == rec.Mode {
		return false, 0
	}
	now := time.Now()
	// Through updateHeld: a mode an open file holds (a chmod since its
	// last persist) is the one to clear, not the stored one.
	_, err := f.core.UpdateHeld(n.ino, func(rec *shedfs.Inode) error {
		rec.Mode = acl.SetIDKilled(rec.Mode)
		rec.Ctime = now
		return nil
	})
	if err != nil {
		return false, f.errno("setattr", err)
	}
	n.changed("chmod", "", 0)
	f.invalidate(n.v, n.zone, attrOf(n.ino))
	return true, 0
}
