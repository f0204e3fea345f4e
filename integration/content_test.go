package integration

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs/scan/clamdtest"
	"golang.org/x/sys/unix"
)

// The tests of issue 12: every file's SHA-256, and scanning with a real
// clamd (started by the tests with a database they write: EICAR's hash
// and a body signature; no network).

var (
	clamdOnce   sync.Once
	sharedClamd *clamdtest.Clamd
	clamdErr    error
	clamdDirs   []string
	clamdMu     sync.Mutex
)

// newClamd starts a clamd of the test's own (for tests that stop it);
// it fails the test when clamd is not installed.
func newClamd(t *testing.T) *clamdtest.Clamd {
	t.Helper()
	c, err := clamdtest.Start(t.TempDir())
	if err != nil {
		requireClamd(t, err)
	}
	t.Cleanup(c.Stop)
	return c
}

// theClamd is the clamd the scanning tests share (one per package run,
// stopped by TestMain).
func theClamd(t *testing.T) *clamdtest.Clamd {
	t.Helper()
	clamdOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shedfs-it-clamd-")
		if err != nil {
			clamdErr = err
			return
		}
		clamdMu.Lock()
		clamdDirs = append(clamdDirs, dir)
		clamdMu.Unlock()
		sharedClamd, clamdErr = clamdtest.Start(dir)
	})
	if clamdErr != nil {
		requireClamd(t, clamdErr)
	}
	return sharedClamd
}

// requireClamd skips without clamd, and fails loudly on CI.
func requireClamd(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("clamd is needed on CI (Debian package clamav-daemon): %v", err)
	}
	t.Skipf("no clamd: %v", err)
}

// stopClamd ends the shared clamd at the end of the run.
func stopClamd() {
	if sharedClamd != nil {
		sharedClamd.Stop()
	}
	clamdMu.Lock()
	defer clamdMu.Unlock()
	for _, d := range clamdDirs {
		os.RemoveAll(d)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sha256sum is the digest as the real tool computes it.
func sha256sum(t *testing.T, path string) string {
	t.Helper()
	out, code := tool(t, "sha256sum", path)
	if code != 0 {
		t.Fatalf("sha256sum %s: %s", path, out)
	}
	return strings.Fields(out)[0]
}

// waitXattr polls an xattr until want(value) holds.
func waitXattr(t *testing.T, path, name string, timeout time.Duration, want func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, err := getxattr(path, name)
		if err == nil && want(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("getxattr %s %s: %q, %v after %v", path, name, v, err, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestContentChecksums: user.shedfs.sha256 equals sha256sum for files
// written by dd, by cp, by random-offset writes, after truncate and after
// import; mode get --json and the write-close audit record carry it; fsck
// --verify-content finds a blob changed on the host (exit 1) while plain
// fsck does not look.
func TestContentChecksums(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	share := s.In("alice", "share")

	// dd
	dd := filepath.Join(share, "dd.bin")
	if out, code := tool(t, "dd", "if=/dev/urandom", "of="+dd, "bs=64k", "count=24", "status=none"); code != 0 {
		t.Fatalf("dd: %s", out)
	}
	// cp of a host file
	host := filepath.Join(t.TempDir(), "host.bin")
	data := make([]byte, 300_000)
	rand.Read(data)
	mustWrite(t, host, data, 0o644)
	cp := filepath.Join(share, "cp.bin")
	if out, code := tool(t, "cp", host, cp); code != 0 {
		t.Fatalf("cp: %s", out)
	}
	// random-offset writes
	rw := filepath.Join(share, "random.bin")
	f, err := os.Create(rw)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		buf := make([]byte, 1+mrand.IntN(5000))
		rand.Read(buf)
		if _, err := f.WriteAt(buf, int64(mrand.IntN(200_000))); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	// truncate after a write
	tr := filepath.Join(share, "truncated.bin")
	mustWrite(t, tr, data, 0o644)
	if out, code := tool(t, "truncate", "-s", "1000", tr); code != 0 {
		t.Fatalf("truncate: %s", out)
	}
	// import
	adminOK(t, "import", "--store", store, "--user", "alice", host)
	imported := s.In("alice", "uploads", "host.bin")

	for _, p := range []string{dd, cp, rw, tr, imported} {
		want := sha256sum(t, p)
		if got := getx(t, p, "user.shedfs.sha256"); got != want {
			t.Errorf("%s: user.shedfs.sha256 %q, sha256sum %q", filepath.Base(p), got, want)
		}
		if got := getx(t, p, "user.shedfs.scan"); got != "unscanned" {
			t.Errorf("%s: user.shedfs.scan %q without --clamd, want unscanned", filepath.Base(p), got)
		}
	}
	// A rewrite changes the digest.
	mustWrite(t, cp, []byte("new content\n"), 0o644)
	if got, want := getx(t, cp, "user.shedfs.sha256"), sha256Hex([]byte("new content\n")); got != want {
		t.Errorf("after a rewrite: %q, want %q", got, want)
	}

	var mode struct {
		SHA256 string `json:"sha256"`
		Scan   string `json:"scan"`
	}
	out := adminOK(t, "mode", "get", "--store", store, "--user", "alice", "share/dd.bin", "--json")
	if err := json.Unmarshal([]byte(out), &mode); err != nil {
		t.Fatalf("mode get --json: %v: %s", err, out)
	}
	if want := sha256sum(t, dd); mode.SHA256 != want || mode.Scan != "unscanned" {
		t.Errorf("mode get: sha256 %q scan %q, want %q unscanned", mode.SHA256, mode.Scan, want)
	}

	// The write-close record carries the digest.
	want := sha256sum(t, dd)
	waitTrail(t, store, 5*time.Second, "write of dd.bin with its sha256", func(recs []trailRecord) bool {
		for _, r := range recs {
			if r.Path == "/share/dd.bin" && r.SHA256 == want {
				return true
			}
		}
		return false
	}, "--op", "write")

	// A blob changed behind the daemon's back.
	ino := inoOf(t, dd)
	blob := blobPath(t, store, "dd.bin", dd)
	s.Stop()
	bf, err := os.OpenFile(blob, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	bf.WriteAt([]byte("rot"), 100)
	bf.Close()
	out, errOut, code := runCLI(t, "fsck", "--store", store)
	if code != 0 {
		t.Errorf("plain fsck: exit %d, want 0 (it does not read contents)\n%s%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "fsck", "--store", store, "--verify-content")
	if code != 1 || !strings.Contains(out, fmt.Sprint(ino)) {
		t.Errorf("fsck --verify-content: exit %d, want 1 naming inode %d\n%s%s", code, ino, out, errOut)
	}
	if strings.Count(out, "stored sha256") != 1 {
		t.Errorf("fsck --verify-content: want exactly one mismatch\n%s", out)
	}
}

func inoOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestScanning, with a real clamd: EICAR written by alice into share/
// becomes infected, stays listed, bob's cat gets EACCES and the audit
// names the signature; a clean file becomes clean and bob reads it; a
// body signature is found too; quarantine list, release and delete; an
// EICAR import is refused with one line and leaves nothing.
func TestScanning(t *testing.T) {
	t.Parallel()
	cd := theClamd(t)
	store := newStore(t)
	setupTeam(t, store)
	s := startServeWith(t, store, []string{"--clamd", cd.Addr(), "--scan-wait", "3s", "--http", "127.0.0.1:0"}, "alice", "bob", "carol")
	infected := "infected:" + clamdtest.EICARSignature

	eicar := s.In("alice", "share", "eicar.txt")
	mustWrite(t, eicar, []byte(clamdtest.EICAR), 0o644)
	clean := s.In("alice", "share", "clean.txt")
	mustWrite(t, clean, []byte("nothing to see\n"), 0o644)
	body := s.In("alice", "groups", "team-alpha", "tool.bin")
	mustWrite(t, body, append(bytes.Repeat([]byte("z"), 100_000), clamdtest.BodyMarker...), 0o644)

	waitXattr(t, eicar, "user.shedfs.scan", 10*time.Second, func(v string) bool { return v == infected })
	waitXattr(t, body, "user.shedfs.scan", 10*time.Second, func(v string) bool { return v == "infected:"+clamdtest.BodySignature })
	// bob waits for the clean file's verdict if it is not in yet.
	if got := mustRead(t, s.In("bob", "share", "clean.txt")); string(got) != "nothing to see\n" {
		t.Errorf("bob reads clean.txt: %q", got)
	}
	if got := getx(t, s.In("bob", "share", "clean.txt"), "user.shedfs.scan"); got != "clean" {
		t.Errorf("clean.txt: scan %q", got)
	}
	if got, want := getx(t, s.In("bob", "share", "eicar.txt"), "user.shedfs.sha256"), sha256Hex([]byte(clamdtest.EICAR)); got != want {
		t.Errorf("eicar sha256 %q, want %q", got, want)
	}

	// Quarantined: nobody opens it, the writer included; it stays listed.
	out, code := tool(t, "cat", s.In("bob", "share", "eicar.txt"))
	if code == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("bob's cat of eicar.txt: exit %d %q, want Permission denied", code, out)
	}
	_, err := os.ReadFile(eicar)
	wantErrno(t, "alice reads her infected file", err, syscall.EACCES)
	_, err = os.ReadFile(body)
	wantErrno(t, "alice reads tool.bin", err, syscall.EACCES)
	if _, err := os.Stat(s.In("bob", "share", "eicar.txt")); err != nil {
		t.Errorf("eicar.txt not listed any more: %v", err)
	}
	waitTrail(t, store, 5*time.Second, "bob's refused open with the signature", func(recs []trailRecord) bool {
		for _, r := range recs {
			if r.User == "bob" && r.Path == "/share/eicar.txt" && r.Result == "EACCES" && r.Rule == "infected" && r.Scan == infected {
				return true
			}
		}
		return false
	}, "--denied")

	// Links: none is made to an infected file (EACCES, as for opening
	// it); one made before the file turned infected is not served (403);
	// a clean one is, with its SHA-256 as a strong ETag.
	_, err = getxattr(eicar, "user.shedfs.link")
	wantErrno(t, "getfattr -n user.shedfs.link on eicar.txt", err, syscall.EACCES)
	turned := s.In("alice", "share", "turned.txt")
	mustWrite(t, turned, []byte("clean for now\n"), 0o644)
	waitXattr(t, turned, "user.shedfs.scan", 10*time.Second, func(v string) bool { return v == "clean" })
	early := getLink(t, turned)
	mustWrite(t, turned, []byte(clamdtest.EICAR), 0o644)
	waitXattr(t, turned, "user.shedfs.scan", 10*time.Second, func(v string) bool { return v == infected })
	wantStatus(t, "a link made before the file turned infected", early, http.StatusForbidden)
	adminOK(t, "quarantine", "delete", "--store", store, fmt.Sprint(inoOf(t, turned)))
	resp, got := fetch(t, getLink(t, clean))
	if resp.StatusCode != http.StatusOK || string(got) != "nothing to see\n" {
		t.Errorf("a link to clean.txt: %d %q", resp.StatusCode, got)
	}
	if tag, want := resp.Header.Get("ETag"), `"`+sha256Hex([]byte("nothing to see\n"))+`"`; tag != want {
		t.Errorf("ETag of clean.txt's link: %q, want %q", tag, want)
	}

	// quarantine list, release, delete.
	var list []struct {
		Ino       uint64   `json:"ino"`
		Signature string   `json:"signature"`
		Paths     []string `json:"paths"`
	}
	if err := json.Unmarshal([]byte(adminOK(t, "quarantine", "list", "--store", store, "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("quarantine list: %+v, want eicar.txt and tool.bin", list)
	}
	eicarIno, bodyIno := inoOf(t, eicar), inoOf(t, body)
	for _, q := range list {
		if q.Ino == eicarIno && (q.Signature != clamdtest.EICARSignature || len(q.Paths) != 1 || q.Paths[0] != "share/eicar.txt") {
			t.Errorf("quarantine entry %+v", q)
		}
	}
	adminOK(t, "quarantine", "release", "--store", store, fmt.Sprint(bodyIno))
	if got := mustRead(t, s.In("bob", "groups", "team-alpha", "tool.bin")); len(got) != 100_000+len(clamdtest.BodyMarker) {
		t.Errorf("released tool.bin: %d bytes", len(got))
	}
	adminOK(t, "quarantine", "delete", "--store", store, fmt.Sprint(eicarIno))
	if _, err := os.Stat(s.In("bob", "share", "eicar.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("eicar.txt after quarantine delete: %v", err)
	}
	if out := adminOK(t, "quarantine", "list", "--store", store, "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("quarantine after release and delete: %s", out)
	}

	// An infected import is refused and leaves nothing.
	host := filepath.Join(t.TempDir(), "eicar.com")
	mustWrite(t, host, []byte(clamdtest.EICAR), 0o644)
	blobs := len(blobFiles(t, store))
	stdout, stderr, code := runCLI(t, "import", "--store", store, "--user", "alice", host)
	if code == 0 {
		t.Fatalf("EICAR import: exit 0\n%s", stdout)
	}
	checkOneLine(t, "EICAR import", stderr)
	if !strings.Contains(stderr, "infected with "+clamdtest.EICARSignature) {
		t.Errorf("EICAR import: %q, want the signature", stderr)
	}
	if _, err := os.Stat(s.In("alice", "uploads", "eicar.com")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused import is visible: %v", err)
	}
	if got := len(blobFiles(t, store)); got != blobs {
		t.Errorf("refused import left a blob: %d blobs, were %d", got, blobs)
	}
	// A clean import is scanned before it is named.
	cleanHost := filepath.Join(t.TempDir(), "notes.txt")
	mustWrite(t, cleanHost, []byte("fine\n"), 0o644)
	adminOK(t, "import", "--store", store, "--user", "alice", cleanHost)
	if got := getx(t, s.In("alice", "uploads", "notes.txt"), "user.shedfs.scan"); got != "clean" {
		t.Errorf("clean import: scan %q", got)
	}
}

// TestScanClamdDown: with clamd stopped a file stays pending: its writer
// reads it, bob's open fails with EAGAIN after --scan-wait and is audited
// as scan_pending; the queue survives a kill -9 of the daemon, and once
// clamd is back the file is scanned and bob reads it.
func TestScanClamdDown(t *testing.T) {
	t.Parallel()
	cd := newClamd(t)
	store := newStore(t)
	setupTeam(t, store)
	args := []string{"--clamd", cd.Addr(), "--scan-wait", "1s", "--http", "127.0.0.1:0"}
	s := startServeWith(t, store, args, "alice", "bob")
	cd.Stop()

	p := s.In("alice", "share", "later.txt")
	mustWrite(t, p, []byte("scan me later\n"), 0o644)
	if got := getx(t, p, "user.shedfs.scan"); got != "pending" {
		t.Errorf("with clamd down: scan %q, want pending", got)
	}
	if got := mustRead(t, p); string(got) != "scan me later\n" {
		t.Errorf("the writer reads its pending file: %q", got)
	}
	// A link to the pending file answers 503 with Retry-After.
	resp, _ := fetch(t, getLink(t, p))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a link to a pending file: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	start := time.Now()
	_, err := os.ReadFile(s.In("bob", "share", "later.txt"))
	wantErrno(t, "bob opens a pending file", err, syscall.EAGAIN)
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("bob's open failed after %v, want the 1 s wait", waited)
	}
	// A signal to bob's thread in the middle of the wait interrupts the
	// FUSE request; the open is retried and waits its whole time again
	// instead of failing early (CI saw EAGAIN after 445 ms).
	if waited, err := openInterrupted(s.In("bob", "share", "later.txt"), 300*time.Millisecond); !errors.Is(err, syscall.EAGAIN) || waited < 1200*time.Millisecond {
		t.Errorf("bob's open, signalled after 300 ms: %v after %v; want EAGAIN after the 300 ms and a whole 1 s wait", err, waited)
	}
	waitTrail(t, store, 5*time.Second, "bob's scan_pending refusal", func(recs []trailRecord) bool {
		for _, r := range recs {
			if r.User == "bob" && r.Path == "/share/later.txt" && r.Result == "EAGAIN" && r.Rule == "scan_pending" {
				return true
			}
		}
		return false
	}, "--denied")

	// kill -9, restart with clamd still down: still pending.
	killServe(s)
	s = startServeWith(t, store, args, "alice", "bob")
	p = s.In("alice", "share", "later.txt")
	if got := getx(t, p, "user.shedfs.scan"); got != "pending" {
		t.Errorf("after kill -9 and restart: scan %q, want pending", got)
	}
	if err := cd.Restart(); err != nil {
		t.Fatal(err)
	}
	waitXattr(t, p, "user.shedfs.scan", 15*time.Second, func(v string) bool { return v == "clean" })
	if got := mustRead(t, s.In("bob", "share", "later.txt")); string(got) != "scan me later\n" {
		t.Errorf("bob reads it once clean: %q", got)
	}
}

// openInterrupted opens path on a thread of its own and sends that
// thread a signal (SIGURG, which the Go runtime takes as a preemption
// request) after delay, while the open may still wait in the kernel; it
// returns how long the open took and its error.
func openInterrupted(path string, delay time.Duration) (time.Duration, error) {
	type result struct {
		took time.Duration
		err  error
	}
	tids := make(chan int, 1)
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine
		tids <- unix.Gettid()
		start := time.Now()
		f, err := os.Open(path)
		if err == nil {
			f.Close()
		}
		done <- result{time.Since(start), err}
	}()
	tid := <-tids
	select {
	case r := <-done:
		return r.took, r.err
	case <-time.After(delay):
	}
	if err := unix.Tgkill(os.Getpid(), tid, unix.SIGURG); err != nil {
		return 0, fmt.Errorf("signal the opening thread: %w", err)
	}
	r := <-done
	return r.took, r.err
}

// killServe is kill -9 of a serve daemon; the views it leaves (their
// connection is gone) are detached, as a restart of serve on the same
// root would.
func killServe(s *serveDaemon) {
	s.Kill()
	for _, m := range mounts() {
		if strings.HasPrefix(m.point, s.Root+"/") {
			abortAndDetach(m)
		}
	}
}

// TestScanWindow: a clean file rewritten with malware and kept open by
// its writer leaves its clean verdict before the first changed byte can
// reach another reader: bob's open and a link are held off (pending), not
// served the new bytes under the old verdict, while alice reads what she
// writes (until a scan finds it infected); once she closes it, the
// verdict is infected.
func TestScanWindow(t *testing.T) {
	t.Parallel()
	cd := theClamd(t)
	store := newStore(t)
	setupTeam(t, store)
	s := startServeWith(t, store, []string{"--clamd", cd.Addr(), "--scan-wait", "300ms", "--http", "127.0.0.1:0"}, "alice", "bob")
	x := s.In("alice", "share", "x.txt")
	mustWrite(t, x, []byte("clean start\n"), 0o644)
	waitXattr(t, x, "user.shedfs.scan", 10*time.Second, func(v string) bool { return v == "clean" })
	link := getLink(t, x)
	if resp, _ := fetch(t, link); resp.StatusCode != http.StatusOK {
		t.Fatalf("link to the clean file: %d", resp.StatusCode)
	}

	f, err := os.OpenFile(x, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte(clamdtest.BodyMarker)); err != nil {
		t.Fatal(err)
	}
	// alice keeps it open. The worker may find the pending file and scan
	// it meanwhile (then it is infected already); either way bob gets
	// no byte of it.
	if got, err := os.ReadFile(s.In("bob", "share", "x.txt")); err == nil || bytes.Contains(got, []byte(clamdtest.BodyMarker)) {
		t.Errorf("bob reads the file being rewritten: %q, %v; want it held off (pending)", got, err)
	} else if !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EACCES) {
		t.Errorf("bob opens the file being rewritten: %v, want EAGAIN (pending) or EACCES (found infected)", err)
	}
	if resp, body := fetch(t, link); resp.StatusCode == http.StatusOK || bytes.Contains(body, []byte(clamdtest.BodyMarker)) {
		t.Errorf("a link to the file being rewritten: %d %q, want it held off", resp.StatusCode, body)
	}
	if got, err := os.ReadFile(x); err == nil && !bytes.Contains(got, []byte(clamdtest.BodyMarker)) {
		t.Errorf("alice does not read what she wrote: %q", got)
	} else if err != nil && !errors.Is(err, syscall.EACCES) {
		t.Errorf("alice reads what she writes: %v, want it or EACCES (found infected)", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitXattr(t, x, "user.shedfs.scan", 10*time.Second, func(v string) bool { return strings.HasPrefix(v, "infected:") })
	_, err = os.ReadFile(s.In("bob", "share", "x.txt"))
	wantErrno(t, "bob opens the infected file", err, syscall.EACCES)
}
