package integration

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rssKiB is the resident set of process pid, from /proc/PID/status.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestFSAPIHugeReadBoundedMemory reads a 1 GiB file (made sparse in a
// view) through serve --api in bounded pieces, all of it, while the
// daemon's resident memory stays within 150 MiB of where it started; the
// agent doors' metrics count the reads.
func TestFSAPIHugeReadBoundedMemory(t *testing.T) {
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	addr, maddr := freeAddr(t), freeAddr(t)
	s := startServeWith(t, store, []string{"--api", addr, "--metrics", maddr}, "alice")
	const size = 1 << 30
	big := filepath.Join(s.Root, "alice", "big.bin")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		t.Fatalf("a sparse 1 GiB file: %v", err)
	}
	if _, err := f.WriteAt([]byte("END"), size-3); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "token", "create", "--store", store, "--user", "alice", "--door", "api", "--access", "read,list")
	if code != 0 {
		t.Fatalf("token create: %s", errOut)
	}
	tok := strings.TrimSpace(out)
	pid := s.cmd.Process.Pid
	start := rssKiB(t, pid)
	peak := start
	var off int64
	pieces := 0
	began := time.Now()
	for {
		code, out := apiCall(t, addr, tok, "POST", "/v1/fs/read", map[string]any{"path": "big.bin", "offset": off, "encoding": "base64"})
		if code != http.StatusOK {
			t.Fatalf("read at %d: %d %v", off, code, out)
		}
		n := int64(out["bytes"].(float64))
		if n <= 0 || n > 4<<20 {
			t.Fatalf("a piece of %d bytes", n)
		}
		pieces++
		if rss := rssKiB(t, pid); rss > peak {
			peak = rss
		}
		if out["eof"] == true {
			data, err := base64.StdEncoding.DecodeString(out["data"].(string))
			if err != nil || !strings.HasSuffix(string(data), "END") {
				t.Fatalf("the last piece does not end the file: %v", err)
			}
			off += n
			break
		}
		next := int64(out["nextOffset"].(float64))
		if next != off+n {
			t.Fatalf("next offset %d after %d+%d", next, off, n)
		}
		off = next
	}
	if off != size {
		t.Fatalf("read %d bytes, want %d", off, size)
	}
	t.Logf("%d pieces in %v; daemon RSS %d KiB at the start, %d KiB at the peak", pieces, time.Since(began).Round(time.Millisecond), start, peak)
	if peak-start > 150<<10 {
		t.Fatalf("the daemon's RSS grew by %d MiB while reading, more than 150 MiB", (peak-start)>>10)
	}
	fams := scrape(t, maddr)
	if n := fams.value(t, "shedfs_agent_calls_total", "door=api", "tool=read", "outcome=ok"); int(n) != pieces {
		t.Fatalf("shedfs_agent_calls_total{door=api,tool=read,outcome=ok} = %v, want %d", n, pieces)
	}
}

// TestMCPUnzipRefusals: through serve --mcp, a zip bomb and a zip with
// ../ entries (both put in the view through the kernel) are refused and
// leave nothing in the view, and the refusal is audited; a good zip
// unpacks where the view's kernel sees it at once, and links and the
// trash work as the token's user.
func TestMCPUnzipRefusals(t *testing.T) {
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	addr := freeAddr(t)
	s := startServeWith(t, store, []string{"--mcp", addr}, "alice")
	out, errOut, code := runCLI(t, "token", "create", "--store", store, "--user", "alice", "--door", "mcp")
	if code != 0 {
		t.Fatalf("token create: %s", errOut)
	}
	cs, err := mcpConnect(t, addr, strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, s.Stderr())
	}
	mkzip := func(name string, entries map[string][]byte) {
		t.Helper()
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for n, b := range entries {
			w, err := zw.Create(n)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(b)
		}
		zw.Close()
		if err := os.WriteFile(s.In("alice", name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkzip("bomb.zip", map[string][]byte{"readme.txt": []byte("hi"), "zeros.bin": make([]byte, 64<<20)})
	mkzip("climb.zip", map[string][]byte{"ok.txt": []byte("ok"), "../../escaped.txt": []byte("x")})
	mkzip("good.zip", map[string][]byte{"a/b.txt": []byte("inside")})
	for _, c := range []struct{ zip, code, rule string }{
		{"bomb.zip", "FILE_TOO_LARGE", "archive_bomb"},
		{"climb.zip", "PATH_ESCAPE", "archive_escape"},
	} {
		_, e, err := mcpCall(t, cs, "unzip", map[string]any{"path": c.zip, "to": "out"})
		if err != nil || e == nil || e["code"] != c.code || e["rule"] != c.rule {
			t.Fatalf("unzip %s: %v %v", c.zip, e, err)
		}
		if _, err := os.Stat(s.In("alice", "out")); !os.IsNotExist(err) {
			t.Fatalf("unzip %s wrote: %v", c.zip, err)
		}
	}
	ents, _ := os.ReadDir(s.In("alice"))
	for _, e := range ents {
		if e.Name() == "escaped.txt" || e.Name() == "readme.txt" || e.Name() == "ok.txt" {
			t.Fatalf("%s was written", e.Name())
		}
	}
	if _, e, err := mcpCall(t, cs, "unzip", map[string]any{"path": "good.zip", "to": "out"}); err != nil || e != nil {
		t.Fatalf("unzip good.zip: %v %v", e, err)
	}
	if b, err := os.ReadFile(s.In("alice", "out", "a", "b.txt")); err != nil || string(b) != "inside" {
		t.Fatalf("the unpacked file in the view: %q %v", b, err)
	}
	audit, errOut, code := runCLI(t, "audit", "--store", s.Store, "--door", "mcp")
	if code != 0 || !strings.Contains(audit, "archive_bomb") || !strings.Contains(audit, "archive_escape") {
		t.Fatalf("the refusals are not in the audit trail (%d %s): %s", code, errOut, audit)
	}
	// The trash as the token's user.
	if _, e, err := mcpCall(t, cs, "delete", map[string]any{"path": "out", "recursive": true}); err != nil || e != nil {
		t.Fatalf("delete: %v %v", e, err)
	}
	tl, e, err := mcpCall(t, cs, "trash_list", map[string]any{"path": "out"})
	if err != nil || e != nil || len(tl["entries"].([]any)) == 0 {
		t.Fatalf("trash_list: %v %v %v", tl, e, err)
	}
}

// TestMCPAccountTools: shedfs mcp on stdio, without a daemon and through
// one serving links, answers quota and saves a result page; through the
// daemon the page has a link, which shows the Markdown as a sandboxed
// page with the raw file one click away.
func TestMCPAccountTools(t *testing.T) {
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	adminOK(t, "quota", "set", "user:alice", "--bytes", "1GiB", "--store", store)
	alone := mcpStdio(t, "--store", store, "--user", "alice")
	q, e, err := mcpCall(t, alone, "quota", nil)
	if err != nil || e != nil || q["user"].(map[string]any)["limit"].(map[string]any)["bytes"] != float64(1<<30) {
		t.Fatalf("quota without a daemon: %v %v %v", q, e, err)
	}
	p, e, err := mcpCall(t, alone, "save_result_page", map[string]any{"title": "Offline", "content": "done"})
	if err != nil || e != nil || p["path"] != "output/offline.md" || p["url"] != nil || p["note"] == nil {
		t.Fatalf("save_result_page without a daemon: %v %v %v", p, e, err)
	}
	alone.Close()

	s := startServeWith(t, store, []string{"--http", "127.0.0.1:0"}, "alice")
	cs := mcpStdio(t, "--store", store, "--user", "alice")
	p, e, err = mcpCall(t, cs, "save_result_page", map[string]any{"title": "Weekly report", "content": "# Weekly\n\n<script>alert(1)</script> **done**"})
	if err != nil || e != nil || p["path"] != "output/weekly-report.md" || p["url"] == nil {
		t.Fatalf("save_result_page through the daemon: %v %v %v\n%s", p, e, err, s.Stderr())
	}
	if b, err := os.ReadFile(s.In("alice", "output", "weekly-report.md")); err != nil || !strings.Contains(string(b), "**done**") {
		t.Fatalf("the page in the view: %q %v", b, err)
	}
	resp, err := http.Get(p["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") ||
		!strings.Contains(string(body), "<strong>done</strong>") || strings.Contains(string(body), "<script>") || !strings.Contains(string(body), "?raw=1") {
		t.Fatalf("the page behind the link: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	l, e, err := mcpCall(t, cs, "links_list", nil)
	if err != nil || e != nil || len(l["links"].([]any)) != 1 {
		t.Fatalf("links_list: %v %v %v", l, e, err)
	}
	id := l["links"].([]any)[0].(map[string]any)["id"]
	if _, e, err := mcpCall(t, cs, "links_delete", map[string]any{"id": id}); err != nil || e != nil {
		t.Fatalf("links_delete: %v %v", e, err)
	}
	if resp, err := http.Get(p["url"].(string)); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a revoked link: %v %v", resp, err)
	}
}
