package fusehandover

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Ledger is a fuse.RawFileSystem that passes every request on and
// records what the kernel holds once the reply leaves: how many lookups
// of each node ID (the count FORGET hands back), and each open file
// handle. That is what a new process must re-register (Restore) so that
// the kernel's next request about a node or handle finds it.
type Ledger struct {
	fuse.RawFileSystem

	mu      sync.Mutex
	nodes   map[uint64]uint64
	handles map[uint64]Handle
}

// Handle is one open file handle the kernel holds.
type Handle struct {
	Fh     uint64 `json:"fh"`
	NodeID uint64 `json:"node"`
	// Flags are the open(2) flags.
	Flags uint32 `json:"flags"`
	// Dir is a handle from OPENDIR.
	Dir bool `json:"dir,omitempty"`
	// Uid and Gid are the opener's.
	Uid uint32 `json:"uid"`
	Gid uint32 `json:"gid"`
}

// Node is one node ID the kernel holds, and how many lookups of it.
type Node struct {
	ID      uint64 `json:"id"`
	Lookups uint64 `json:"lookups"`
}

// Held is what the kernel of one connection holds.
type Held struct {
	Nodes   []Node   `json:"nodes"`
	Handles []Handle `json:"handles"`
}

// NewLedger wraps raw.
func NewLedger(raw fuse.RawFileSystem) *Ledger {
	return &Ledger{RawFileSystem: raw, nodes: make(map[uint64]uint64), handles: make(map[uint64]Handle)}
}

// Held returns what the kernel holds; it is exact once no request is
// being served.
func (l *Ledger) Held() Held {
	l.mu.Lock()
	defer l.mu.Unlock()
	var h Held
	for id, n := range l.nodes {
		h.Nodes = append(h.Nodes, Node{ID: id, Lookups: n})
	}
	for _, hd := range l.handles {
		h.Handles = append(h.Handles, hd)
	}
	slices.SortFunc(h.Nodes, func(a, b Node) int { return cmpU64(a.ID, b.ID) })
	slices.SortFunc(h.Handles, func(a, b Handle) int { return cmpU64(a.Fh, b.Fh) })
	return h
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (l *Ledger) looked(st fuse.Status, id uint64) {
	if st != fuse.OK || id == 0 {
		return
	}
	l.mu.Lock()
	l.nodes[id]++
	l.mu.Unlock()
}

func (l *Ledger) opened(st fuse.Status, fh uint64, h Handle) {
	if st != fuse.OK || fh == 0 {
		return
	}
	h.Fh = fh
	l.mu.Lock()
	l.handles[fh] = h
	l.mu.Unlock()
}

func (l *Ledger) released(fh uint64) {
	l.mu.Lock()
	delete(l.handles, fh)
	l.mu.Unlock()
}

// Lookup implements fuse.RawFileSystem.
func (l *Ledger) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	st := l.RawFileSystem.Lookup(cancel, header, name, out)
	l.looked(st, out.NodeId)
	return st
}

// Mknod implements fuse.RawFileSystem.
func (l *Ledger) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	st := l.RawFileSystem.Mknod(cancel, in, name, out)
	l.looked(st, out.NodeId)
	return st
}

// Mkdir implements fuse.RawFileSystem.
func (l *Ledger) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	st := l.RawFileSystem.Mkdir(cancel, in, name, out)
	l.looked(st, out.NodeId)
	return st
}

// Link implements fuse.RawFileSystem.
func (l *Ledger) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	st := l.RawFileSystem.Link(cancel, in, name, out)
	l.looked(st, out.NodeId)
	return st
}

// Symlink implements fuse.RawFileSystem.
func (l *Ledger) Symlink(cancel <-chan struct{}, header *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	st := l.RawFileSystem.Symlink(cancel, header, target, name, out)
	l.looked(st, out.NodeId)
	return st
}

// Create implements fuse.RawFileSystem.
func (l *Ledger) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := l.RawFileSystem.Create(cancel, in, name, out)
	l.looked(st, out.NodeId)
	l.opened(st, out.Fh, Handle{NodeID: out.NodeId, Flags: in.Flags, Uid: in.Uid, Gid: in.Gid})
	return st
}

// Tmpfile implements fuse.RawFileSystem.
func (l *Ledger) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	st := l.RawFileSystem.Tmpfile(cancel, in, out)
	l.looked(st, out.NodeId)
	l.opened(st, out.Fh, Handle{NodeID: out.NodeId, Flags: in.Flags, Uid: in.Uid, Gid: in.Gid})
	return st
}

// ReadDirPlus implements fuse.RawFileSystem.
func (l *Ledger) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	st := l.RawFileSystem.ReadDirPlus(cancel, in, out)
	if st == fuse.OK {
		PlusNodeIDs(out.Bytes(), func(id uint64) { l.looked(fuse.OK, id) })
	}
	return st
}

// Forget implements fuse.RawFileSystem.
func (l *Ledger) Forget(nodeid, nlookup uint64) {
	l.RawFileSystem.Forget(nodeid, nlookup)
	l.mu.Lock()
	if n := l.nodes[nodeid]; n <= nlookup {
		delete(l.nodes, nodeid)
	} else {
		l.nodes[nodeid] = n - nlookup
	}
	l.mu.Unlock()
}

// Open implements fuse.RawFileSystem.
func (l *Ledger) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := l.RawFileSystem.Open(cancel, in, out)
	l.opened(st, out.Fh, Handle{NodeID: in.NodeId, Flags: in.Flags, Uid: in.Uid, Gid: in.Gid})
	return st
}

// OpenDir implements fuse.RawFileSystem.
func (l *Ledger) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := l.RawFileSystem.OpenDir(cancel, in, out)
	l.opened(st, out.Fh, Handle{NodeID: in.NodeId, Flags: in.Flags, Dir: true, Uid: in.Uid, Gid: in.Gid})
	return st
}

// Release implements fuse.RawFileSystem.
func (l *Ledger) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	l.RawFileSystem.Release(cancel, in)
	l.released(in.Fh)
}

// ReleaseDir implements fuse.RawFileSystem.
func (l *Ledger) ReleaseDir(in *fuse.ReleaseIn) {
	l.RawFileSystem.ReleaseDir(in)
	l.released(in.Fh)
}

// direntSize is the fixed part of struct fuse_dirent (ino, off, namelen,
// type), before the name.
const direntSize = 24

// PlusNodeIDs calls fn with the node ID of each entry of a READDIRPLUS
// reply that hands the kernel a node (not ".", "..", or a name whose
// lookup failed, which carry node ID 0). The reply is the kernel's struct
// fuse_direntplus, one after another: an entry_out, a dirent, its name
// padded to 8 bytes.
func PlusNodeIDs(b []byte, fn func(id uint64)) {
	entrySize := int(unsafe.Sizeof(fuse.EntryOut{}))
	for len(b) >= entrySize+direntSize {
		if id := binary.NativeEndian.Uint64(b); id != 0 {
			fn(id)
		}
		nameLen := int(binary.NativeEndian.Uint32(b[entrySize+16:]))
		size := entrySize + (direntSize+nameLen+7)&^7
		if size > len(b) {
			break
		}
		b = b[size:]
	}
}

// reopenDrop are the open flags that acted at the first open and must not
// act again when a handle is re-registered.
const reopenDrop = syscall.O_CREAT | syscall.O_EXCL | syscall.O_TRUNC

// Restore registers in raw (a fresh file system, not yet serving, whose
// outermost layer is given) what held says the kernel holds: each node's
// lookups, through LOOKUP of "." (which go-fuse resolves by node ID,
// fs.NodeLookupNoder), and each handle under its own number. go-fuse
// numbers a fresh file system's handles 1, 2, 3...: the handles are
// opened again in order, the gaps filled with handles of the root
// directory, which are released at the end.
func Restore(raw fuse.RawFileSystem, held Held) error {
	for _, n := range held.Nodes {
		for range n.Lookups {
			var out fuse.EntryOut
			h := fuse.InHeader{NodeId: n.ID}
			if st := raw.Lookup(nil, &h, ".", &out); st != fuse.OK {
				return fmt.Errorf("restore node %d: %v", n.ID, st)
			}
		}
	}
	var fillers []uint64
	defer func() {
		for _, fh := range fillers {
			raw.ReleaseDir(&fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: fuse.FUSE_ROOT_ID}, Fh: fh})
		}
	}()
	next := uint64(1)
	for _, h := range held.Handles {
		for next < h.Fh {
			var out fuse.OpenOut
			in := fuse.OpenIn{InHeader: fuse.InHeader{NodeId: fuse.FUSE_ROOT_ID}, Flags: syscall.O_RDONLY}
			if st := raw.OpenDir(nil, &in, &out); st != fuse.OK {
				return fmt.Errorf("restore handle %d: fill a gap: %v", h.Fh, st)
			}
			fillers = append(fillers, out.Fh)
			next = out.Fh + 1
		}
		fh, err := reopen(raw, h)
		if err != nil {
			return err
		}
		if fh != h.Fh {
			return fmt.Errorf("restore handle %d of node %d: got handle %d", h.Fh, h.NodeID, fh)
		}
		next = fh + 1
	}
	return nil
}

// reopen opens h's node again as h's opener, and returns the new handle.
func reopen(raw fuse.RawFileSystem, h Handle) (uint64, error) {
	in := fuse.OpenIn{
		InHeader: fuse.InHeader{NodeId: h.NodeID, Caller: fuse.Caller{Owner: fuse.Owner{Uid: h.Uid, Gid: h.Gid}}},
		Flags:    h.Flags &^ reopenDrop,
	}
	var out fuse.OpenOut
	st := fuse.OK
	if h.Dir {
		st = raw.OpenDir(nil, &in, &out)
	} else {
		st = raw.Open(nil, &in, &out)
	}
	if st != fuse.OK {
		return 0, fmt.Errorf("restore handle %d of node %d: %v", h.Fh, h.NodeID, st)
	}
	return out.Fh, nil
}
