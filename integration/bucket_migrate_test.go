package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shedfs/shedfs/internal/s3test"
)

// TestBucketMigrate: shedfs migrate --blobs-to copies an embedded store's
// contents (a kept version in trash/ too) to a bucket. It refuses while a
// daemon serves the store; a run that fails midway (the S3 server down)
// leaves the store as it was and a second run completes; the store then
// refuses to open without the bucket, and a view served from the bucket
// with an empty cache reads every file whole, with its sha256.
func TestBucketMigrate(t *testing.T) {
	s := s3test.Start(t)
	store := newStore(t)
	url := s.URL("migrate")
	migrate := []string{"migrate", "--from", store, "--blobs-to", url}

	v := startView(t, store, "alice")
	mustWrite(t, v.Path("a.txt"), []byte("first\n"), 0o644)
	mustWrite(t, v.Path("a.txt"), []byte("second\n"), 0o644) // O_TRUNC: "first" kept
	big := randomData(20<<20+4321, 7)
	mustWrite(t, v.Path("big"), big, 0o644)
	mustMkdir(t, v.Path("d"), 0o755)
	mustWrite(t, v.Path("d", "small"), []byte("small\n"), 0o644)
	want := sha256Hex(big)
	waitXattr(t, v.Path("big"), "user.shedfs.sha256", 30*time.Second, func(s string) bool { return s == want })

	out, errOut, code := runCLIEnv(t, s.Env(), migrate...)
	if code == 0 || !strings.Contains(errOut, "served by the shedfs daemon") {
		t.Errorf("migrate while served: exit %d, want a refusal\n%s%s", code, out, errOut)
	}
	checkOneLine(t, "migrate while served", errOut)
	v.Stop()

	// Served from the bucket before it has the contents: the cache would
	// drop them.
	if out, errOut, code := runCLIEnv(t, s.Env(), "fsck", "--dry-run", "--store", store, "--blobs", url); code == 0 || !strings.Contains(errOut, "migrate --from") {
		t.Errorf("a local store opened with --blobs s3://...: exit %d, want a refusal pointing at migrate\n%s%s", code, out, errOut)
	}

	s.Kill()
	if out, errOut, code := runCLIEnv(t, s.Env(), migrate...); code == 0 {
		t.Errorf("migrate with the S3 server down: exit 0\n%s%s", out, errOut)
	}
	if out, errOut, code := runCLI(t, "fsck", "--dry-run", "--store", store); code != 0 {
		t.Errorf("a failed migration recorded the bucket: the store no longer opens without it: exit %d\n%s%s", code, out, errOut)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runCLIEnv(t, s.Env(), migrate...); code != 0 || !strings.Contains(out, "migrated ") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	// Again: everything is there already.
	if out, errOut, code := runCLIEnv(t, s.Env(), migrate...); code == 0 || !strings.Contains(errOut, "--blobs") {
		t.Errorf("migrate of a migrated store: exit %d, want a refusal naming --blobs\n%s%s", code, out, errOut)
	}

	if out, errOut, code := runCLI(t, "fsck", "--dry-run", "--store", store); code == 0 || !strings.Contains(errOut, url) {
		t.Errorf("fsck without the bucket: exit %d, want a refusal naming %s\n%s%s", code, url, out, errOut)
	}
	if out, errOut, code := runCLIEnv(t, s.Env(), "fsck", "--dry-run", "--store", store, "--blobs", s.URL("other")); code == 0 || !strings.Contains(errOut, "not "+s.URL("other")) {
		t.Errorf("fsck with another bucket: exit %d, want a refusal\n%s%s", code, out, errOut)
	}
	// A new host's view: nothing cached.
	if err := os.RemoveAll(filepath.Join(store, "blobs")); err != nil {
		t.Fatal(err)
	}
	b := &bucketStore{s: s, dir: store, flags: []string{"--blobs", url}}
	v = b.mount(t, "alice", "--cache-size", "64MiB")
	if got := mustRead(t, v.Path("a.txt")); string(got) != "second\n" {
		t.Errorf("a.txt from the bucket: %q", got)
	}
	if got := mustRead(t, v.Path("d", "small")); string(got) != "small\n" {
		t.Errorf("d/small from the bucket: %q", got)
	}
	if got := mustRead(t, v.Path("big")); !bytes.Equal(got, big) {
		t.Errorf("big from the bucket: %d bytes, not what was written", len(got))
	}
	if got := waitXattr(t, v.Path("big"), "user.shedfs.sha256", 30*time.Second, func(s string) bool { return s == want }); got != want {
		t.Errorf("big's user.shedfs.sha256 %q, want %q", got, want)
	}
	kept := trashNames(t, v.Path("trash"), "a.txt")
	if len(kept) != 1 {
		t.Fatalf("trash/ lists %v for a.txt, want the first version", kept)
	}
	if got := mustRead(t, v.Path("trash", kept[0])); string(got) != "first\n" {
		t.Errorf("the kept version reads %q", got)
	}
	mustWrite(t, v.Path("after"), []byte("written on the bucket\n"), 0o644)
	b.waitUploaded(t)
	v.Stop()
	if out, errOut, code := runCLIEnv(t, s.Env(), "fsck", "--store", store, "--verify-content", "--blobs", url); code != 0 || !hasCleanLine(out) {
		t.Errorf("fsck --verify-content of the migrated store: exit %d\n%s%s", code, out, errOut)
	}
}
