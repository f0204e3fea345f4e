package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// One admission path: imports through the daemon are admitted against the
// same usage as writes in the views, bytes pending in open files included;
// an import appears whole or not at all, even across a kill -9; fsck
// reports holders over their limit, and fsck --dry-run changes nothing.

// TestQuotaImportCountsOpenFiles: with 3 MiB written to a file still open
// in a view, quota show, status, the quota gauge and df count them, and a
// 2 MiB import into a 4 MiB quota is refused and leaves nothing behind.
func TestQuotaImportCountsOpenFiles(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	adminOK(t, "quota", "set", "user:alice", "--bytes", "4MiB", "--store", store)
	v, metrics := startObservedView(t, store)
	waitAdmin(t, store)
	// dd holds the file open: a descriptor of the test process would be
	// closed (and the file flushed) in every child the test forks.
	dd := startDd(t, v.Path("open.bin"))
	dd.feed(3 << 20)
	if got := usageOf(t, store, "user:alice").Bytes; got != 3<<20 {
		t.Errorf("quota show while 3 MiB sit in an open file: %d bytes used, want %d", got, 3<<20)
	}
	out, errOut, code := runCLI(t, "status", "--json", "--store", store)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	var st struct {
		Quotas []qInfo `json:"quotas"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for _, q := range st.Quotas {
		if q.Holder == "user:alice" && q.Used.Bytes != 3<<20 {
			t.Errorf("status while 3 MiB sit in an open file: %d bytes used", q.Used.Bytes)
		}
	}

	if got := scrape(t, metrics).value(t, "shedfs_quota_bytes", "holder=user:alice", "kind=used"); got != 3<<20 {
		t.Errorf(`shedfs_quota_bytes{holder="user:alice",kind="used"} = %v while 3 MiB sit in an open file`, got)
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(v.Dir, &sfs); err != nil {
		t.Fatal(err)
	}
	if used := int64(sfs.Blocks-sfs.Bfree) * sfs.Bsize; used != 3<<20 {
		t.Errorf("df while 3 MiB sit in an open file: %d bytes used", used)
	}

	src := filepath.Join(t.TempDir(), "two-mib")
	mustWrite(t, src, randomBytes(2, 2<<20), 0o600)
	_, errOut, code = runCLI(t, "import", "--user", "alice", "--store", store, src)
	wantSaid(t, "import of 2 MiB with 3 MiB pending in a 4 MiB quota", errOut, code, "over the quota of user alice")
	if names := listNames(t, v.Path("uploads")); len(names) != 0 {
		t.Errorf("the refused import left %v in uploads/", names)
	}
	if got := usageOf(t, store, "user:alice").Bytes; got != 3<<20 {
		t.Errorf("after the refused import: %d bytes used, want %d", got, 3<<20)
	}
	dd.finish()
	if got := usageOf(t, store, "user:alice").Bytes; got != 3<<20 {
		t.Errorf("after the open file was closed: %d bytes used, want %d", got, 3<<20)
	}
	// 1 MiB still fits.
	mustWrite(t, src, randomBytes(3, 1<<20), 0o600)
	adminOK(t, "import", "--user", "alice", "--store", store, src)
	wantUsage(t, store, "user:alice", privateOf(t, v.Dir), "after the import")
	v.Stop()
	fsckClean(t, store)
}

// TestQuotaImportRace: in each of 20 rounds, two dd writers in the view
// and two imports through the daemon ask for 4 MiB together from a 3 MiB
// quota, the imports starting while the writers write or once they have
// written and hold their files open; whatever the order, the holder never
// ends above its limit, and the usage is what the view holds.
func TestQuotaImportRace(t *testing.T) {
	t.Parallel()
	const limit = 3 << 20
	v := quotaView(t, []string{"quota", "set", "user:alice", "--bytes", "3MiB"})
	store := v.Store
	src := t.TempDir()
	for i := range 2 {
		mustWrite(t, filepath.Join(src, fmt.Sprintf("imp%d", i)), randomBytes(int64(i), 1<<20), 0o600)
	}
	refusals := 0
	for round := range 20 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		refused := func() {
			mu.Lock()
			refusals++
			mu.Unlock()
		}
		var fed, imports sync.WaitGroup
		imported := make(chan struct{})
		for i := range 2 {
			dd := startDd(t, v.Path(fmt.Sprintf("dd%d", i)))
			wg.Add(1)
			fed.Add(1)
			go func() {
				defer wg.Done()
				if !dd.tryFeed(1 << 20) {
					refused()
				}
				fed.Done()
				// The file stays open a while with its bytes pending:
				// in even rounds until the imports are done.
				if round%2 == 0 {
					<-imported
				} else {
					time.Sleep(100 * time.Millisecond)
				}
				if out, ok := dd.end(); !ok {
					if !strings.Contains(out, "Disk quota exceeded") {
						t.Errorf("round %d: dd: %s", round, out)
					}
				}
			}()
		}
		if round%2 == 0 {
			// The imports come while both files hold their bytes open.
			fed.Wait()
		} else {
			// The imports come while the writers write.
			time.Sleep(time.Duration(round%5) * 10 * time.Millisecond)
		}
		for i := range 2 {
			imports.Add(1)
			go func() {
				defer imports.Done()
				_, errOut, code := runCLI(t, "import", "--user", "alice", "--store", store, filepath.Join(src, fmt.Sprintf("imp%d", i)))
				if code != 0 {
					refused()
					if !strings.Contains(errOut, "over the quota of user alice") {
						t.Errorf("round %d: import: exit %d: %s", round, code, errOut)
					}
				}
			}()
		}
		imports.Wait()
		close(imported)
		wg.Wait()
		got := usageOf(t, store, "user:alice")
		if got.Bytes > limit {
			t.Errorf("round %d: usage %d bytes, above the limit %d", round, got.Bytes, limit)
		}
		if held := privateOf(t, v.Dir); held != got {
			t.Errorf("round %d: usage %+v, the view holds %+v", round, got, held)
		}
		for _, p := range []string{"dd0", "dd1", "uploads/imp0", "uploads/imp1"} {
			if err := os.Remove(v.Path(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	if refusals < 20 {
		t.Errorf("%d refusals in 20 rounds asking for 4 MiB of 3 MiB each", refusals)
	}
	v.Stop()
	fsckClean(t, store)
}

// ddWriter is dd writing what the test feeds it into a file of a view,
// holding the file open (with its bytes pending in the daemon) until the
// feed ends. The descriptor is dd's own, so children the test forks meanwhile
// do not flush the file when they exit.
type ddWriter struct {
	t    *testing.T
	path string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  bytes.Buffer
	done chan struct{} // closed when dd has exited
	err  error         // dd's result, once done
}

func startDd(t *testing.T, path string) *ddWriter {
	t.Helper()
	d := &ddWriter{t: t, path: path, done: make(chan struct{})}
	d.cmd = exec.Command("dd", "of="+path, "bs=64k", "iflag=fullblock")
	d.cmd.Stdout, d.cmd.Stderr = &d.out, &d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := d.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.in = in
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.in.Close()
		<-d.done
	})
	return d
}

// tryFeed gives dd n bytes and waits until the view shows the file that
// large; false if dd stopped first (its write refused).
func (d *ddWriter) tryFeed(n int64) bool {
	if _, err := d.in.Write(bytes.Repeat([]byte("d"), int(n))); err != nil {
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(d.path); err == nil && fi.Size() >= n {
			return true
		}
		select {
		case <-d.done:
			return false
		case <-time.After(2 * time.Millisecond):
		}
	}
	return false
}

// feed is tryFeed that must succeed.
func (d *ddWriter) feed(n int64) {
	d.t.Helper()
	if !d.tryFeed(n) {
		d.t.Fatalf("dd of=%s did not write %d bytes: %s", d.path, n, d.out.String())
	}
}

// end closes dd's input and waits for it: the file is closed. It returns
// dd's output and whether it succeeded.
func (d *ddWriter) end() (string, bool) {
	d.in.Close()
	<-d.done
	return d.out.String(), d.err == nil
}

// finish is end that must succeed.
func (d *ddWriter) finish() {
	d.t.Helper()
	if out, ok := d.end(); !ok {
		d.t.Fatalf("dd of=%s: %s", d.path, out)
	}
}

// storeState is the name, size, mtime and checksum of every file of a
// store's meta/ and blobs/ directories.
func storeState(t *testing.T, store string) string {
	t.Helper()
	var lines []string
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, sub := range []string{"meta", "blobs"} {
		err := filepath.WalkDir(filepath.Join(store, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s %d %v %08x", p, fi.Size(), fi.ModTime().UnixNano(), crc32.Checksum(data, table)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestFsckDryRunChangesNothing: after a kill -9 with an unlinked file
// still open (an orphan), fsck --dry-run reports the orphan and leaves
// meta/ and blobs/ byte for byte as they were, the dirty marker included:
// the next start still repairs, and reclaims the orphan's blob.
func TestFsckDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	store := noTrashStore(t, "alice")
	v := startView(t, store, "alice")
	mustWrite(t, v.Path("keep"), []byte("kept"), 0o644)
	f, err := os.Create(v.Path("doomed"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(randomBytes(4, 256<<10)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(v.Path("doomed")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, v.Dir)
	v.Kill()
	f.Close()
	if n := len(blobFiles(t, store)); n != 2 {
		t.Fatalf("%d blobs after the crash, want 2 (keep and the orphan)", n)
	}

	before := storeState(t, store)
	for range 2 {
		out, errOut, code := runCLI(t, "fsck", "--dry-run", "--store", store)
		if code != 1 || !strings.Contains(out, "orphan-inode") || !strings.Contains(out, "NOT repaired: dry run") {
			t.Errorf("fsck --dry-run after a crash: exit %d, want 1 and the orphan not repaired\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	}
	if after := storeState(t, store); after != before {
		t.Errorf("fsck --dry-run changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	v2 := startView(t, store, "alice")
	v2.Stop()
	if !strings.Contains(v2.Stderr(), "not closed cleanly") {
		t.Errorf("the start after fsck --dry-run did not see an unclean store; stderr:\n%s", v2.Stderr())
	}
	if n := len(blobFiles(t, store)); n != 1 {
		t.Errorf("%d blobs after the repairing start, want 1", n)
	}
	fsckClean(t, store)
}

// TestImportCrash: kill -9 of the daemon in the middle of a large import,
// then of the importing command: after the restart the name is absent or
// whole, no inode or blob of the import is left, and fsck is clean.
func TestImportCrash(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	src := filepath.Join(t.TempDir(), "big.bin")
	whole := bytes.Repeat(randomBytes(5, 1<<20), 256)
	mustWrite(t, src, whole, 0o600)
	v := startView(t, store, "alice")
	waitAdmin(t, store)

	// The daemon dies while the content streams in.
	imp := startImport(t, store, src)
	if !imp.waitBlob(8 << 20) {
		t.Logf("the import ended before the kill: %s", imp.out.String())
	}
	v.Kill()
	<-imp.done

	v2 := startView(t, store, "alice")
	waitAdmin(t, store)
	checkWholeOrAbsent(t, v2.Path("uploads", "big.bin"), whole, "after kill -9 of the daemon")

	// The importing command dies while the content streams in.
	os.Remove(v2.Path("uploads", "big.bin"))
	imp = startImport(t, store, src)
	imp.waitBlob(8 << 20)
	imp.cmd.Process.Kill()
	<-imp.done
	// The daemon notices the broken transfer and drops what it wrote.
	deadline := time.Now().Add(5 * time.Second)
	for len(blobFiles(t, store)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	checkWholeOrAbsent(t, v2.Path("uploads", "big.bin"), whole, "after kill -9 of the import")
	wantBlobs := 0
	if _, err := os.Stat(v2.Path("uploads", "big.bin")); err == nil {
		wantBlobs = 1
	}
	v2.Stop()
	if got := len(blobFiles(t, store)); got != wantBlobs {
		t.Errorf("%d blobs left, want %d: an interrupted import left its content", got, wantBlobs)
	}
	fsckClean(t, store)
}

// runningImport is a `shedfs import` in the background.
type runningImport struct {
	t     *testing.T
	store string
	cmd   *exec.Cmd
	out   bytes.Buffer
	done  chan struct{}
}

func startImport(t *testing.T, store, src string) *runningImport {
	t.Helper()
	r := &runningImport{t: t, store: store, done: make(chan struct{})}
	r.cmd = exec.Command(shedfsBin, "import", "--user", "alice", "--store", store, src)
	r.cmd.Env = childEnv(nil)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.cmd.Wait()
		close(r.done)
	}()
	return r
}

// waitBlob waits until some blob of the store holds n bytes; false if the
// import ended first.
func (r *runningImport) waitBlob(n int64) bool {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range blobFiles(r.t, r.store) {
			if fi, err := os.Stat(p); err == nil && fi.Size() >= n {
				return true
			}
		}
		select {
		case <-r.done:
			return false
		case <-time.After(2 * time.Millisecond):
		}
	}
	r.t.Fatalf("no blob reached %d bytes in 30s", n)
	return false
}

// checkWholeOrAbsent fails the test unless p does not exist or holds
// exactly want.
func checkWholeOrAbsent(t *testing.T, p string, want []byte, when string) {
	t.Helper()
	got, err := os.ReadFile(p)
	switch {
	case errors.Is(err, syscall.ENOENT):
	case err != nil:
		t.Errorf("%s: read %s: %v", when, p, err)
	case !bytes.Equal(got, want):
		t.Errorf("%s: %s holds %d bytes, want absent or all %d", when, p, len(got), len(want))
	}
}
