package integration

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCrash kills the daemon with SIGKILL during a write storm. Files whose
// fsync returned must come back with their exact content after
// `shedfs fsck` and a restart; the store must then be clean and hold no
// orphan blob.
func TestCrash(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := startView(t, store, "alice")
	mustMkdir(t, v.Path("w"), 0o755)
	mustMkdir(t, v.Path("churn"), 0o755)

	var (
		mu     sync.Mutex
		synced = map[string]string{} // name in w/ -> sha256, recorded after fsync returned
		errs   = map[string]int{}    // errors the writers saw once the daemon died
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	fail := func(err error) {
		mu.Lock()
		errs[errString(err)]++
		mu.Unlock()
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	// Writers: every other file is fsync'd and recorded once Sync returned.
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := 0; !stopped(); i++ {
				name := fmt.Sprintf("w%d-%04d", w, i)
				data := make([]byte, 1+rng.Intn(192<<10))
				rng.Read(data)
				f, err := os.OpenFile(v.Path("w", name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
				if err != nil {
					fail(err)
					return
				}
				for off := 0; off < len(data); off += 16 << 10 {
					if _, err := f.Write(data[off:min(off+16<<10, len(data))]); err != nil {
						fail(err)
						f.Close()
						return
					}
				}
				if i%2 == 0 {
					if err := f.Sync(); err != nil {
						fail(err)
						f.Close()
						return
					}
					mu.Lock()
					synced[name] = hashBytes(data)
					mu.Unlock()
				}
				if err := f.Close(); err != nil {
					fail(err)
					return
				}
			}
		}(w)
	}
	// Churn without fsync: rewrite, rename over, append, unlink.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(99))
		buf := make([]byte, 64<<10)
		for i := 0; !stopped(); i++ {
			rng.Read(buf)
			tmp, final := v.Path("churn", "tmp"), v.Path("churn", "f"+strconv.Itoa(i%8))
			if err := os.WriteFile(tmp, buf[:rng.Intn(len(buf))], 0o644); err != nil {
				fail(err)
				return
			}
			if err := os.Rename(tmp, final); err != nil {
				fail(err)
				return
			}
			f, err := os.OpenFile(final, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				fail(err)
				return
			}
			_, err = f.Write(buf[:1000])
			f.Close()
			if err != nil {
				fail(err)
				return
			}
			if i%5 == 4 {
				if err := os.Remove(v.Path("churn", "f"+strconv.Itoa((i+3)%8))); err != nil && !os.IsNotExist(err) {
					fail(err)
					return
				}
			}
		}
	}()

	time.Sleep(1500 * time.Millisecond) // let the storm run, then crash
	v.Kill()
	close(stop)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("writers still stuck 20s after the daemon was killed")
	}
	mu.Lock()
	t.Logf("%d files fsync'd before the kill; writers then saw: %v", len(synced), errs)
	mu.Unlock()
	if len(synced) == 0 {
		t.Fatalf("no file was fsync'd in 1.5s: the write storm did not run (errors: %v)", errs)
	}

	out, errOut, code := runCLI(t, "fsck", "--store", store)
	t.Logf("shedfs fsck after the crash: exit %d\n%s%s", code, out, errOut)
	if code != 0 {
		t.Errorf("shedfs fsck --store after a crash: exit %d, want 0 (repaired)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	v2 := startView(t, store, "alice")
	lost := 0
	for name, want := range synced {
		got, err := hashFile(v2.Path("w", name))
		if err != nil || got != want {
			lost++
			if lost <= 10 {
				t.Errorf("fsync'd file %s after the crash: %v, content matches: %v", name, err, got == want)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d fsync'd files lost or changed", lost, len(synced))
	}
	regular, nonEmpty, inos := walkRegular(t, v2.Dir)
	v2.Stop()

	fsckClean(t, store)
	blobs := blobFiles(t, store)
	t.Logf("after the restart: %d regular files (%d non-empty), %d blobs", regular, nonEmpty, len(blobs))
	if len(blobs) > regular {
		t.Errorf("%d blobs for %d reachable regular files: orphan blobs remain", len(blobs), regular)
	}
	if len(blobs) < nonEmpty {
		t.Errorf("%d blobs for %d non-empty reachable files: blobs are missing", len(blobs), nonEmpty)
	}
	// Blobs are named by inode number; when the view shows those numbers,
	// every blob must belong to a reachable inode.
	matched, unknown := 0, []string{}
	for _, b := range blobs {
		ino, err := strconv.ParseUint(filepath.Base(b), 10, 64)
		if err == nil && inos[ino] {
			matched++
		} else {
			unknown = append(unknown, b)
		}
	}
	if matched > 0 && len(unknown) > 0 {
		t.Errorf("blobs of no reachable inode: %v", unknown)
	}
}

// walkRegular counts the distinct regular-file inodes under root, those of
// them with data, and returns their inode numbers.
func walkRegular(t testing.TB, root string) (regular, nonEmpty int, inos map[uint64]bool) {
	t.Helper()
	inos = map[uint64]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if inos[st.Ino] {
			return nil
		}
		inos[st.Ino] = true
		regular++
		if st.Size > 0 {
			nonEmpty++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return regular, nonEmpty, inos
}

// errString names an error by its errno when it has one.
func errString(err error) string {
	var errno unix.Errno
	if ok := asErrno(err, &errno); ok {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}
