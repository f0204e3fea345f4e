package fusefs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shedfs/shedfs/fusehandover"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// A takeover hands a view's FUSE connection to a new daemon without
// unmounting it (fusehandover): the old daemon stops reading it and hands
// over what its kernel holds; the new one adopts the connection and
// registers the same node IDs, handles and locks before it serves.

// Handover is what a new daemon needs to serve one view of this one.
type Handover struct {
	// Settings are the kernel's INIT, Answer go-fuse's reply to it.
	Settings fuse.InitIn  `json:"settings"`
	Answer   fuse.InitOut `json:"answer"`
	// Held are the node lookups and handles its kernel holds.
	Held fusehandover.Held `json:"held"`
	// Locks are the file locks taken through the view.
	Locks []HandedLock `json:"locks,omitempty"`
	// TrashDirs are the numbers the view gave the directories of its
	// trash/ (which have no store inode), by path.
	TrashDirs map[string]uint64 `json:"trash_dirs,omitempty"`
	// SnapEntries are the numbers the view gave the entries of its
	// snapshots/ (which have no store inode either), by snapshot id NUL
	// path.
	SnapEntries map[string]uint64 `json:"snap_entries,omitempty"`
}

// HandedLock is one lock held through a view, and the handles its owner
// took locks on the file through (closing the last of them releases it).
type HandedLock struct {
	Ino   uint64   `json:"ino"`
	Flock bool     `json:"flock,omitempty"`
	Typ   uint32   `json:"type"`
	Start uint64   `json:"start"`
	End   uint64   `json:"end"`
	Pid   uint32   `json:"pid"`
	Owner uint64   `json:"owner"`
	Fhs   []uint64 `json:"fhs"`
}

// HandOverRefuser is a Transport whose views cannot be handed over
// (FUSE over io_uring: its rings are not); it says why.
type HandOverRefuser interface {
	HandOverRefused() error
}

// takeoverStopTimeout bounds the wait for the view's requests in flight.
const takeoverStopTimeout = 10 * time.Second

// CanHandOver says whether the view's connection can be handed over.
func (v *View) CanHandOver() error {
	return v.fs.handOverRefused()
}

func (f *FS) handOverRefused() error {
	if r, ok := f.opts.Transport.(HandOverRefuser); ok {
		return r.HandOverRefused()
	}
	// A blocking lock call (flock, F_SETLKW) is a request in flight that
	// no other process can answer and that may last forever; ended with
	// EINTR, the kernel would not restart it (without a signal pending,
	// the caller gets ERESTARTSYS, errno 512).
	if n := f.core.LocksWaiting(); n > 0 {
		return fmt.Errorf("%d lock calls wait for a lock (flock, F_SETLKW); try again once they are granted", n)
	}
	return nil
}

// HandOver stops serving the view, leaving it mounted, and returns what a
// new daemon needs to serve it with a descriptor of its connection (the
// caller owns it), also with an error when a request was still being
// served after takeoverStopTimeout: the view then cannot go on here. What the view's processes hold stays held: no handle is
// released, no lock dropped, and requests wait for the new daemon.
func (v *View) HandOver() (Handover, int, error) {
	if err := v.CanHandOver(); err != nil {
		return Handover{}, -1, err
	}
	dev, err := fusehandover.Device(v.server)
	if err != nil {
		return Handover{}, -1, err
	}
	settings := *v.server.KernelSettings()
	answer, err := fusehandover.Negotiate(settings, fuse.NewDefaultRawFileSystem(), v.mo)
	if err != nil {
		syscall.Close(dev)
		return Handover{}, -1, err
	}
	v.handedOver.Store(true)
	// Its readers that stopped cannot read again: when one is still
	// busy, the view is handed over all the same, with the error, for a
	// restart in place to serve it (the caller of the busy request is
	// never answered, the view's other processes go on).
	stopErr := fusehandover.Stop(v.server, dev, takeoverStopTimeout)
	if stopErr != nil {
		stopErr = fmt.Errorf("view of %s: %w", v.name(), stopErr)
	}
	held := v.ledger.Held()
	v.trash.mu.Lock()
	trashDirs := maps.Clone(v.trash.inos)
	v.trash.mu.Unlock()
	v.snaps.mu.Lock()
	snaps := maps.Clone(v.snaps.inos)
	v.snaps.mu.Unlock()
	return Handover{Settings: settings, Answer: answer, Held: held, Locks: v.handedLocks(held), TrashDirs: trashDirs, SnapEntries: snaps}, dev, stopErr
}

// AdoptView serves the view of user (of session ss when not nil) mounted
// at mountpoint, which another daemon handed over (HandOver) with dev.
// The view is ready to serve (Serve) once this returns: the kernel's
// node IDs, handles and locks are registered again.
func (f *FS) AdoptView(user string, ss *metadata.Session, mountpoint string, opts vfs.ViewOptions, h Handover, dev int) (*View, error) {
	if err := f.handOverRefused(); err != nil {
		return nil, err
	}
	v, raw, err := f.newView(user, ss, mountpoint, opts)
	if err != nil {
		return nil, err
	}
	server, answer, err := fusehandover.Adopt(dev, h.Settings, raw, v.mo)
	if err != nil {
		return nil, fmt.Errorf("adopt the view of %s at %s: %w", user, mountpoint, err)
	}
	if answer != h.Answer {
		return nil, fmt.Errorf("adopt the view of %s at %s: this build negotiates %+v, the kernel was told %+v", user, mountpoint, answer, h.Answer)
	}
	v.server, v.adopted = server, true
	v.adoptTrashDirs(h.TrashDirs)
	v.adoptSnapEntries(h.SnapEntries)
	v.restoring.Store(true)
	err = fusehandover.Restore(raw, h.Held)
	if err == nil {
		err = v.retake(raw, h)
	}
	v.restoring.Store(false)
	if err != nil {
		return nil, fmt.Errorf("adopt the view of %s at %s: %w", user, mountpoint, err)
	}
	f.serving(v)
	return v, nil
}

// Serve starts serving an adopted view.
func (v *View) Serve() { go v.server.Serve() }

// unmount detaches the view from the kernel. An adopted view's server
// does not know its mountpoint (fusehandover.Adopt): it is unmounted by
// path, and its readers end on ENODEV.
func (v *View) unmount() error {
	if !v.adopted {
		return v.server.Unmount()
	}
	if err := syscall.Unmount(v.mountpoint, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", v.mountpoint, err)
	}
	v.server.Wait()
	return nil
}

// LookupNode implements fs.NodeLookupNoder: it finds a node by its ID
// alone, which is how an adopted view registers the nodes its kernel
// holds (fusehandover.Restore).
func (n *node) LookupNode(ctx context.Context, id uint64, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	v := n.v
	if id == groupsIno {
		v.groups.fillAttr(&out.Attr)
		return n.NewInode(ctx, v.groups, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: groupsIno}), 0
	}
	if id == vfs.SnapshotsIno {
		return v.lookupSnapshots(ctx, v.root, out), 0
	}
	if p, ok := v.trashDirOf(id); ok {
		return v.trashDirNode(ctx, &v.root.Inode, p, out), 0
	}
	if snap, p, ok := v.snapEntryOf(id); ok {
		t, errno := v.snapshotByID(snap)
		if errno != 0 {
			return nil, syscall.ESTALE
		}
		return v.snapNode(ctx, &v.root.Inode, t, p, out), 0
	}
	rec, err := v.fs.store.GetInode(id)
	if err != nil {
		return nil, syscall.ESTALE
	}
	return v.entryUnder(ctx, &n.Inode, rec, out), 0
}

// adoptTrashDirs numbers the trash/ directories as the old daemon did.
func (v *View) adoptTrashDirs(dirs map[string]uint64) {
	if len(dirs) == 0 {
		return
	}
	v.trash.mu.Lock()
	defer v.trash.mu.Unlock()
	v.trash.inos = maps.Clone(dirs)
	v.trash.next = trashDirIno
	for _, ino := range dirs {
		v.trash.next = max(v.trash.next, ino)
	}
}

// adoptSnapEntries numbers the snapshots/ entries as the old daemon did.
func (v *View) adoptSnapEntries(inos map[string]uint64) {
	if len(inos) == 0 {
		return
	}
	v.snaps.mu.Lock()
	defer v.snaps.mu.Unlock()
	v.snaps.inos = maps.Clone(inos)
	for _, ino := range inos {
		v.snaps.next = max(v.snaps.next, ino-vfs.SnapshotsIno)
	}
}

// snapEntryOf returns the snapshot id and path of the snapshots/ entry
// numbered ino.
func (v *View) snapEntryOf(ino uint64) (string, string, bool) {
	v.snaps.mu.Lock()
	defer v.snaps.mu.Unlock()
	for k, i := range v.snaps.inos {
		if i == ino {
			id, p, _ := strings.Cut(k, "\x00")
			return id, p, true
		}
	}
	return "", "", false
}

// trashDirOf returns the trash/ directory numbered ino.
func (v *View) trashDirOf(ino uint64) (string, bool) {
	v.trash.mu.Lock()
	defer v.trash.mu.Unlock()
	for p, i := range v.trash.inos {
		if i == ino {
			return p, true
		}
	}
	return "", false
}

// lockFhs are, per open handle of a view, the lock owners that took
// locks through it: a takeover takes their locks again through the same
// handles, so that closing them releases the locks as before.
type lockFhs struct {
	mu sync.Mutex
	m  map[uint64]map[uint64]bool
}

func (l *lockFhs) used(fh, owner uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[uint64]map[uint64]bool)
	}
	if l.m[fh] == nil {
		l.m[fh] = make(map[uint64]bool)
	}
	l.m[fh][owner] = true
}

func (l *lockFhs) released(fh uint64) {
	l.mu.Lock()
	delete(l.m, fh)
	l.mu.Unlock()
}

// SetLk implements fuse.RawFileSystem.
func (l *lockingFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	st := l.RawFileSystem.SetLk(cancel, in)
	if st == fuse.OK {
		l.v.lockFhs.used(in.Fh, in.Owner)
	}
	return st
}

// SetLkw implements fuse.RawFileSystem.
func (l *lockingFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	st := l.RawFileSystem.SetLkw(cancel, in)
	if st == fuse.OK {
		l.v.lockFhs.used(in.Fh, in.Owner)
	}
	return st
}

// handedLocks lists the locks held through v with the handles their
// owners used on the file.
func (v *View) handedLocks(held fusehandover.Held) []HandedLock {
	nodeOf := make(map[uint64]uint64, len(held.Handles))
	for _, h := range held.Handles {
		nodeOf[h.Fh] = h.NodeID
	}
	v.lockFhs.mu.Lock()
	defer v.lockFhs.mu.Unlock()
	var out []HandedLock
	for _, l := range v.vv.HeldLocks() {
		hl := HandedLock{Ino: l.Ino, Flock: l.Flock, Typ: l.Type, Start: l.Start, End: l.End, Pid: l.Pid, Owner: l.Owner}
		for fh, owners := range v.lockFhs.m {
			if owners[l.Owner] && v.storeIno(nodeOf[fh]) == l.Ino {
				hl.Fhs = append(hl.Fhs, fh)
			}
		}
		slices.Sort(hl.Fhs)
		out = append(out, hl)
	}
	return out
}

// retake takes the handed locks again, through the handles they were
// taken through.
func (v *View) retake(raw fuse.RawFileSystem, h Handover) error {
	nodeOf := make(map[uint64]uint64, len(h.Held.Handles))
	for _, hd := range h.Held.Handles {
		nodeOf[hd.Fh] = hd.NodeID
	}
	for _, l := range h.Locks {
		for _, fh := range l.Fhs {
			in := fuse.LkIn{
				InHeader: fuse.InHeader{NodeId: nodeOf[fh], Caller: fuse.Caller{Pid: l.Pid}},
				Fh:       fh,
				Owner:    l.Owner,
				Lk:       fuse.FileLock{Start: l.Start, End: l.End, Typ: l.Typ, Pid: l.Pid},
			}
			if l.Flock {
				in.LkFlags = fuse.FUSE_LK_FLOCK
			}
			if st := raw.SetLk(nil, &in); st != fuse.OK {
				return fmt.Errorf("take lock of inode %d again: %v", l.Ino, st)
			}
		}
	}
	return nil
}

// HandOverState is HandOver with the state as JSON, for a daemon that
// keeps its views as vfs.MountedView; like HandOver, it may return a
// state and a descriptor with its error.
func (v *View) HandOverState() (json.RawMessage, int, error) {
	h, dev, err := v.HandOver()
	if dev < 0 {
		return nil, -1, err
	}
	b, merr := json.Marshal(h)
	if merr != nil {
		syscall.Close(dev)
		return nil, -1, fmt.Errorf("view of %s: %w", v.name(), merr)
	}
	return b, dev, err
}

// AdoptViewState is AdoptView with the state as JSON (HandOverState).
func (f *FS) AdoptViewState(user string, ss *metadata.Session, mountpoint string, opts vfs.ViewOptions, state json.RawMessage, dev int) (vfs.MountedView, error) {
	var h Handover
	if err := json.Unmarshal(state, &h); err != nil {
		return nil, fmt.Errorf("adopt the view of %s: %w", user, err)
	}
	v, err := f.AdoptView(user, ss, mountpoint, opts, h, dev)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// HandedOver ends what the FS does in the background once every view
// was handed over, and persists what open files hold, closing nothing:
// the new daemon serves the files the views' processes hold open.
func (f *FS) HandedOver() {
	f.notify.close()
	close(f.stopSweep)
	f.core.PersistFiles()
}
