package mcpdoor

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shedfs/shedfs/agentfs"
	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/vfs"
)

// connect serves s in memory and returns a client session of the SDK's
// own client.
func connect(t *testing.T, s *Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func newCore(t *testing.T) *vfs.Core {
	t.Helper()
	dir := t.TempDir()
	st, err := metadata.Open(filepath.Join(dir, "meta"), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := blobs.OpenDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUser("alice"); err != nil {
		t.Fatal(err)
	}
	return vfs.New(st, b, vfs.Options{})
}

func asAlice(ctx context.Context, req *mcp.CallToolRequest) (Principal, error) {
	return Principal{User: "alice"}, nil
}

// call calls a tool and returns its structured answer, or its error
// object when the tool failed.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
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
			t.Fatalf("%s: an error that is not a typed JSON error: %q", name, text)
		}
		return nil, e.Error
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured answer %s: %v", name, b, err)
	}
	return out, nil
}

func TestTools(t *testing.T) {
	s := New(Options{Core: newCore(t), Who: asAlice})
	cs := connect(t, s)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("tool %s has no description or schema", tl.Name)
		}
	}
	if out, e := call(t, cs, "mkdir", map[string]any{"path": "output/run/1", "parents": true}); e != nil || out["path"] != "output/run/1" {
		t.Fatalf("mkdir: %v %v", out, e)
	}
	out, e := call(t, cs, "list", map[string]any{"path": "output", "depth": 2})
	if e != nil || len(out["entries"].([]any)) != 2 {
		t.Fatalf("list: %v %v", out, e)
	}
	if _, e := call(t, cs, "stat", map[string]any{"path": "../etc/passwd"}); e == nil || e["code"] != "PATH_ESCAPE" {
		t.Fatalf("stat ../etc/passwd: %v", e)
	}
	if _, e := call(t, cs, "mkdir", map[string]any{"path": "uploads/x"}); e == nil || e["code"] != "PERMISSION_DENIED" || e["rule"] != "uploads_readonly" {
		t.Fatalf("mkdir in uploads: %v", e)
	}
	if out, e := call(t, cs, "move", map[string]any{"from": "output/run", "to": "output/done"}); e != nil || out["path"] != "output/done" {
		t.Fatalf("move: %v %v", out, e)
	}
	// Across zones a move is a copy and a delete, and says so.
	if out, e := call(t, cs, "move", map[string]any{"from": "output/done", "to": "done-here"}); e != nil || out["copied_across_zones"] != true || out["path"] != "done-here" {
		t.Fatalf("move across zones: %v %v", out, e)
	}
	if _, e := call(t, cs, "stat", map[string]any{"path": "output/done"}); e == nil || e["code"] != "NOT_FOUND" {
		t.Fatalf("the source of a move across zones is still there: %v", e)
	}
	if out, e := call(t, cs, "move", map[string]any{"from": "done-here", "to": "output/done"}); e != nil || out["copied_across_zones"] != true {
		t.Fatalf("move back: %v %v", out, e)
	}
	if _, e := call(t, cs, "delete", map[string]any{"path": "output/done"}); e == nil || e["code"] != "DIRECTORY_NOT_EMPTY" {
		t.Fatalf("delete a full directory: %v", e)
	}
	if _, e := call(t, cs, "delete", map[string]any{"path": "output/done", "recursive": true}); e != nil {
		t.Fatalf("delete: %v", e)
	}
	if _, e := call(t, cs, "stat", map[string]any{"path": "output/done"}); e == nil || e["code"] != "NOT_FOUND" {
		t.Fatalf("stat a deleted directory: %v", e)
	}
}

// TestSearchTools calls search, grep, file_type, hexdump and
// line_endings through the SDK's client.
func TestSearchTools(t *testing.T) {
	s := New(Options{Core: newCore(t), Who: asAlice})
	cs := connect(t, s)
	if _, e := call(t, cs, "write", map[string]any{"path": "output/a.md", "text": "one\r\nhello there\r\n"}); e != nil {
		t.Fatal(e)
	}
	if out, e := call(t, cs, "search", map[string]any{"pattern": "*.md"}); e != nil || len(out["matches"].([]any)) != 1 || out["matches"].([]any)[0] != "output/a.md" {
		t.Fatalf("search: %v %v", out, e)
	}
	if out, e := call(t, cs, "grep", map[string]any{"pattern": "hello"}); e != nil || out["lines"].([]any)[0] != "output/a.md:2:hello there" {
		t.Fatalf("grep: %v %v", out, e)
	}
	if _, e := call(t, cs, "grep", map[string]any{"pattern": "("}); e == nil || e["code"] != "INVALID_ARGUMENT" {
		t.Fatalf("grep a bad pattern: %v", e)
	}
	if out, e := call(t, cs, "file_type", map[string]any{"path": "output/a.md"}); e != nil || out["mime"] != "text/markdown; charset=utf-8" {
		t.Fatalf("file_type: %v %v", out, e)
	}
	if out, e := call(t, cs, "hexdump", map[string]any{"path": "output/a.md", "length": 4}); e != nil || out["dump"] != "00000000  6f 6e 65 0d                                       |one.|\n" {
		t.Fatalf("hexdump: %q %v", out["dump"], e)
	}
	if out, e := call(t, cs, "line_endings", map[string]any{"path": "output/a.md", "to": "lf"}); e != nil || out["changed"] != float64(2) {
		t.Fatalf("line_endings: %v %v", out, e)
	}
	if out, e := call(t, cs, "read", map[string]any{"path": "output/a.md"}); e != nil || out["text"] != "one\nhello there\n" {
		t.Fatalf("after line_endings: %v %v", out, e)
	}
	if _, e := call(t, cs, "hexdump", map[string]any{"path": "/etc/passwd"}); e == nil || e["code"] != "PATH_ESCAPE" {
		t.Fatalf("hexdump outside: %v", e)
	}
}

// TestApplyPatchTool applies a diff through the SDK's client, and a diff
// one of whose hunks misses changes nothing.
func TestApplyPatchTool(t *testing.T) {
	s := New(Options{Core: newCore(t), Who: asAlice})
	cs := connect(t, s)
	if _, e := call(t, cs, "write", map[string]any{"path": "output/a.txt", "text": "one\ntwo\n"}); e != nil {
		t.Fatal(e)
	}
	out, e := call(t, cs, "apply_patch", map[string]any{"patch": "--- a/output/a.txt\n+++ b/output/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n--- /dev/null\n+++ b/output/b.txt\n@@ -0,0 +1 @@\n+new\n"})
	if e != nil || len(out["files"].([]any)) != 2 {
		t.Fatalf("apply_patch: %v %v", out, e)
	}
	if out, e := call(t, cs, "read", map[string]any{"path": "output/a.txt"}); e != nil || out["text"] != "one\nTWO\n" {
		t.Fatalf("after the patch: %v %v", out, e)
	}
	if _, e := call(t, cs, "apply_patch", map[string]any{"patch": "--- /dev/null\n+++ output/c.txt\n@@ -0,0 +1 @@\n+c\n--- output/a.txt\n+++ output/a.txt\n@@ -1 +1 @@\n-nope\n+x\n"}); e == nil || e["code"] != "CONFLICT" {
		t.Fatalf("a hunk that misses: %v", e)
	}
	if _, e := call(t, cs, "stat", map[string]any{"path": "output/c.txt"}); e == nil || e["code"] != "NOT_FOUND" {
		t.Fatalf("a failed patch wrote: %v", e)
	}
}

// TestArchiveTools packs, lists and unpacks through the SDK's client; an
// archive with a ../ entry is refused, writing nothing.
func TestArchiveTools(t *testing.T) {
	s := New(Options{Core: newCore(t), Who: asAlice})
	cs := connect(t, s)
	if _, e := call(t, cs, "write", map[string]any{"path": "output/a.txt", "text": "a\n"}); e != nil {
		t.Fatal(e)
	}
	if out, e := call(t, cs, "zip", map[string]any{"paths": []string{"output/a.txt"}, "to": "p.zip"}); e != nil || out["entries"] != float64(1) {
		t.Fatalf("zip: %v %v", out, e)
	}
	if out, e := call(t, cs, "zipinfo", map[string]any{"path": "p.zip"}); e != nil || out["count"] != float64(1) {
		t.Fatalf("zipinfo: %v %v", out, e)
	}
	if out, e := call(t, cs, "unzip", map[string]any{"path": "p.zip", "to": "x"}); e != nil || out["files"] != float64(1) {
		t.Fatalf("unzip: %v %v", out, e)
	}
	if out, e := call(t, cs, "read", map[string]any{"path": "x/a.txt"}); e != nil || out["text"] != "a\n" {
		t.Fatalf("unpacked: %v %v", out, e)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("../evil.txt")
	w.Write([]byte("x"))
	zw.Close()
	if _, e := call(t, cs, "write", map[string]any{"path": "evil.zip", "base64": base64.StdEncoding.EncodeToString(buf.Bytes())}); e != nil {
		t.Fatal(e)
	}
	if _, e := call(t, cs, "unzip", map[string]any{"path": "evil.zip", "to": "y"}); e == nil || e["code"] != "PATH_ESCAPE" || e["rule"] != "archive_escape" {
		t.Fatalf("unzip ../: %v", e)
	}
	if _, e := call(t, cs, "stat", map[string]any{"path": "y"}); e == nil || e["code"] != "NOT_FOUND" {
		t.Fatalf("a refused unzip wrote: %v", e)
	}
}

// TestMetrics counts tool calls by door, tool and outcome.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := agentfs.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, New(Options{Core: newCore(t), Who: asAlice, Metrics: m}))
	call(t, cs, "stat", map[string]any{"path": "output"})
	call(t, cs, "stat", map[string]any{"path": "../x"})
	call(t, cs, "stat", map[string]any{"path": "nope"})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	durations := 0
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "shedfs_agent_calls_total":
				got[labels["door"]+"/"+labels["tool"]+"/"+labels["outcome"]] = m.GetCounter().GetValue()
			case "shedfs_agent_call_duration_seconds":
				durations += int(m.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{"mcp/stat/ok": 1, "mcp/stat/PATH_ESCAPE": 1, "mcp/stat/NOT_FOUND": 1}
	if len(got) != len(want) || durations != 3 {
		t.Fatalf("calls %v, %d durations", got, durations)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
}

// TestEditingTools calls, through the SDK's client, the editing tools
// and the ownership tools, two users on one core.
func TestEditingTools(t *testing.T) {
	core := newCore(t)
	st := core.Store()
	if _, err := st.AddUser("bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddGroup("team"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if err := st.AddMember("team", u); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string) *mcp.ClientSession {
		return connect(t, New(Options{Core: core, Who: func(context.Context, *mcp.CallToolRequest) (Principal, error) {
			return Principal{User: user}, nil
		}}))
	}
	a, b := as("alice"), as("bob")
	ok := func(cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
		t.Helper()
		out, e := call(t, cs, tool, args)
		if e != nil {
			t.Fatalf("%s %v: %v", tool, args, e)
		}
		return out
	}
	plan := "groups/team/plan.md"
	ok(a, "write", map[string]any{"path": plan, "text": "one\nthree\n"})
	ok(a, "insert", map[string]any{"path": plan, "line": 2, "text": "two"})
	if out := ok(a, "replace", map[string]any{"path": plan, "old": "three", "new": "THREE"}); out["replaced"] != float64(1) {
		t.Fatalf("replace: %v", out)
	}
	if _, e := call(t, a, "replace", map[string]any{"path": plan, "old": "four", "new": "x"}); e == nil || e["code"] != "INVALID_ARGUMENT" {
		t.Fatalf("replace what is not there: %v", e)
	}
	ok(a, "copy", map[string]any{"from": plan, "to": "plan-copy.md"})
	if out := ok(a, "read", map[string]any{"path": "plan-copy.md"}); out["text"] != "one\ntwo\nTHREE\n" {
		t.Fatalf("the copy reads %v", out["text"])
	}
	// bob locks; alice, the owner, forces it open; bob's cancel then
	// finds no lock of his.
	ok(b, "lock_open", map[string]any{"path": plan})
	if _, e := call(t, a, "write", map[string]any{"path": plan, "text": "x"}); e == nil || e["code"] != "FILE_LOCKED" {
		t.Fatalf("alice writes bob's locked file: %v", e)
	}
	if _, e := call(t, b, "force_unlock", map[string]any{"path": "plan-copy.md"}); e == nil {
		t.Fatal("force_unlock of a file without a lock")
	}
	ok(a, "force_unlock", map[string]any{"path": plan})
	if _, e := call(t, b, "lock_cancel", map[string]any{"path": plan}); e == nil || e["code"] != "CONFLICT" {
		t.Fatalf("cancel of a lock forced open: %v", e)
	}
	ok(b, "lock_open", map[string]any{"path": plan})
	ok(b, "lock_cancel", map[string]any{"path": plan})
	ok(a, "write", map[string]any{"path": plan, "text": "after\n"})
	// Ownership: only the owner sets the mode; chown to a member.
	if out := ok(a, "set_mode", map[string]any{"path": plan, "mode": "owner"}); out["ownership"] != "owner" {
		t.Fatalf("set_mode: %v", out)
	}
	if _, e := call(t, b, "set_mode", map[string]any{"path": plan, "mode": "group"}); e == nil || e["code"] != "PERMISSION_DENIED" {
		t.Fatalf("bob sets the mode of alice's file: %v", e)
	}
	if _, e := call(t, b, "write", map[string]any{"path": plan, "text": "x"}); e == nil || e["code"] != "PERMISSION_DENIED" {
		t.Fatalf("bob writes alice's owner-mode file: %v", e)
	}
	if out := ok(a, "chown", map[string]any{"path": plan, "owner": "bob"}); out["owner"] != "bob" {
		t.Fatalf("chown: %v", out)
	}
	ok(b, "write", map[string]any{"path": plan, "text": "bob's now\n"})
}
