package metadata

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

const crashEnv = "SHEDFS_METADATA_CRASH_CHILD"

// TestCrashChild is the child half of TestCrashRecovery: it churns the store
// until killed, printing "synced <name> <size>" for every file whose state
// was made durable and which it never touches again.
func TestCrashChild(t *testing.T) {
	base := os.Getenv(crashEnv)
	if base == "" {
		t.Skip("only runs as the child of TestCrashRecovery")
	}
	s, err := Open(filepath.Join(base, "meta"), Options{})
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(2)
	}
	blobs := dirBlobs{filepath.Join(base, "blobs")}
	root := s.ShareRoot()
	work := must[*shedfs.Inode](t)(s.Create(root, "work", dir(), nil)).Ino
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		tmp := fmt.Sprintf("tmp-%d", i)
		n, err := s.Create(work, tmp, file(0o644), nil)
		if err != nil {
			fmt.Println("create failed:", err)
			os.Exit(3)
		}
		size := int64(i%7) * 1000
		blobs.Truncate(n.Ino, size) // blob first, as the daemon does
		s.Update(n.Ino, func(n *shedfs.Inode) error { n.Size = uint64(size); return nil }, nil)
		sub := fmt.Sprintf("sub-%d", i%5)
		s.Create(work, sub, dir(), nil)
		if p, err := s.Lookup(work, sub); err == nil {
			s.Rename(work, tmp, p.Ino, "moved", 0) // replaces the last one
		}
		if i%3 == 0 {
			if old, err := s.Unlink(work, fmt.Sprintf("tmp-%d", i-3), false); err == nil && old.Nlink == 0 && i%2 == 0 {
				s.Reclaim(old.Ino)
				blobs.Remove(old.Ino)
			}
		}
		if i%10 == 0 {
			keep := fmt.Sprintf("keep-%d", i)
			k, err := s.Create(root, keep, file(0o644), nil)
			if err != nil {
				continue
			}
			ksize := int64(i * 13)
			blobs.Truncate(k.Ino, ksize)
			s.Update(k.Ino, func(n *shedfs.Inode) error { n.Size = uint64(ksize); return nil }, nil)
			if err := s.Sync(); err != nil {
				fmt.Println("sync failed:", err)
				os.Exit(4)
			}
			fmt.Fprintf(out, "synced %s %d\n", keep, ksize)
			out.Flush()
		}
	}
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	base := t.TempDir()
	os.Mkdir(filepath.Join(base, "blobs"), 0o700)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+base)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill the child mid-work once it has made a few files durable and
	// churned on a little longer: a fixed sleep is too short on a loaded
	// machine, where opening the store alone can take a second.
	var said []string
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	for len(said) < 5 && sc.Scan() {
		said = append(said, sc.Text())
	}
	deadline.Stop()
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	for sc.Scan() {
		said = append(said, sc.Text())
	}
	cmd.Wait()
	synced := map[string]uint64{}
	for _, l := range said {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "synced" {
			t.Fatalf("child said %q", l)
		}
		n, _ := strconv.ParseUint(f[2], 10, 64)
		synced[f[1]] = n
	}
	if len(synced) < 3 {
		t.Fatalf("child synced only %d files before the kill", len(synced))
	}

	s := openTest(t, filepath.Join(base, "meta"))
	if s.WasClean() {
		t.Fatal("store killed mid-work reports a clean stop")
	}
	for name, size := range synced {
		n, err := s.Lookup(s.ShareRoot(), name)
		if err != nil {
			t.Fatalf("synced %s lost: %v", name, err)
		}
		if n.Size != size {
			t.Fatalf("synced %s: size %d, want %d", name, n.Size, size)
		}
	}
	blobs := dirBlobs{filepath.Join(base, "blobs")}
	rep, err := s.Check(blobs, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d synced files: %d inodes, %d problems repaired", len(synced), rep.Inodes, len(rep.Problems))
	rep, err = s.Check(blobs, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Fatalf("second check: %+v", rep.Problems)
	}
	for name, size := range synced {
		if n := must[*shedfs.Inode](t)(s.Lookup(s.ShareRoot(), name)); n.Size != size {
			t.Fatalf("check changed synced %s: size %d, want %d", name, n.Size, size)
		}
	}
	// Usage equals the sum of charges.
	var want shedfs.Usage
	must[error](t)(nil, s.kv.View(func(tx Txn) error {
		return tx.Scan([]byte{s.keys.pInode}, nil, func(k, v []byte) error {
			n, err := decodeInode(s.keys.ino(k), v)
			if err != nil {
				return err
			}
			if n.Zone.Kind == shedfs.ZoneShare {
				want.Inodes++
				want.Bytes += chargeOf(n)
			}
			return nil
		})
	}))
	if got := must[shedfs.Usage](t)(s.Usage("share")); got != want {
		t.Fatalf("share usage %+v, inodes say %+v", got, want)
	}
}
