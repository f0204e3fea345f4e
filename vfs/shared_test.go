package vfs

import (
	"bytes"
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/internal/etcdtest"
	"github.com/shedfs/shedfs/metadata"
)

// sharedPair is two cores on one etcd store and one blob directory, as
// two daemons on two hosts serve it, each with a view of alice's.
type sharedPair struct {
	a, b   *Core
	sa, sb *metadata.Store
	va, vb *View
	// changed receives the records that b's change feed handed to
	// b.ChangedElsewhere, as its door does (fusefs.FS.Foreign).
	changed chan *shedfs.Inode
}

func newSharedPair(t *testing.T) *sharedPair {
	t.Helper()
	c := etcdtest.Start(t, 1)
	cfg := metadata.EtcdConfig{Endpoints: c.Endpoints(), Prefix: "vfs-test/"}
	dir := t.TempDir()
	b, err := blobs.OpenDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	p := &sharedPair{changed: make(chan *shedfs.Inode, 64)}
	open := func() (*metadata.Store, *Core) {
		st, err := metadata.OpenEtcd(cfg, metadata.Options{})
		if err != nil {
			t.Fatalf("open the store on etcd: %v", err)
		}
		core := New(st, b, Options{})
		core.ServeFiles()
		t.Cleanup(func() { core.CloseFiles(); st.Close() })
		return st, core
	}
	p.sa, p.a = open()
	if _, err := p.sa.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	p.sb, p.b = open()
	p.sb.Follow(func(ch metadata.Change) {
		for _, ino := range ch.Inodes {
			rec, err := p.sb.GetInode(ino)
			if err != nil {
				rec = nil
			}
			p.b.ChangedElsewhere(ino, rec)
			if rec != nil {
				select {
				case p.changed <- rec:
				default:
				}
			}
		}
	})
	for _, v := range []struct {
		core *Core
		view **View
	}{{p.a, &p.va}, {p.b, &p.vb}} {
		if *v.view, err = v.core.NewView("api", "alice", nil, ViewOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// root is v's root directory.
func root(v *View) At { return At{Ino: v.Root(), Zone: v.RootZone(), Paths: paths("")} }

// waitSize waits until b's change feed told b's core that ino has size.
func (p *sharedPair) waitSize(t *testing.T, ino, size uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case rec := <-p.changed:
			if rec.Ino == ino && rec.Size == size {
				return
			}
		case <-deadline:
			t.Fatalf("b's feed did not bring inode %d at size %d", ino, size)
		}
	}
}

// TestSharedOpenFollowsOtherDaemon: a file open on daemon B while daemon
// A writes it reads what A wrote once B learned of it: a second open on B
// (close-to-open) reads all of A's bytes although B's first handle, taken
// when the file was empty, is still open (the open state is shared), and
// that first handle too reads what A appended later. B's open state kept
// the size of B's first open: B's kernel, told the new size, read 0 bytes
// (TestEtcdTrashOpenAcrossHosts under load, when B's release of a probe
// came after its next open).
func TestSharedOpenFollowsOtherDaemon(t *testing.T) {
	p := newSharedPair(t)
	rec, e := p.va.Create(Caller{}, root(p.va), "f", 0o644)
	if e != 0 {
		t.Fatal(e)
	}
	h, _, e := p.va.OpenNew(root(p.va), "f", rec, syscall.O_RDWR)
	if e != 0 {
		t.Fatal(e)
	}
	h.Release()
	at := At{Ino: rec.Ino, Zone: rec.Zone, Paths: paths("/f")}
	ctx := context.Background()
	first, _, e := p.vb.Open(ctx, at, syscall.O_RDONLY)
	if e != 0 {
		t.Fatalf("open on B: %v", e)
	}
	defer first.Release()

	data := bytes.Repeat([]byte("0123456789abcdef"), 1024)
	write := func(off int64) {
		t.Helper()
		w, _, e := p.va.Open(ctx, at, syscall.O_WRONLY)
		if e != 0 {
			t.Fatal(e)
		}
		if n, _, e := w.Write(data, off); e != 0 || n != len(data) {
			t.Fatalf("write on A: %d, %v", n, e)
		}
		w.Release()
	}
	reads := func(what string, h *Handle, want []byte) {
		t.Helper()
		buf := make([]byte, len(want)+1)
		if n, e := h.Read(buf, 0); e != 0 || !bytes.Equal(buf[:n], want) {
			t.Errorf("%s reads %d bytes, %v; want the %d A wrote", what, n, e, len(want))
		}
	}

	write(0)
	p.waitSize(t, rec.Ino, uint64(len(data)))
	second, _, e := p.vb.Open(ctx, at, syscall.O_RDONLY)
	if e != 0 {
		t.Fatalf("second open on B: %v", e)
	}
	defer second.Release()
	reads("a second open on B", second, data)

	write(int64(len(data)))
	p.waitSize(t, rec.Ino, 2*uint64(len(data)))
	reads("B's first handle", first, append(bytes.Clone(data), data...))
}
