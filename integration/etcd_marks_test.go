package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shedfs/shedfs/internal/etcdtest"
)

// TestEtcdLingeringMark: a daemon keeps a file's open mark a while after
// its last close (so that opening it again asks etcd nothing), but a file
// removed on another host must not live on for it: B reads a file (its
// mark lingers), A removes it, and the blob goes within the change feed's
// latency, a round trip and the ghost grace (2 s), not after the mark's
// idle time (30 s); the file B still holds open survives as before. fsck
// is clean after.
func TestEtcdLingeringMark(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := newEtcdTeam(t, c)
	s.cli(t, "trash", "retention", "0") // a removed file goes, or waits for its last handle
	a, _ := startEtcdServe(t, s, "alice", "bob")
	b, _ := startEtcdServe(t, s, "alice", "bob")
	ga := func(name string) string { return a.In("alice", "groups", "team-alpha", name) }
	gb := func(name string) string { return b.In("bob", "groups", "team-alpha", name) }
	blobDir := filepath.Dir(s.args[3])

	data := bytes.Repeat([]byte("linger"), 700)
	before := len(blobFiles(t, blobDir))
	mustWrite(t, ga("read-on-b"), data, 0o644)
	if _, ok := within(2*time.Second, func() bool { got, _ := os.ReadFile(gb("read-on-b")); return bytes.Equal(got, data) }); !ok {
		t.Fatal("read-on-b from A not read on B")
	}
	if n := len(blobFiles(t, blobDir)); n != before+1 {
		t.Fatalf("%d blobs after one file was written, want %d", n, before+1)
	}
	// B closed it; its mark lingers. A removes it: B lets the mark go
	// on hearing of it, and reclaims the file.
	wantOK(t, "rm on A of a file B read", os.Remove(ga("read-on-b")))
	took, ok := within(5*time.Second, func() bool {
		time.Sleep(20 * time.Millisecond)
		return len(blobFiles(t, blobDir)) == before
	})
	if !ok {
		t.Errorf("a file read on B and removed on A still has its blob %v after", took)
	} else {
		t.Logf("a file read on B, removed on A: blob gone %v after", took.Round(10*time.Millisecond))
	}

	// Still open on B: it survives the removal on A until B closes.
	mustWrite(t, ga("open-on-b"), data, 0o644)
	var fd *os.File
	if _, ok := within(2*time.Second, func() bool {
		var err error
		fd, err = os.Open(gb("open-on-b"))
		return err == nil
	}); !ok {
		t.Fatal("open-on-b from A not opened on B")
	}
	wantOK(t, "rm on A of a file open on B", os.Remove(ga("open-on-b")))
	time.Sleep(300 * time.Millisecond)
	buf := make([]byte, len(data)+1)
	if n, err := fd.ReadAt(buf, 0); n != len(data) || !bytes.Equal(buf[:n], data) {
		t.Errorf("read on B of a file removed on A while open: %d bytes, %v", n, err)
	}
	fd.Close()
	if took, ok := within(5*time.Second, func() bool {
		time.Sleep(20 * time.Millisecond)
		return len(blobFiles(t, blobDir)) == before
	}); !ok {
		t.Errorf("a file removed on A and then closed on B still has its blob %v after", took)
	}
	a.Stop()
	b.Stop()
	out, errOut, code := runCLI(t, append([]string{"fsck", "--dry-run"}, s.args...)...)
	if code != 0 || !hasCleanLine(out+errOut) {
		t.Errorf("fsck --dry-run: exit %d\n%s%s", code, out, errOut)
	}
}
