package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type snapInfo struct {
	Name      string   `json:"name"`
	Path      string   `json:"path"`
	Entries   int      `json:"entries"`
	Bytes     int64    `json:"bytes"`
	OnlyBytes int64    `json:"only_bytes"`
	Open      []string `json:"open"`
	Took      int64    `json:"took_ns"`
}

type snapChange struct {
	Path      string `json:"path"`
	OldPath   string `json:"old_path"`
	OldSize   int64  `json:"old_size"`
	NewSize   int64  `json:"new_size"`
	OldSHA256 string `json:"old_sha256"`
	NewSHA256 string `json:"new_sha256"`
	OldMode   string `json:"old_mode"`
	NewMode   string `json:"new_mode"`
}

type snapDiff struct {
	Added, Removed, Modified, Renamed []snapChange
	Modes                             []snapChange `json:"mode_changed"`
}

func bigOld(chunk []byte) []byte {
	old := make([]byte, 0, 200<<20)
	for i := 0; i < 200; i++ {
		old = append(old, chunk...)
	}
	return old
}

type quotaRow struct {
	Used      struct{ Bytes, Inodes int64 } `json:"used"`
	Snapshots struct{ Bytes int64 }         `json:"snapshots"`
}

func snapQuotaOf(t *testing.T, store, holder string) quotaRow {
	t.Helper()
	var qs []quotaRow
	if err := json.Unmarshal([]byte(adminOK(t, "quota", "show", holder, "--json", "--store", store)), &qs); err != nil || len(qs) != 1 {
		t.Fatalf("quota show %s: %v %+v", holder, err, qs)
	}
	return qs[0]
}

func quotaSnapshots(t *testing.T, store, holder string) int64 {
	return snapQuotaOf(t, store, holder).Snapshots.Bytes
}
func quotaUsed(t *testing.T, store, holder string) int64 {
	return snapQuotaOf(t, store, holder).Used.Bytes
}

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func snapshotJSON[T any](t *testing.T, args ...string) T {
	t.Helper()
	var v T
	out := adminOK(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("shedfs %s --json: %q: %v", strings.Join(args, " "), out, err)
	}
	return v
}

// TestSnapshots takes a snapshot of a tree with a 200 MiB file through a
// running daemon: it is instant (links, no copy) and charges nothing;
// writes, a truncate, a delete, a rename and a chmod through the view
// afterwards leave it as it was (diff shows each, with the old content's
// sha256), the bytes only it holds are shown and freed by delete,
// --max-snapshots refuses, and fsck is clean after all of it.
func TestSnapshots(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--quota", "2G", "--store", store)
	s := startServe(t, store, "alice")
	A := func(e ...string) string { return s.In("alice", e...) }

	mustMkdir(t, A("proj"), 0o755)
	mustWrite(t, A("proj", "a.txt"), []byte("alpha"), 0o644)
	mustWrite(t, A("proj", "b.txt"), []byte("bravo"), 0o644)
	mustWrite(t, A("proj", "c.txt"), []byte("charlie"), 0o644)
	mustWrite(t, A("proj", "mode.sh"), []byte("#!/bin/sh\n"), 0o644)
	mustWrite(t, A("outside.txt"), []byte("not in the snapshot"), 0o644)
	big, err := os.OpenFile(A("proj", "big.bin"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for i := 0; i < 200; i++ {
		if _, err := big.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := big.Sync(); err != nil {
		t.Fatal(err)
	}
	// big.bin stays open for writing across the snapshot.

	start := time.Now()
	s1 := snapshotJSON[snapInfo](t, "snapshot", "create", "--store", store, "--user", "alice", "--path", "proj", "s1")
	took := time.Since(start)
	if s1.Entries != 6 || s1.Bytes != 200<<20+5+5+7+10 || s1.Path != "proj" {
		t.Errorf("snapshot s1: %+v", s1)
	}
	if time.Duration(s1.Took) > 500*time.Millisecond {
		t.Errorf("snapshot of 200 MiB took %v in the daemon (%v with the CLI): not independent of bytes", time.Duration(s1.Took), took)
	}
	if len(s1.Open) != 1 || s1.Open[0] != "proj/big.bin" && s1.Open[0] != "big.bin" {
		t.Errorf("snapshot s1 open files %v, want big.bin", s1.Open)
	}
	if sh := snapshotJSON[snapInfo](t, "snapshot", "show", "--store", store, "--user", "alice", "s1"); sh.OnlyBytes != 0 {
		t.Errorf("a fresh snapshot holds %d bytes of its own", sh.OnlyBytes)
	}

	// The view shows it read-only under snapshots/s1, as it was.
	if got := listNames(t, A("snapshots")); strings.Join(got, ",") != "s1" {
		t.Errorf("snapshots/ lists %v", got)
	}
	if got := listNames(t, A("snapshots", "s1")); strings.Join(got, ",") != "a.txt,b.txt,big.bin,c.txt,mode.sh" {
		t.Errorf("snapshots/s1 lists %v", got)
	}
	wantErrno(t, "write in a snapshot", writeFile(A("snapshots", "s1", "a.txt"), []byte("x")), syscall.EROFS)
	wantErrno(t, "create in a snapshot", os.WriteFile(A("snapshots", "s1", "z.txt"), []byte("x"), 0o644), syscall.EROFS)
	wantErrno(t, "rm in a snapshot", os.Remove(A("snapshots", "s1", "a.txt")), syscall.EROFS)
	wantErrno(t, "chmod in a snapshot", os.Chmod(A("snapshots", "s1", "a.txt"), 0o600), syscall.EROFS)
	wantErrno(t, "rmdir a snapshot", os.Remove(A("snapshots", "s1")), syscall.EROFS)

	// Change everything through the view.
	if _, err := big.WriteAt([]byte("CHANGED"), 0); err != nil {
		t.Fatal(err)
	}
	big.Close()
	mustWrite(t, A("proj", "a.txt"), []byte("ALPHA, longer"), 0o644)
	if err := os.Remove(A("proj", "b.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(A("proj", "c.txt"), A("proj", "d.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(A("proj", "mode.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, A("proj", "new.txt"), []byte("new"), 0o644)

	d := snapshotJSON[snapDiff](t, "snapshot", "diff", "--store", store, "--user", "alice", "s1", "--now")
	wantPaths := func(what string, got []snapChange, want ...string) {
		t.Helper()
		var ps []string
		for _, c := range got {
			ps = append(ps, c.Path)
		}
		if strings.Join(ps, ",") != strings.Join(want, ",") {
			t.Errorf("diff %s: %v, want %v", what, ps, want)
		}
	}
	wantPaths("added", d.Added, "new.txt")
	wantPaths("removed", d.Removed, "b.txt")
	wantPaths("modified", d.Modified, "a.txt", "big.bin")
	wantPaths("renamed", d.Renamed, "d.txt")
	wantPaths("mode changed", d.Modes, "mode.sh")
	for _, m := range d.Modified {
		if m.Path == "a.txt" && (m.OldSHA256 != hexSum([]byte("alpha")) || m.NewSHA256 != hexSum([]byte("ALPHA, longer")) || m.OldSize != 5 || m.NewSize != 13) {
			t.Errorf("diff of a.txt: %+v", m)
		}
		if m.Path == "big.bin" {
			if m.OldSHA256 != hexSum(bigOld(chunk)) {
				t.Errorf("the snapshot's big.bin changed with the live file: %+v", m)
			}
		}
	}
	if len(d.Renamed) == 1 && d.Renamed[0].OldPath != "c.txt" {
		t.Errorf("renamed from %q, want c.txt", d.Renamed[0].OldPath)
	}
	if len(d.Modes) == 1 && (d.Modes[0].OldMode != "0644" || d.Modes[0].NewMode != "0755") {
		t.Errorf("mode change %+v", d.Modes[0])
	}
	// What only the snapshot holds now: big.bin's old content (the old
	// a.txt and b.txt are in the trash too, which shares them).
	if sh := snapshotJSON[snapInfo](t, "snapshot", "show", "--store", store, "--user", "alice", "s1"); sh.OnlyBytes != 200<<20 {
		t.Errorf("snapshot s1 holds %d bytes of its own, want %d", sh.OnlyBytes, 200<<20)
	}

	// The snapshot in the view still reads the old content.
	if got := string(mustRead(t, A("snapshots", "s1", "a.txt"))); got != "alpha" {
		t.Errorf("snapshots/s1/a.txt reads %q after the live file changed", got)
	}
	if got := string(mustRead(t, A("snapshots", "s1", "b.txt"))); got != "bravo" {
		t.Errorf("snapshots/s1/b.txt reads %q after the live file was removed", got)
	}
	if st, err := os.Stat(A("snapshots", "s1", "mode.sh")); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("snapshots/s1/mode.sh: %v %v", st.Mode(), err)
	}
	if got := mustRead(t, A("snapshots", "s1", "big.bin")); len(got) != 200<<20 || hexSum(got) != hexSum(bigOld(chunk)) {
		t.Errorf("snapshots/s1/big.bin: %d bytes, not the old content", len(got))
	}
	// diff -r between the snapshot and a copy made through the view of it.
	cp := t.TempDir()
	runTool(t, "", nil, "cp", "-a", A("snapshots", "s1"), cp+"/s1")
	runTool(t, "", nil, "diff", "-r", A("snapshots", "s1"), cp+"/s1")

	// Charged to alice, apart in quota show.
	if q := quotaSnapshots(t, store, "user:alice"); q != 200<<20 {
		t.Errorf("quota show: snapshots hold %d bytes, want %d", q, 200<<20)
	}

	// A second one; diff between the two; the limit on their number.
	snapshotJSON[snapInfo](t, "snapshot", "create", "--store", store, "--user", "alice", "--path", "proj", "s2")
	d2 := snapshotJSON[snapDiff](t, "snapshot", "diff", "--store", store, "--user", "alice", "s1", "s2")
	wantPaths("added s1..s2", d2.Added, "new.txt")
	wantPaths("modified s1..s2", d2.Modified, "a.txt", "big.bin")
	if d3 := snapshotJSON[snapDiff](t, "snapshot", "diff", "--store", store, "--user", "alice", "s2"); len(d3.Added)+len(d3.Removed)+len(d3.Modified)+len(d3.Renamed)+len(d3.Modes) != 0 {
		t.Errorf("diff of a snapshot just taken against now: %+v", d3)
	}
	adminFails(t, "--max-snapshots", "snapshot", "create", "--store", store, "--user", "alice", "--max-snapshots", "2", "s3")
	adminFails(t, "already", "snapshot", "create", "--store", store, "--user", "alice", "s2")
	adminFails(t, "no snapshot named", "snapshot", "show", "--store", store, "--user", "alice", "nope")
	if out := adminOK(t, "snapshot", "list", "--store", store, "--user", "alice"); !strings.Contains(out, "s1") || !strings.Contains(out, "s2") {
		t.Errorf("snapshot list:\n%s", out)
	}
	del := snapshotJSON[snapInfo](t, "snapshot", "delete", "--store", store, "--user", "alice", "s1")
	if del.OnlyBytes != 200<<20 {
		t.Errorf("delete of s1 freed %d bytes", del.OnlyBytes)
	}
	if out := adminOK(t, "snapshot", "list", "--store", store, "--user", "alice"); strings.Contains(out, "s1") {
		t.Errorf("snapshot list after delete:\n%s", out)
	}
	if q := quotaSnapshots(t, store, "user:alice"); q != 0 {
		t.Errorf("quota show: snapshots hold %d bytes after the delete, want 0", q)
	}

	// A copy that would not fit the quota is refused (EDQUOT), and
	// nothing of the snapshot is evicted for it; deleting it makes room.
	mustMkdir(t, A("tight"), 0o755)
	mustWrite(t, A("tight", "f.bin"), make([]byte, 1<<20), 0o644)
	adminFails(t, "not a directory", "snapshot", "create", "--store", store, "--user", "alice", "--path", "tight/f.bin", "tight")
	adminOK(t, "snapshot", "create", "--store", store, "--user", "alice", "--path", "tight", "tight")
	used := quotaUsed(t, store, "user:alice")
	adminOK(t, "quota", "set", "user:alice", "--bytes", strconv.FormatInt(used+(1<<19), 10), "--store", store)
	wantErrno(t, "write to a file whose copy does not fit", writeFile(A("tight", "f.bin"), []byte("x")), syscall.EDQUOT)
	if got := listNames(t, A("snapshots")); strings.Join(got, ",") != "s2,tight" {
		t.Errorf("snapshots/ lists %v after a refused copy", got)
	}
	adminOK(t, "snapshot", "delete", "--store", store, "--user", "alice", "tight")
	wantOK(t, "write after the snapshot is deleted", writeFile(A("tight", "f.bin"), []byte("x")))
	adminOK(t, "quota", "set", "user:alice", "--bytes", "2G", "--store", store)
	// The live files read what was written last.
	if got := string(mustRead(t, A("proj", "a.txt"))); got != "ALPHA, longer" {
		t.Errorf("a.txt reads %q", got)
	}

	// Restore: a dry run changes nothing; the restore puts s2 back and
	// its automatic snapshot undoes it.
	mustWrite(t, A("proj", "a.txt"), []byte("third"), 0o644)
	if err := os.Remove(A("proj", "d.txt")); err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, A("proj", "extra"), 0o755)
	mustWrite(t, A("proj", "extra", "x"), []byte("x"), 0o644)
	if err := os.Chmod(A("proj", "mode.sh"), 0o600); err != nil {
		t.Fatal(err)
	}
	type restoreResult struct {
		Undo                       string
		Created, Replaced, Removed []string
		Modes                      []string `json:"mode_changed"`
	}
	dry := snapshotJSON[restoreResult](t, "snapshot", "restore", "--store", store, "--user", "alice", "--dry-run", "s2")
	plan := fmt.Sprintf("%v %v %v %v", dry.Created, dry.Replaced, dry.Removed, dry.Modes)
	if plan != "[d.txt] [a.txt] [extra extra/x] [mode.sh]" {
		t.Errorf("restore --dry-run plan: %s", plan)
	}
	if got := string(mustRead(t, A("proj", "a.txt"))); got != "third" {
		t.Errorf("a dry run changed a.txt to %q", got)
	}
	r := snapshotJSON[restoreResult](t, "snapshot", "restore", "--store", store, "--user", "alice", "s2")
	if r.Undo == "" {
		t.Fatalf("restore took no automatic snapshot: %+v", r)
	}
	if got := string(mustRead(t, A("proj", "a.txt"))); got != "ALPHA, longer" {
		t.Errorf("a.txt reads %q after the restore", got)
	}
	if got := string(mustRead(t, A("proj", "d.txt"))); got != "charlie" {
		t.Errorf("d.txt reads %q after the restore", got)
	}
	// d.txt came back as a link of the snapshot's content, not a copy.
	if n := linksOf(t, store, "charlie"); n < 3 { // the snapshot, the trash, the restored file
		t.Errorf("the restored d.txt's content has %d links: copied, not linked", n)
	}
	if st, err := os.Stat(A("proj", "mode.sh")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("mode.sh after the restore: %v %v", st.Mode(), err)
	}
	if _, err := os.Stat(A("proj", "extra")); !os.IsNotExist(err) {
		t.Errorf("extra/ after the restore: %v", err)
	}
	if d := snapshotJSON[snapDiff](t, "snapshot", "diff", "--store", store, "--user", "alice", "s2"); len(d.Added)+len(d.Removed)+len(d.Modified)+len(d.Renamed)+len(d.Modes) != 0 {
		t.Errorf("diff of s2 against now after its restore: %+v", d)
	}
	snapshotJSON[restoreResult](t, "snapshot", "restore", "--store", store, "--user", "alice", r.Undo)
	if got := string(mustRead(t, A("proj", "a.txt"))); got != "third" {
		t.Errorf("a.txt reads %q after the undo", got)
	}
	if got := string(mustRead(t, A("proj", "extra", "x"))); got != "x" {
		t.Errorf("extra/x reads %q after the undo", got)
	}
	if _, err := os.Stat(A("proj", "d.txt")); !os.IsNotExist(err) {
		t.Errorf("d.txt after the undo: %v", err)
	}
	if st, err := os.Stat(A("proj", "mode.sh")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode.sh after the undo: %v %v", st.Mode(), err)
	}

	// --ttl: gone from the view when its time is up, deleted by the
	// next snapshot command.
	adminOK(t, "snapshot", "create", "--store", store, "--user", "alice", "--path", "proj", "--ttl", "1s", "short")
	if got := listNames(t, A("snapshots")); !slices.Contains(got, "short") {
		t.Errorf("snapshots/ lists %v without the new one", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := listNames(t, A("snapshots")); slices.Contains(got, "short") {
		t.Errorf("snapshots/ lists %v after its ttl", got)
	}
	if out := adminOK(t, "snapshot", "list", "--store", store, "--user", "alice"); strings.Contains(out, "short") {
		t.Errorf("snapshot list after the ttl:\n%s", out)
	}
	s.Stop()
	fsckClean(t, store)
}

// TestSnapshotOfSession: a snapshot of a session's scratch is shown in
// that session's snapshots/ and not in the main view's; a write in the
// session afterwards leaves it as it was.
func TestSnapshotOfSession(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	s := startServe(t, store, "alice")
	s.sessionOpen(t, "alice", "w1")
	S := func(e ...string) string { return s.In("alice@w1", e...) }
	mustWrite(t, S("work.txt"), []byte("draft"), 0o644)
	adminOK(t, "snapshot", "create", "--store", store, "--user", "alice", "--session", "w1", "cp1")
	mustWrite(t, S("work.txt"), []byte("final"), 0o644)
	if got := string(mustRead(t, S("snapshots", "cp1", "work.txt"))); got != "draft" {
		t.Errorf("the session's snapshots/cp1/work.txt reads %q", got)
	}
	if got := listNames(t, s.In("alice", "snapshots")); len(got) != 0 {
		t.Errorf("the main view's snapshots/ lists %v", got)
	}
	d := snapshotJSON[snapDiff](t, "snapshot", "diff", "--store", store, "--user", "alice", "cp1")
	if len(d.Modified) != 1 || d.Modified[0].Path != "work.txt" {
		t.Errorf("diff of the session's snapshot: %+v", d)
	}
	adminOK(t, "session", "close", "--store", store, "--user", "alice", "w1")
	s.Stop()
	fsckClean(t, store)

	// Links of no snapshot (a create cut short) are found and removed.
	stray := filepath.Join(store, "blobs", "snapshots", "0123456789abcdef")
	mustMkdir(t, stray, 0o700)
	mustWrite(t, filepath.Join(stray, "42.s"), []byte("left over"), 0o600)
	if out, _, code := runCLI(t, "fsck", "--store", store, "--dry-run"); code == 0 || !strings.Contains(out, "snapshot") {
		t.Errorf("fsck --dry-run with stray snapshot links: exit %d\n%s", code, out)
	}
	adminOK(t, "fsck", "--store", store)
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("stray snapshot links after fsck: %v", err)
	}
	fsckClean(t, store)
}

// linksOf is the largest link count of a blob of store whose content is
// content.
func linksOf(t *testing.T, store, content string) uint64 {
	t.Helper()
	var most uint64
	filepath.Walk(filepath.Join(store, "blobs"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(content)) {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && string(b) == content {
			most = max(most, uint64(fi.Sys().(*syscall.Stat_t).Nlink))
		}
		return nil
	})
	return most
}
