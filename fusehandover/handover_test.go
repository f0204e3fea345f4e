//go:build linux

package fusehandover

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// flatDir serves the regular files of one directory; node IDs are their
// inode numbers, so a second process finds them again (LookupNode).
type flatDir struct {
	fs.Inode
	dir string
}

type flatFile struct {
	fs.Inode
	path string
}

var (
	_ = (fs.NodeLookuper)((*flatDir)(nil))
	_ = (fs.NodeLookupNoder)((*flatDir)(nil))
	_ = (fs.NodeCreater)((*flatDir)(nil))
	_ = (fs.NodeOpener)((*flatFile)(nil))
	_ = (fs.NodeGetattrer)((*flatFile)(nil))
)

func (d *flatDir) child(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := filepath.Join(d.dir, name)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return nil, fs.ToErrno(err)
	}
	out.Attr.FromStat(&st)
	return d.NewInode(ctx, &flatFile{path: p}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: st.Ino}), 0
}

func (d *flatDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return d.child(ctx, name, out)
}

func (d *flatDir) LookupNode(ctx context.Context, id uint64, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	des, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	for _, de := range des {
		info, err := de.Info()
		if err == nil && info.Sys().(*syscall.Stat_t).Ino == id {
			return d.child(ctx, de.Name(), out)
		}
	}
	return nil, syscall.ESTALE
}

func (d *flatDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	fd, err := syscall.Open(filepath.Join(d.dir, name), int(flags)|syscall.O_CREAT, mode)
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	n, e := d.child(ctx, name, out)
	if e != 0 {
		syscall.Close(fd)
		return nil, nil, 0, e
	}
	return n, fs.NewLoopbackFile(fd), 0, 0
}

func (f *flatFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fd, err := syscall.Open(f.path, int(flags), 0)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	return fs.NewLoopbackFile(fd), 0, 0
}

func (f *flatFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Lstat(f.path, &st); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStat(&st)
	return 0
}

// newFlat returns the file system of dir, wrapped in a Ledger.
func newFlat(dir string) (*Ledger, *fuse.MountOptions) {
	var st syscall.Stat_t
	syscall.Stat(dir, &st)
	sec := time.Second
	opts := &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec, ExternalNodeID: true,
		RootStableAttr: &fs.StableAttr{Ino: st.Ino},
		MountOptions:   fuse.MountOptions{FsName: "handover-test", DirectMount: true}}
	return NewLedger(fs.NewNodeFS(&flatDir{dir: dir}, opts)), &opts.MountOptions
}

// handover is what the first process hands the second.
type handover struct {
	Settings fuse.InitIn  `json:"settings"`
	Answer   fuse.InitOut `json:"answer"`
	Held     Held         `json:"held"`
}

// TestMain runs the second process of TestHandover when asked to.
func TestMain(m *testing.M) {
	if os.Getenv("HANDOVER_CHILD") != "" {
		if err := handoverChild(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// handoverChild is the second process of TestHandover: it adopts the
// connection handed over on descriptor 3 and serves it until unmounted.
func handoverChild() error {
	buf, oob := make([]byte, 1<<16), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(3, buf, oob, 0)
	if err != nil {
		return err
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cmsgs) != 1 {
		return fmt.Errorf("control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&cmsgs[0])
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("rights: %v", err)
	}
	var h handover
	if err := json.Unmarshal(buf[:n], &h); err != nil {
		return err
	}
	ledger, mo := newFlat(os.Getenv("HANDOVER_DIR"))
	server, answer, err := Adopt(fds[0], h.Settings, ledger, mo)
	if err != nil {
		return err
	}
	if answer != h.Answer {
		return fmt.Errorf("INIT answered %+v, the first process %+v", answer, h.Answer)
	}
	if err := Restore(ledger, h.Held); err != nil {
		return err
	}
	os.Stdout.WriteString("ready\n")
	server.Serve()
	return nil
}

func TestHandover(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root for FUSE mounts")
		}
		t.Skip("needs root for FUSE mounts")
	}
	dir, mnt := t.TempDir(), t.TempDir()
	ledger, mo := newFlat(dir)
	server, err := fuse.NewServer(ledger, mnt, mo)
	if err != nil {
		t.Fatal(err)
	}
	go server.Serve()
	server.WaitMount()
	var st syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	defer cleanUp(t, mnt, unix.Minor(st.Dev))

	// The second process starts before the first stops serving: a fork
	// closes (and FLUSHes) the files the test holds open in the mount.
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "HANDOVER_CHILD=1", "HANDOVER_DIR="+dir)
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(sp[1]), "handover")}
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	unix.Close(sp[1])

	// Opened before, used after the handover.
	f, err := os.OpenFile(filepath.Join(mnt, "kept"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A handle closed before the handover leaves a gap in the numbers
	// below one kept open (Restore fills it).
	g, err := os.Create(filepath.Join(mnt, "closed-before"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.Create(filepath.Join(mnt, "kept-after-gap"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	g.Close()
	if _, err := f.WriteString("before "); err != nil {
		t.Fatal(err)
	}

	dev, err := Device(server)
	if err != nil {
		t.Fatal(err)
	}
	answer, err := Negotiate(*server.KernelSettings(), fuse.NewDefaultRawFileSystem(), mo)
	if err != nil {
		t.Fatal(err)
	}
	if err := Stop(server, dev, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	state, _ := json.Marshal(handover{Settings: *server.KernelSettings(), Answer: answer, Held: ledger.Held()})
	t.Logf("handed over: %s", state)

	if err := unix.Sendmsg(sp[0], state, unix.UnixRights(dev), nil, 0); err != nil {
		t.Fatal(err)
	}
	// The first process lets go of the connection: the child's clone keeps it.
	syscall.Close(dev)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				ready <- sc.Text()
			}
			t.Log("child:", sc.Text())
		}
		close(ready)
	}()
	select {
	case _, ok := <-ready:
		if !ok {
			t.Fatal("the child ended without taking over")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the child did not take over")
	}

	if _, err := f.WriteString("after"); err != nil {
		t.Fatalf("write through the handle opened before: %v", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := f.Read(buf)
	if err != nil || string(buf[:n]) != "before after" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "closed-before")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "new"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.WriteString("k"); err != nil {
		t.Fatalf("write through the handle above the gap: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// cleanUp leaves no mount and no connection behind, whatever happened:
// a connection nobody reads would hold the test's processes forever.
func cleanUp(t *testing.T, mnt string, conn uint32) {
	if err := os.WriteFile(fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", conn), []byte("1"), 0); err == nil {
		t.Logf("aborted connection %d", conn)
	}
	syscall.Unmount(mnt, syscall.MNT_DETACH)
}

// TestLayout fails when go-fuse no longer keeps its device where Device
// reads it: Device would refuse at run time.
func TestLayout(t *testing.T) {
	if err := checkLayout(); err != nil {
		t.Fatal(err)
	}
}
