package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// apiCall sends one request to serve --api and decodes the JSON answer.
func apiCall(t *testing.T, addr, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// errCode is the RFC envelope's code of an answer, "" if none.
func errCode(out map[string]any) string {
	if e, ok := out["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

// TestOpenWOPConformance runs the OpenWOP host.fs conformance assertions
// against serve --api (read("../etc/passwd"), a read through a symlink
// to outside, a huge write) and the rest of the surface, with real tokens.
func TestOpenWOPConformance(t *testing.T) {
	store := newStore(t)
	for _, u := range []string{"alice", "bob"} {
		adminOK(t, "user", "add", u, "--store", store)
	}
	addr := freeAddr(t)
	// Symlinks anywhere, so that one can point out of the view.
	s := startServeWith(t, store, []string{"--api", addr, "--symlinks", "allow"}, "alice", "bob")
	token := func(args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, append([]string{"token", "create", "--store", store}, args...)...)
		if code != 0 {
			t.Fatalf("token create: %s", errOut)
		}
		return strings.TrimSpace(out)
	}
	tok := token("--user", "alice", "--door", "api")

	code, out := apiCall(t, addr, tok, "GET", "/v1/fs/capabilities", nil)
	fs, _ := out["fs"].(map[string]any)
	if code != 200 || fs["supported"] != true || fs["sandboxRoot"] != "/" || fs["maxFileSizeBytes"].(float64) <= 0 {
		t.Fatalf("capabilities: %d %v", code, out)
	}

	// The RFC's three assertions.
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/read", map[string]any{"path": "../etc/passwd"}); code != 400 || errCode(out) != "path_outside_sandbox" {
		t.Errorf(`read("../etc/passwd"): %d %v`, code, out)
	}
	if err := os.Symlink("/etc/passwd", s.In("alice", "passwd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../etc/passwd", s.In("alice", "output", "up")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"passwd", "output/up"} {
		if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/read", map[string]any{"path": p}); errCode(out) != "path_outside_sandbox" {
			t.Errorf("read through a symlink to outside (%s): %d %v", p, code, out)
		}
	}
	adminOK(t, "quota", "defaults", "--max-file-size", "1MiB", "--store", store)
	big := base64.StdEncoding.EncodeToString(make([]byte, 2<<20))
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/write", map[string]any{"path": "big.bin", "data": big, "encoding": "base64"}); errCode(out) != "file_too_large" {
		t.Errorf("a huge write: %d %v", code, out)
	}
	if _, err := os.Stat(s.In("alice", "big.bin")); !os.IsNotExist(err) {
		t.Errorf("the refused write left a file: %v", err)
	}

	// The rest of the surface.
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/write", map[string]any{"path": "output/r.md", "data": "# report\n"}); code != 200 || out["path"] != "output/r.md" {
		t.Fatalf("write: %d %v", code, out)
	}
	if got := string(mustRead(t, s.In("alice", "output", "r.md"))); got != "# report\n" {
		t.Fatalf("the view reads %q", got)
	}
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/read", map[string]any{"path": "output/r.md"}); code != 200 || out["data"] != "# report\n" || out["encoding"] != "utf8" {
		t.Fatalf("read: %d %v", code, out)
	}
	// The view's kernel holds the pages it read: a write through the API
	// is seen at once all the same.
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/write", map[string]any{"path": "output/r.md", "data": "# report, v2\n"}); code != 200 {
		t.Fatalf("overwrite: %d %v", code, out)
	}
	if got := string(mustRead(t, s.In("alice", "output", "r.md"))); got != "# report, v2\n" {
		t.Fatalf("the view reads %q after the overwrite", got)
	}
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/stat", map[string]any{"path": "output/r.md"}); code != 200 || out["size"].(float64) != 13 {
		t.Fatalf("stat: %d %v", code, out)
	}
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/list", map[string]any{"path": "output"}); code != 200 || len(out["entries"].([]any)) != 2 {
		t.Fatalf("list: %d %v", code, out)
	}
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/write", map[string]any{"path": "uploads/x", "data": "x"}); code != 403 || errCode(out) != "fs_permission_denied" || out["error"].(map[string]any)["rule"] != "uploads_readonly" {
		t.Fatalf("write into uploads: %d %v", code, out)
	}
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/read", map[string]any{"path": "nope"}); code != 404 || errCode(out) != "not_found" {
		t.Fatalf("read a missing file: %d %v", code, out)
	}
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/delete", map[string]any{"path": "output/r.md"}); code != 200 {
		t.Fatalf("delete: %d %v", code, out)
	}
	if _, err := os.Stat(s.In("alice", "output", "r.md")); !os.IsNotExist(err) {
		t.Fatalf("still in the view after delete: %v", err)
	}
	adminOK(t, "quota", "set", "user:alice", "--bytes", "64KiB", "--store", store)
	if code, out := apiCall(t, addr, tok, "POST", "/v1/fs/write", map[string]any{"path": "q.bin", "data": base64.StdEncoding.EncodeToString(make([]byte, 200<<10)), "encoding": "base64"}); errCode(out) != "quota_exceeded" {
		t.Errorf("past the quota: %d %v", code, out)
	}

	// Tokens refused: none, wrong, another user's door, read-only,
	// outside the root, expired (a 1 s token), revoked.
	for _, bad := range []string{"", "nonsense", tok[:len(tok)-3] + "aaa", token("--user", "alice", "--door", "mcp")} {
		if code, out := apiCall(t, addr, bad, "POST", "/v1/fs/stat", map[string]any{"path": ""}); code != 401 || errCode(out) != "unauthorized" {
			t.Errorf("token %q: %d %v", bad, code, out)
		}
	}
	ro := token("--user", "alice", "--access", "read,list", "--root", "output")
	if code, out := apiCall(t, addr, ro, "POST", "/v1/fs/write", map[string]any{"path": "output/x", "data": "x"}); code != 403 || out["error"].(map[string]any)["rule"] != "token_access" {
		t.Errorf("a read-only token writes: %d %v", code, out)
	}
	if code, out := apiCall(t, addr, ro, "POST", "/v1/fs/list", map[string]any{"path": ""}); code != 403 || out["error"].(map[string]any)["rule"] != "token_scope" {
		t.Errorf("a token lists outside its root: %d %v", code, out)
	}
	short := token("--user", "alice", "--ttl", "1s")
	time.Sleep(1100 * time.Millisecond)
	if code, _ := apiCall(t, addr, short, "POST", "/v1/fs/stat", map[string]any{"path": ""}); code != 401 {
		t.Errorf("an expired token: %d", code)
	}
	bobs := token("--user", "bob")
	if code, out := apiCall(t, addr, bobs, "POST", "/v1/fs/stat", map[string]any{"path": "output/r.md"}); code != 404 {
		t.Errorf("bob's token sees alice's file: %d %v", code, out)
	}
	var list []struct{ ID, User string }
	json.Unmarshal([]byte(adminOK(t, "token", "list", "--user", "bob", "--json", "--store", store)), &list)
	for _, tk := range list {
		adminOK(t, "token", "revoke", tk.ID, "--store", store)
	}
	if code, _ := apiCall(t, addr, bobs, "POST", "/v1/fs/stat", map[string]any{"path": ""}); code != 401 {
		t.Errorf("a revoked token: %d", code)
	}
}
