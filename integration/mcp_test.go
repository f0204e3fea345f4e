package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds a token to every request of an MCP client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// mcpConnect connects the SDK's client to serve --mcp with token.
func mcpConnect(t *testing.T, addr, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "shedfs-test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{
		Endpoint:   "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}, Timeout: 30 * time.Second},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// mcpCall calls a tool and returns its structured answer or its typed
// error.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, map[string]any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, nil, err
	}
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if res.IsError {
		var e struct {
			Error map[string]any `json:"error"`
		}
		if err := json.Unmarshal([]byte(text), &e); err != nil || e.Error == nil {
			t.Fatalf("%s: not a typed error: %q", name, text)
		}
		return nil, e.Error, nil
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	return out, nil, nil
}

// TestMCPOverHTTP drives serve --mcp with the SDK's own client and real
// tokens: a change made through a tool is in the user's FUSE view at once;
// tokens that are wrong, revoked, read-only, for another door or outside
// their root are refused.
func TestMCPOverHTTP(t *testing.T) {
	store := newStore(t)
	for _, u := range []string{"alice", "bob"} {
		adminOK(t, "user", "add", u, "--store", store)
	}
	addr := freeAddr(t)
	s := startServeWith(t, store, []string{"--mcp", addr}, "alice", "bob")
	token := func(args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, append([]string{"token", "create", "--store", store}, args...)...)
		if code != 0 {
			t.Fatalf("token create %v: exit %d: %s", args, code, errOut)
		}
		return strings.TrimSpace(out)
	}
	full := token("--user", "alice", "--door", "mcp", "--reason", "integration test")
	cs, err := mcpConnect(t, addr, full)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, s.Stderr())
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) < 5 {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	if _, e, err := mcpCall(t, cs, "mkdir", map[string]any{"path": "output/from-mcp/deep", "parents": true}); err != nil || e != nil {
		t.Fatalf("mkdir: %v %v", e, err)
	}
	// The view's kernel sees it at once.
	if st, err := os.Stat(s.In("alice", "output", "from-mcp", "deep")); err != nil || !st.IsDir() {
		t.Fatalf("not in alice's view: %v", err)
	}
	if err := os.Mkdir(s.In("alice", "output", "from-view"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, e, err := mcpCall(t, cs, "list", map[string]any{"path": "output"})
	if err != nil || e != nil || len(out["entries"].([]any)) != 2 {
		t.Fatalf("list: %v %v %v", out, e, err)
	}
	if _, e, _ := mcpCall(t, cs, "stat", map[string]any{"path": "../etc/passwd"}); e == nil || e["code"] != "PATH_ESCAPE" {
		t.Fatalf("../etc/passwd: %v", e)
	}
	// bob's view has none of it.
	if _, err := os.Stat(s.In("bob", "output", "from-mcp")); !os.IsNotExist(err) {
		t.Fatalf("in bob's view: %v", err)
	}

	// Tokens refused.
	if _, err := mcpConnect(t, addr, full[:len(full)-3]+"aaa"); err == nil {
		t.Error("a wrong secret connected")
	}
	if _, err := mcpConnect(t, addr, "nonsense"); err == nil {
		t.Error("a malformed token connected")
	}
	if _, err := mcpConnect(t, addr, token("--user", "alice", "--door", "api")); err == nil {
		t.Error("a token of another door connected")
	}
	ro, err := mcpConnect(t, addr, token("--user", "alice", "--access", "read,list", "--root", "output"))
	if err != nil {
		t.Fatal(err)
	}
	if _, e, _ := mcpCall(t, ro, "mkdir", map[string]any{"path": "output/x"}); e == nil || e["code"] != "PERMISSION_DENIED" || e["rule"] != "token_access" {
		t.Errorf("mkdir with a read-only token: %v", e)
	}
	if _, e, _ := mcpCall(t, ro, "list", map[string]any{"path": ""}); e == nil || e["rule"] != "token_scope" {
		t.Errorf("list outside the token's root: %v", e)
	}
	if _, e, err := mcpCall(t, ro, "list", map[string]any{"path": "output"}); e != nil || err != nil {
		t.Errorf("list within the token's root: %v %v", e, err)
	}
	// A revoked token is refused from its next request on.
	var list []struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(adminOK(t, "token", "list", "--json", "--store", store)), &list); err != nil {
		t.Fatal(err)
	}
	for _, tk := range list {
		if tk.Reason == "integration test" {
			adminOK(t, "token", "revoke", tk.ID, "--store", store)
		}
	}
	if _, _, err := mcpCall(t, cs, "stat", map[string]any{"path": "output"}); err == nil {
		t.Error("a revoked token still works")
	}
	// The refusals are in the audit trail with the door.
	audit := adminOK(t, "audit", "--denied", "--door", "mcp", "--json", "--store", store)
	if !strings.Contains(audit, `"door":"mcp"`) || !strings.Contains(audit, "token_access") || !strings.Contains(audit, `"token":"`) {
		t.Errorf("the audit trail has no mcp refusal with its token:\n%s", audit)
	}
	if !strings.Contains(adminOK(t, "audit", "--door", "mcp", "--json", "--store", store), `"token_reason":"integration test"`) {
		t.Errorf("the audit trail does not say why the token was made")
	}
}

// mcpStdio starts `shedfs mcp` as a desktop client would, with the SDK's
// command transport.
func mcpStdio(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "shedfs-test", Version: "1"}, nil)
	cmd := exec.Command(shedfsBin, append([]string{"mcp"}, args...)...)
	cmd.Env = childEnv(nil)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("shedfs mcp %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestMCPStdio runs `shedfs mcp` on stdio without a daemon (it opens the
// store) and with one (it speaks through the daemon, so the user's
// mounted view sees a change at once), and the MCP Inspector's CLI lists
// its tools.
func TestMCPStdio(t *testing.T) {
	store := newStore(t)
	adminOK(t, "user", "add", "alice", "--store", store)
	alone := mcpStdio(t, "--store", store, "--user", "alice")
	if _, e, err := mcpCall(t, alone, "mkdir", map[string]any{"path": "output/alone"}); err != nil || e != nil {
		t.Fatalf("mkdir without a daemon: %v %v", e, err)
	}
	if _, e, _ := mcpCall(t, alone, "mkdir", map[string]any{"path": "uploads/x"}); e == nil || e["rule"] != "uploads_readonly" {
		t.Fatalf("mkdir in uploads: %v", e)
	}
	alone.Close()

	s := startServe(t, store, "alice")
	if _, err := os.Stat(s.In("alice", "output", "alone")); err != nil {
		t.Fatalf("what the daemon-less server made: %v", err)
	}
	cs := mcpStdio(t, "--store", store, "--user", "alice")
	if _, e, err := mcpCall(t, cs, "mkdir", map[string]any{"path": "output/through-daemon"}); err != nil || e != nil {
		t.Fatalf("mkdir through the daemon: %v %v", e, err)
	}
	if _, err := os.Stat(s.In("alice", "output", "through-daemon")); err != nil {
		t.Fatalf("not in the view at once: %v", err)
	}
	if _, e, _ := mcpCall(t, cs, "stat", map[string]any{"path": "/etc/passwd"}); e == nil || e["code"] != "PATH_ESCAPE" {
		t.Fatalf("/etc/passwd: %v", e)
	}
	audit := adminOK(t, "audit", "--door", "mcp", "--json", "--store", store)
	if !strings.Contains(audit, "through-daemon") {
		t.Errorf("the change is not in the audit trail with door mcp:\n%s", audit)
	}

	// The MCP Inspector's CLI (npm @modelcontextprotocol/inspector@0.16.8,
	// installed by .ci/run) lists the tools and calls one.
	insp, err := exec.LookPath("mcp-inspector")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("mcp-inspector is not installed (.ci/run installs @modelcontextprotocol/inspector@0.16.8 with npm)")
		}
		t.Skip("mcp-inspector not installed: npm install -g @modelcontextprotocol/inspector@0.16.8")
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(insp, append([]string{"--cli", shedfsBin, "mcp", "--store", store, "--user", "alice", "--"}, args...)...)
		cmd.Env = childEnv(nil)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mcp-inspector %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("--method", "tools/list"); !strings.Contains(out, `"name": "list"`) || !strings.Contains(out, `"name": "mkdir"`) {
		t.Errorf("tools/list through the inspector:\n%s", out)
	}
	if out := run("--method", "tools/call", "--tool-name", "stat", "--tool-arg", "path=output"); !strings.Contains(out, `directory`) {
		t.Errorf("tools/call stat through the inspector:\n%s", out)
	}
}

// TestMCPContentAndEditLocks: what a tool writes, a view reads at once and
// the other way round; an edit lock taken through MCP makes a view's
// append fail with EACCES and another holder's tool call FILE_LOCKED,
// the holder's lock_save succeeds, and expiry releases a lock.
func TestMCPContentAndEditLocks(t *testing.T) {
	store := newStore(t)
	for _, u := range []string{"alice", "bob"} {
		adminOK(t, "user", "add", u, "--store", store)
	}
	adminOK(t, "group", "add", "team", "--store", store)
	adminOK(t, "group", "add-member", "team", "alice", "--store", store)
	adminOK(t, "group", "add-member", "team", "bob", "--store", store)
	addr := freeAddr(t)
	s := startServeWith(t, store, []string{"--mcp", addr}, "alice", "bob")
	token := func(user string) string {
		out, errOut, code := runCLI(t, "token", "create", "--user", user, "--store", store)
		if code != 0 {
			t.Fatalf("token create: %s", errOut)
		}
		return strings.TrimSpace(out)
	}
	a, err := mcpConnect(t, addr, token("alice"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := mcpConnect(t, addr, token("bob"))
	if err != nil {
		t.Fatal(err)
	}
	ok := func(cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
		t.Helper()
		out, e, err := mcpCall(t, cs, tool, args)
		if err != nil || e != nil {
			t.Fatalf("%s %v: %v %v", tool, args, e, err)
		}
		return out
	}
	plan := "groups/team/plan.md"
	ok(a, "write", map[string]any{"path": plan, "text": "step 1\n"})
	if got := string(mustRead(t, s.In("bob", "groups", "team", "plan.md"))); got != "step 1\n" {
		t.Fatalf("bob's view reads %q", got)
	}
	appendTo := func(user string) error {
		f, err := os.OpenFile(s.In(user, "groups", "team", "plan.md"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.Write([]byte("from " + user + "'s view\n"))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err := appendTo("bob"); err != nil {
		t.Fatal(err)
	}
	if out := ok(a, "read", map[string]any{"path": plan}); out["text"] != "step 1\nfrom bob's view\n" {
		t.Fatalf("alice's tool reads %v", out["text"])
	}

	lock := ok(a, "lock_open", map[string]any{"path": plan, "minutes": 1})
	if lock["text"] != "step 1\nfrom bob's view\n" || lock["sha256"] == "" {
		t.Fatalf("lock_open: %v", lock)
	}
	if err := appendTo("bob"); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("bob's view appends to a locked file: %v", err)
	}
	if _, e, _ := mcpCall(t, b, "write", map[string]any{"path": plan, "text": "x", "mode": "append"}); e == nil || e["code"] != "FILE_LOCKED" {
		t.Fatalf("bob's tool writes a locked file: %v", e)
	}
	if err := os.Remove(s.In("bob", "groups", "team", "plan.md")); err == nil {
		t.Fatal("bob's view deleted a locked file")
	}
	ok(a, "lock_save", map[string]any{"path": plan, "text": "step 1\nstep 2\n"})
	if got := string(mustRead(t, s.In("bob", "groups", "team", "plan.md"))); got != "step 1\nstep 2\n" {
		t.Fatalf("after lock_save bob's view reads %q", got)
	}
	if err := appendTo("bob"); err != nil {
		t.Fatalf("after lock_save: %v", err)
	}
	// The refusal is in the trail as edit_locked, from the fuse door.
	audit := adminOK(t, "audit", "--denied", "--door", "fuse", "--json", "--store", store)
	if !strings.Contains(audit, "edit_locked") {
		t.Errorf("no edit_locked refusal of the view in the trail:\n%s", audit)
	}
	adminOK(t, "lock", "list", "--store", store)
}
