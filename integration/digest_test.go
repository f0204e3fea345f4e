package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestDigestAtClose: a file written in order from its first byte (one
// write or many, a rewrite through O_TRUNC, a truncate to zero and a
// write) gets its digest at close from the daemon's writes, and the
// content worker never reads it back; a file written out of order goes
// to the worker as before. Every digest is the file's, fsck
// --verify-content agrees, and the write-close records carry them.
func TestDigestAtClose(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v, addr := startObservedView(t, store)

	want := map[string][]byte{}
	write := func(name string, data []byte) {
		mustWrite(t, v.Path(name), data, 0o644)
		want[name] = data
	}
	for i := range 20 {
		write(fmt.Sprintf("f%d", i), bytes.Repeat([]byte{byte(i)}, 1000*i))
	}
	// Many writes in order, through one descriptor.
	f, err := os.Create(v.Path("chunks"))
	if err != nil {
		t.Fatal(err)
	}
	var chunks []byte
	for i := range 50 {
		c := bytes.Repeat([]byte{byte('a' + i%26)}, 3000+i)
		if _, err := f.Write(c); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c...)
	}
	f.Close()
	want["chunks"] = chunks
	write("f3", []byte("rewritten through O_TRUNC\n"))
	if err := os.Truncate(v.Path("f4"), 0); err != nil {
		t.Fatal(err)
	}
	f, err = os.OpenFile(v.Path("f4"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("after a truncate to zero"))
	f.Close()
	want["f4"] = []byte("after a truncate to zero")

	// Out of order: the worker hashes it, and once it has, it has
	// hashed everything queued before (it takes the queue in order).
	f, err = os.Create(v.Path("random"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("tail"), 5000)
	f.WriteAt([]byte("head"), 0)
	f.Close()
	random := make([]byte, 5004)
	copy(random, "head")
	copy(random[5000:], "tail")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var mode struct {
			SHA256 string `json:"sha256"`
		}
		out := adminOK(t, "mode", "get", "--store", store, "--user", "alice", "random", "--json")
		if err := json.Unmarshal([]byte(out), &mode); err != nil {
			t.Fatalf("mode get --json: %v: %s", err, out)
		}
		if mode.SHA256 != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the content worker never hashed the file written out of order")
		}
		time.Sleep(50 * time.Millisecond)
	}
	fams := scrape(t, addr)
	if n, b := fams.value(t, "shedfs_content_digests_total"), fams.value(t, "shedfs_content_digest_bytes_total"); n != 1 || b != float64(len(random)) {
		t.Errorf("the content worker hashed %v files, %v bytes; want only the one written out of order (%d bytes)", n, b, len(random))
	}
	want["random"] = random

	for name, data := range want {
		if got := getx(t, v.Path(name), "user.shedfs.sha256"); got != sha256Hex(data) {
			t.Errorf("%s: user.shedfs.sha256 %q, want %q", name, got, sha256Hex(data))
		}
	}
	waitTrail(t, store, 5*time.Second, "write-close of chunks with its sha256", func(recs []trailRecord) bool {
		for _, r := range recs {
			if r.Path == "/chunks" && r.SHA256 == sha256Hex(chunks) {
				return true
			}
		}
		return false
	}, "--op", "write")
	v.Stop()
	out, errOut, code := runCLI(t, "fsck", "--store", store, "--verify-content")
	if code != 0 {
		t.Errorf("fsck --verify-content: exit %d\n%s%s", code, out, errOut)
	}
}
