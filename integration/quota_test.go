package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Quotas through the kernel: what dd, tar, truncate, fallocate, ln, mv and
// df meet when a holder's limit is reached, in one view and in several at
// once, and after a crash. Usage is read with `shedfs quota show --json`
// (through the admin socket while a daemon runs) and compared with what
// the views show: the sum of the charged sizes (logical size rounded up to
// 4 KiB, hard links once) and the number of inodes, zone roots included.

const chargeUnit = 4096

// charge is what a file of size bytes costs its holder.
func charge(size int64) int64 {
	return (size + chargeUnit - 1) / chargeUnit * chargeUnit
}

// qAmount and qInfo are `shedfs quota show --json`.
type qAmount struct {
	Bytes  int64 `json:"bytes"`
	Inodes int64 `json:"inodes"`
}

type qInfo struct {
	Holder string  `json:"holder"`
	Used   qAmount `json:"used"`
	Limit  qAmount `json:"limit"`
}

// quotaOf reads a holder's usage and limit with the CLI.
func quotaOf(t testing.TB, store, holder string) qInfo {
	t.Helper()
	out, errOut, code := runCLI(t, "quota", "show", holder, "--json", "--store", store)
	if code != 0 {
		t.Fatalf("shedfs quota show %s: exit %d: %s", holder, code, errOut)
	}
	var qs []qInfo
	if err := json.Unmarshal([]byte(out), &qs); err != nil || len(qs) != 1 {
		t.Fatalf("shedfs quota show %s --json: %v\n%s", holder, err, out)
	}
	return qs[0]
}

// usageOf is the usage of holder.
func usageOf(t testing.TB, store, holder string) qAmount {
	t.Helper()
	return quotaOf(t, store, holder).Used
}

// setQuota sets a holder's limit with the CLI (directly on the store, or
// through the daemon when one runs).
func setQuota(t testing.TB, store, holder, bytes, inodes string) {
	t.Helper()
	args := []string{"quota", "set", holder, "--store", store}
	if bytes != "" {
		args = append(args, "--bytes", bytes)
	}
	if inodes != "" {
		args = append(args, "--inodes", inodes)
	}
	if out, errOut, code := runCLI(t, args...); code != 0 {
		t.Fatalf("shedfs %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
}

// waitAdmin waits until a daemon answers on the admin socket of store: a
// view is mounted before the socket opens, and a CLI command run in
// between would find the store locked.
func waitAdmin(t testing.TB, store string) {
	t.Helper()
	sock := filepath.Join(store, "admin.sock")
	deadline := time.Now().Add(mountTimeout)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon answers on %s after %v", sock, mountTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quotaView mounts alice's view of a fresh store on which setup has run
// first (directly on the store), and waits for its admin socket.
func quotaView(t *testing.T, setup ...[]string) *View {
	t.Helper()
	requireFUSE(t)
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	// The trash is off: these tests check what a delete frees at once
	// (trash_test.go checks what the trash keeps and evicts).
	adminOK(t, "trash", "retention", "0", "--store", store)
	for _, args := range setup {
		adminOK(t, append(args, "--store", store)...)
	}
	v := startView(t, store, "alice")
	waitAdmin(t, store)
	return v
}

// charged walks root through a view and returns what its holder should be
// charged: the sum of charge(size) of the regular files, each inode once,
// and the number of distinct inodes, root included. Top-level names in
// skip (share, groups: other holders) are left out.
func charged(t testing.TB, root string, skip ...string) qAmount {
	t.Helper()
	seen := map[uint64]bool{}
	var a qAmount
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if filepath.Dir(p) == root {
			for _, s := range skip {
				if d.Name() == s {
					return filepath.SkipDir
				}
			}
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", p, err)
		}
		if seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		a.Inodes++
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			a.Bytes += charge(st.Size)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return a
}

// privateOf is what alice's view root charges her (private, output and
// uploads; not share or groups).
func privateOf(t testing.TB, v string) qAmount {
	t.Helper()
	return charged(t, v, "share", "groups", "trash", "snapshots")
}

// wantUsage fails the test unless holder's usage is want.
func wantUsage(t testing.TB, store, holder string, want qAmount, what string) {
	t.Helper()
	if got := usageOf(t, store, holder); got != want {
		t.Errorf("%s: usage of %s is %+v, want %+v", what, holder, got, want)
	}
}

// wantUsageSoon is wantUsage allowing two seconds: a charge freed by an
// unlink waits for the kernel to let go of the inode (release, forget),
// which it sends asynchronously.
func wantUsageSoon(t testing.TB, store, holder string, want qAmount, what string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for usageOf(t, store, holder) != want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	wantUsage(t, store, holder, want, what+" (2s allowed)")
}

// wantSaid fails the test unless a tool failed and said msg.
func wantSaid(t testing.TB, what, out string, code int, msg string) {
	t.Helper()
	if code == 0 || !strings.Contains(out, msg) {
		t.Errorf("%s: exit %d, want a failure saying %q; output:\n%s", what, code, msg, truncate([]byte(out), 2000))
	}
}

func sizeOf(t testing.TB, p string) int64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	return fi.Size()
}

// TestQuotaDd: dd past the byte limit stops at it with EDQUOT and the
// usage is what the files cost; an extending truncate or an fallocate past
// the limit is refused and charges nothing; a sparse file within it counts
// its logical size.
func TestQuotaDd(t *testing.T) {
	t.Parallel()
	const limit = 8 << 20
	v := quotaView(t, []string{"quota", "set", "user:alice", "--bytes", "8MiB"})
	store := v.Store

	out, err := runToolErr("dd", "if=/dev/zero", "of="+v.Path("big"), "bs=1M", "count=20", "conv=fsync")
	wantSaid(t, "dd 20 MiB with an 8 MiB quota", out, exitCode(err), "Disk quota exceeded")
	if size := sizeOf(t, v.Path("big")); size > limit || size <= limit-(1<<20) {
		t.Errorf("dd stopped at %d bytes, want at the limit (%d]", size, limit)
	}
	got := usageOf(t, store, "user:alice")
	if want := privateOf(t, v.Dir); got != want {
		t.Errorf("after dd: usage %+v, want what the view holds %+v", got, want)
	}
	if got.Bytes > limit {
		t.Errorf("after dd: usage %d bytes passes the limit %d", got.Bytes, limit)
	}

	// Sparse truncate and fallocate past the limit: EDQUOT, nothing
	// charged. The files themselves exist (an inode each) at size 0.
	out, err = runToolErr("truncate", "-s", "1G", v.Path("sparse"))
	wantSaid(t, "truncate -s 1G with an 8 MiB quota", out, exitCode(err), "Disk quota exceeded")
	wantErrno(t, "truncate(2) sparse to 1 GiB", unix.Truncate(v.Path("sparse"), 1<<30), unix.EDQUOT)
	f, err := os.OpenFile(v.Path("falloc"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "fallocate(2) 1 GiB", unix.Fallocate(int(f.Fd()), 0, 0, 1<<30), unix.EDQUOT)
	f.Close()
	out, err = runToolErr("fallocate", "-l", "1G", v.Path("falloc2"))
	wantSaid(t, "fallocate -l 1G with an 8 MiB quota", out, exitCode(err), "Disk quota exceeded")
	for _, name := range []string{"sparse", "falloc"} {
		if size := sizeOf(t, v.Path(name)); size != 0 {
			t.Errorf("%s: size %d after a refused extension, want 0", name, size)
		}
	}
	if want := privateOf(t, v.Dir); usageOf(t, store, "user:alice") != want || want.Bytes != got.Bytes {
		t.Errorf("refused extensions charged something: usage %+v, view holds %+v, before %+v", usageOf(t, store, "user:alice"), want, got)
	}

	// Within the quota an extending truncate counts its logical size.
	if err := os.Remove(v.Path("big")); err != nil {
		t.Fatal(err)
	}
	wantUsageSoon(t, store, "user:alice", privateOf(t, v.Dir), "after rm big (closed, one link)")
	wantOK(t, "truncate(2) sparse to 5 MiB+1", unix.Truncate(v.Path("sparse"), 5<<20+1))
	got = usageOf(t, store, "user:alice")
	if got.Bytes != 5<<20+chargeUnit {
		t.Errorf("a 5 MiB+1 sparse file: usage %d bytes, want %d", got.Bytes, 5<<20+chargeUnit)
	}
	f, err = os.OpenFile(v.Path("falloc"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "fallocate(2) 3 MiB beside a 5 MiB file", unix.Fallocate(int(f.Fd()), 0, 0, 3<<20), unix.EDQUOT)
	wantOK(t, "fallocate(2) 2 MiB beside a 5 MiB file", unix.Fallocate(int(f.Fd()), 0, 0, 2<<20))
	f.Close()
	if got, want := usageOf(t, store, "user:alice"), privateOf(t, v.Dir); got != want || got.Bytes != 7<<20+chargeUnit {
		t.Errorf("after fallocate 2 MiB: usage %+v, view holds %+v (want %d bytes)", got, want, 7<<20+chargeUnit)
	}
	v.Stop()
	fsckClean(t, store)
}

// writeTar writes a tar archive of files (name → size of random content,
// or -1 for an empty file) built on the host.
func writeTar(t testing.TB, dir string, files func(root string)) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	mustMkdir(t, src, 0o755)
	files(src)
	archive := filepath.Join(dir, "a.tar")
	runTool(t, src, nil, "tar", "-cf", archive, ".")
	return archive
}

// TestQuotaUntar: an archive larger than the quota fails to extract with
// EDQUOT, leaves a tree fsck finds consistent and a usage equal to what the
// tree holds, both through the daemon and in the store afterwards.
func TestQuotaUntar(t *testing.T) {
	t.Parallel()
	const limit = 4 << 20
	v := quotaView(t, []string{"quota", "set", "user:alice", "--bytes", "4MiB"})
	archive := writeTar(t, t.TempDir(), func(root string) {
		for i := range 20 {
			sub := filepath.Join(root, fmt.Sprintf("d%d", i%3))
			os.MkdirAll(sub, 0o755)
			mustWrite(t, filepath.Join(sub, fmt.Sprintf("f%02d", i)), randomBytes(int64(i), 512<<10+i*100), 0o644)
		}
	})
	dst := v.Path("x")
	mustMkdir(t, dst, 0o755)
	out, err := runToolErr("tar", "-xf", archive, "-C", dst)
	wantSaid(t, "tar -x of 10 MiB with a 4 MiB quota", out, exitCode(err), "Disk quota exceeded")
	want := privateOf(t, v.Dir)
	got := usageOf(t, v.Store, "user:alice")
	if got != want || got.Bytes > limit {
		t.Errorf("after the failed untar: usage %+v, view holds %+v, limit %d bytes", got, want, limit)
	}
	v.Stop()
	fsckClean(t, v.Store)
	wantUsage(t, v.Store, "user:alice", want, "in the store after stop")
}

// TestQuotaInodes: an archive of 10,000 empty files hits an inode limit of
// 5,000: tar says EDQUOT and exactly the inodes left were created.
func TestQuotaInodes(t *testing.T) {
	t.Parallel()
	const limit, files = 5000, 10000
	v := quotaView(t, []string{"quota", "set", "user:alice", "--inodes", strconv.Itoa(limit)})
	archive := writeTar(t, t.TempDir(), func(root string) {
		dir := filepath.Join(root, "many")
		mustMkdir(t, dir, 0o755)
		for i := range files {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("e%05d", i)))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	})
	before := usageOf(t, v.Store, "user:alice").Inodes
	out, err := runToolErr("tar", "-xf", archive, "-C", v.Dir)
	wantSaid(t, "tar -x of 10,000 files with a 5,000 inode quota", out, exitCode(err), "Disk quota exceeded")
	entries, rerr := os.ReadDir(v.Path("many"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	// The directory many/ itself is one of the inodes.
	if want := limit - before - 1; int64(len(entries)) != want {
		t.Errorf("tar created %d files with %d of %d inodes used before, want %d", len(entries), before, limit, want)
	}
	got := usageOf(t, v.Store, "user:alice")
	if want := privateOf(t, v.Dir); got != want || got.Inodes != limit {
		t.Errorf("after the untar: usage %+v, view holds %+v, want %d inodes", got, want, limit)
	}
	wantErrno(t, "mkdir at the inode limit", os.Mkdir(v.Path("one-more"), 0o755), unix.EDQUOT)
	wantErrno(t, "symlink at the inode limit", os.Symlink("many", v.Path("one-more")), unix.EDQUOT)
	v.Stop()
	fsckClean(t, v.Store)
}

// TestQuotaMaxFileSize sets the max file size through the admin socket of
// a running daemon: the view enforces it at once (EFBIG for a write or a
// truncate past it), and lifting it lets the file grow again.
func TestQuotaMaxFileSize(t *testing.T) {
	t.Parallel()
	const maxSize = 1 << 20
	v := quotaView(t)
	p := v.Path("f")
	mustWrite(t, p, make([]byte, 2*maxSize), 0o644)
	// The daemon holds the store: this can only work through its socket.
	adminOK(t, "quota", "defaults", "--max-file-size", "1MiB", "--store", v.Store)
	if out := adminOK(t, "quota", "defaults", "--store", v.Store); !strings.Contains(strings.Join(strings.Fields(out), " "), "max file size 1 MiB") {
		t.Errorf("quota defaults after set:\n%s", out)
	}
	f, err := os.OpenFile(v.Path("g"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, maxSize), 0); err != nil {
		t.Errorf("write up to the max file size: %v", err)
	}
	_, err = f.WriteAt([]byte{1}, maxSize)
	wantErrno(t, "write 1 byte at the max file size", err, unix.EFBIG)
	wantErrno(t, "ftruncate past the max file size", f.Truncate(maxSize+1), unix.EFBIG)
	wantErrno(t, "truncate(2) past the max file size", unix.Truncate(v.Path("g"), 2*maxSize), unix.EFBIG)
	wantErrno(t, "fallocate past the max file size", unix.Fallocate(int(f.Fd()), 0, 0, maxSize+chargeUnit), unix.EFBIG)
	if size := sizeOf(t, v.Path("g")); size != maxSize {
		t.Errorf("after the refusals: size %d, want %d", size, maxSize)
	}
	out, derr := runToolErr("dd", "if=/dev/zero", "of="+v.Path("h"), "bs=64k", "count=32")
	wantSaid(t, "dd 2 MiB with a 1 MiB max file size", out, exitCode(derr), "File too large")
	if size := sizeOf(t, v.Path("h")); size != maxSize {
		t.Errorf("dd past the max file size stopped at %d bytes, want %d", size, maxSize)
	}
	// A file already larger may shrink, not grow.
	wantErrno(t, "append to a file over the new maxSize", appendTo(p, []byte{1}), unix.EFBIG)
	wantOK(t, "shrink a file over the new maxSize", unix.Truncate(p, maxSize+10))

	adminOK(t, "quota", "defaults", "--max-file-size", "none", "--store", v.Store)
	if _, err := f.WriteAt([]byte{1}, maxSize); err != nil {
		t.Errorf("write past 1 MiB once the maxSize is lifted: %v", err)
	}
	f.Close()
	v.Stop()
	fsckClean(t, v.Store)
}

func appendTo(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// dfFigures is what df shows of a directory, in bytes and inodes.
type dfFigures struct {
	size, used, avail  int64
	inodes, iused, ifr int64
}

// df runs `df -P -B1` and `df -P -i` on dir.
func df(t *testing.T, dir string) dfFigures {
	t.Helper()
	field := func(out string, n int) int64 {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		f := strings.Fields(lines[len(lines)-1])
		if len(f) < 6 {
			t.Fatalf("df %s: cannot read:\n%s", dir, out)
		}
		v, err := strconv.ParseInt(f[n], 10, 64)
		if err != nil {
			t.Fatalf("df %s: field %d: %v\n%s", dir, n, err, out)
		}
		return v
	}
	b := runTool(t, "", []string{"LC_ALL=C"}, "df", "-P", "-B1", dir)
	i := runTool(t, "", []string{"LC_ALL=C"}, "df", "-P", "-i", dir)
	return dfFigures{field(b, 1), field(b, 2), field(b, 3), field(i, 1), field(i, 2), field(i, 3)}
}

// TestQuotaDf: df in each zone of a view shows the figures of that zone's
// holder: the user's quota in the private tree (and output/), the share's
// in share/, the group's in groups/team-alpha, in every view showing it.
func TestQuotaDf(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	store := newStore(t)
	setupTeam(t, store)
	setQuota(t, store, "user:alice", "64MiB", "1000")
	setQuota(t, store, "group:team-alpha", "32MiB", "500")
	setQuota(t, store, "share", "16MiB", "200")
	s := startServe(t, store, "alice", "bob")
	s.waitSocket()
	mustWrite(t, s.In("alice", "p"), randomBytes(1, 1<<20+1), 0o644)
	mustMkdir(t, s.In("alice", "share", "d"), 0o755)
	mustWrite(t, s.In("alice", "share", "d", "s"), randomBytes(2, 2<<20), 0o644)
	mustWrite(t, s.In("bob", "groups", "team-alpha", "g"), randomBytes(3, 3<<20+5), 0o644)
	for _, c := range []struct {
		dir, holder string
	}{
		{s.In("alice"), "user:alice"},
		{s.In("alice", "output"), "user:alice"},
		{s.In("alice", "share"), "share"},
		{s.In("alice", "share", "d"), "share"},
		{s.In("bob", "share"), "share"},
		{s.In("alice", "groups", "team-alpha"), "group:team-alpha"},
		{s.In("bob", "groups", "team-alpha"), "group:team-alpha"},
		{s.In("bob"), "user:bob"},
	} {
		q := quotaOf(t, store, c.holder)
		got := df(t, c.dir)
		if c.holder == "user:bob" {
			// No limit: the backing disk's figures, which must not be
			// the quota of anyone else.
			if got.size == 64<<20 || got.size == 32<<20 || got.size == 16<<20 {
				t.Errorf("df %s (no quota): size %d is another holder's quota", c.dir, got.size)
			}
			continue
		}
		want := dfFigures{
			size: q.Limit.Bytes, used: q.Used.Bytes, avail: q.Limit.Bytes - q.Used.Bytes,
			inodes: q.Limit.Inodes, iused: q.Used.Inodes, ifr: q.Limit.Inodes - q.Used.Inodes,
		}
		if got != want {
			t.Errorf("df %s: %+v, want %s's %+v", c.dir, got, c.holder, want)
		}
	}
	// The figures follow the writes.
	if q := quotaOf(t, store, "share"); q.Used != (qAmount{Bytes: 2 << 20, Inodes: 3}) {
		t.Errorf("share usage %+v, want 2 MiB and 3 inodes (root, d, s)", q.Used)
	}
	if q := quotaOf(t, store, "group:team-alpha"); q.Used != (qAmount{Bytes: charge(3<<20 + 5), Inodes: 2}) {
		t.Errorf("group usage %+v, want %d bytes and 2 inodes", q.Used, charge(3<<20+5))
	}
	s.Stop()
}

// TestQuotaLinksUnlinkMove: a hard link costs nothing more; an unlinked
// file keeps its charge while open and frees it at the last close; mv from
// the private tree to share/ moves the charge from the user to the share.
func TestQuotaLinksUnlinkMove(t *testing.T) {
	t.Parallel()
	v := quotaView(t)
	store := v.Store
	base := usageOf(t, store, "user:alice")
	add := func(a qAmount, bytes, inodes int64) qAmount {
		return qAmount{Bytes: a.Bytes + bytes, Inodes: a.Inodes + inodes}
	}
	const size = 1<<20 + 1
	mustWrite(t, v.Path("a"), randomBytes(7, size), 0o644)
	withA := add(base, charge(size), 1)
	wantUsage(t, store, "user:alice", withA, "after writing a")
	mustMkdir(t, v.Path("sub"), 0o755)
	if err := os.Link(v.Path("a"), v.Path("sub", "b")); err != nil {
		t.Fatal(err)
	}
	withA = add(withA, 0, 1) // sub/
	wantUsage(t, store, "user:alice", withA, "after ln a sub/b")
	if err := os.Remove(v.Path("a")); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, store, "user:alice", withA, "after rm a (sub/b remains)")
	if err := os.Remove(v.Path("sub", "b")); err != nil {
		t.Fatal(err)
	}
	wantUsageSoon(t, store, "user:alice", add(base, 0, 1), "after rm of the last link (closed)")
	base = usageOf(t, store, "user:alice") // go on from here whatever it is
	base.Inodes--

	// Unlinked while open: charged until the last close.
	mustWrite(t, v.Path("c"), randomBytes(8, 2<<20), 0o644)
	f1, err := os.Open(v.Path("c"))
	if err != nil {
		t.Fatal(err)
	}
	f2, err := os.OpenFile(v.Path("c"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(v.Path("c")); err != nil {
		t.Fatal(err)
	}
	held := add(base, 2<<20, 2)
	wantUsage(t, store, "user:alice", held, "c unlinked, open twice")
	f1.Close()
	time.Sleep(200 * time.Millisecond)
	wantUsage(t, store, "user:alice", held, "c unlinked, still open once")
	f2.Close()
	wantUsageSoon(t, store, "user:alice", add(base, 0, 1), "after the last close of unlinked c")

	// mv across zones copies and unlinks: the charge moves.
	mustWrite(t, v.Path("d"), randomBytes(9, 3<<20+1), 0o644)
	share0 := usageOf(t, store, "share")
	user0 := usageOf(t, store, "user:alice")
	runTool(t, "", nil, "mv", v.Path("d"), v.Path("share", "d"))
	wantUsage(t, store, "user:alice", add(user0, -charge(3<<20+1), -1), "user after mv d share/")
	wantUsage(t, store, "share", add(share0, charge(3<<20+1), 1), "share after mv d share/")
	v.Stop()
	fsckClean(t, store)
}

// TestQuotaConcurrentGroup: 8 writers, 4 in alice's view and 4 in bob's,
// fill team-alpha's byte quota at once. No moment shows more than the
// limit used, every writer ends on EDQUOT, and the usage afterwards is the
// sum of the charged sizes of the files.
func TestQuotaConcurrentGroup(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	const limit, chunk = 16 << 20, 64 << 10
	store := newStore(t)
	setupTeam(t, store)
	setQuota(t, store, "group:team-alpha", "16MiB", "")
	s := startServe(t, store, "alice", "bob")
	s.waitSocket()
	var paths []string
	for i := range 8 {
		user := []string{"alice", "bob"}[i%2]
		paths = append(paths, s.In(user, "groups", "team-alpha", fmt.Sprintf("w%d", i)))
	}
	var done atomic.Bool
	var samples atomic.Int64
	var sampleErr error
	var smu sync.Mutex
	sampleFail := func(e error) {
		smu.Lock()
		if sampleErr == nil {
			sampleErr = e
		}
		smu.Unlock()
	}
	var wg sync.WaitGroup
	// Sampler: the charged sizes seen through the views and the usage
	// the daemon reports, all along.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			var sum int64
			for _, p := range paths {
				if fi, err := os.Stat(p); err == nil {
					sum += charge(fi.Size())
				}
			}
			if sum > limit {
				sampleFail(fmt.Errorf("the files' charged sizes add up to %d, over the limit %d", sum, limit))
			}
			out, _, code := runCLI(t, "quota", "show", "group:team-alpha", "--json", "--store", store)
			var qs []qInfo
			if code == 0 && json.Unmarshal([]byte(out), &qs) == nil && len(qs) == 1 && qs[0].Used.Bytes > limit {
				sampleFail(fmt.Errorf("quota show: %d bytes used, over the limit %d", qs[0].Used.Bytes, limit))
			}
			samples.Add(1)
		}
	}()
	errs := make([]error, len(paths))
	var writers sync.WaitGroup
	for i, p := range paths {
		writers.Add(1)
		go func() {
			defer writers.Done()
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				errs[i] = err
				return
			}
			buf := bytes.Repeat([]byte{byte(i)}, chunk)
			for {
				if _, err = f.Write(buf); err != nil {
					break
				}
			}
			errs[i] = err
			if cerr := f.Close(); cerr != nil && !errors.Is(cerr, unix.EDQUOT) {
				errs[i] = fmt.Errorf("close after %v: %w", err, cerr)
			}
		}()
	}
	writers.Wait()
	done.Store(true)
	wg.Wait()
	if sampleErr != nil {
		t.Errorf("during the writes (%d samples): %v", samples.Load(), sampleErr)
	}
	for i, err := range errs {
		if !errors.Is(err, unix.EDQUOT) {
			t.Errorf("writer %d (%s) ended with %v, want EDQUOT", i, paths[i], err)
		}
	}
	var sum int64
	for _, p := range paths {
		sum += charge(sizeOf(t, p))
	}
	got := usageOf(t, store, "group:team-alpha")
	if got.Bytes != sum || got.Bytes > limit || got.Bytes <= limit-chunk {
		t.Errorf("after the writes: usage %d bytes, files charged %d, limit %d (want usage == files, within one chunk of the limit)", got.Bytes, sum, limit)
	}
	if want := charged(t, s.In("alice", "groups", "team-alpha")); got != want {
		t.Errorf("after the writes: usage %+v, the group zone holds %+v", got, want)
	}
	s.Stop()
	fsckClean(t, store)
}

// TestQuotaCrash: SIGKILL during a write storm near the byte limit; the
// next start repairs the store, after which the usage is the sum of the
// charged sizes of what survived and fsck is clean.
func TestQuotaCrash(t *testing.T) {
	t.Parallel()
	const limit = 16 << 20
	v := quotaView(t, []string{"quota", "set", "user:alice", "--bytes", "16MiB"})
	store := v.Store
	mustMkdir(t, v.Path("storm"), 0o755)
	for i := range 3 {
		mustWrite(t, v.Path("storm", fmt.Sprintf("pre%d", i)), randomBytes(int64(i), 4<<20), 0o644)
	}
	var quotaHit atomic.Int32
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			buf := randomBytes(int64(100+w), 32<<10)
			for n := 0; ; n++ {
				f, err := os.OpenFile(v.Path("storm", fmt.Sprintf("w%d-%d", w, n)), os.O_CREATE|os.O_WRONLY, 0o644)
				if err != nil {
					if errors.Is(err, unix.EDQUOT) {
						quotaHit.Add(1)
						continue
					}
					return // the daemon is gone
				}
				for range 8 {
					if _, err = f.Write(buf); err != nil {
						break
					}
				}
				if errors.Is(err, unix.EDQUOT) {
					quotaHit.Add(1)
				}
				if n%3 == 0 {
					f.Sync()
				}
				f.Close()
				if err != nil && !errors.Is(err, unix.EDQUOT) {
					return
				}
				if n%10 == 9 {
					// Make room now and then, so the storm goes on at the
					// limit instead of stopping.
					os.Remove(v.Path("storm", fmt.Sprintf("w%d-%d", w, n-5)))
				}
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for quotaHit.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if quotaHit.Load() == 0 {
		t.Errorf("the storm never met the quota in 5s")
	}
	v.Kill()
	writers.Wait()

	v2 := startView(t, store, "alice")
	waitAdmin(t, store)
	got := usageOf(t, store, "user:alice")
	want := privateOf(t, v2.Dir)
	if got != want {
		t.Errorf("after SIGKILL and restart: usage %+v, the view holds %+v", got, want)
	}
	if got.Bytes > limit {
		t.Errorf("after SIGKILL and restart: usage %d bytes passes the limit %d", got.Bytes, limit)
	}
	v2.Stop()
	fsckClean(t, store)
	wantUsage(t, store, "user:alice", want, "in the store after the clean stop")
}
