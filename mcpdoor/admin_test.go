package mcpdoor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/web"
)

// adminServer is a server on a store of the daemon's, with its admin
// operations (daemon.Local on the same core) and a link service.
func adminServer(t *testing.T, who func(context.Context, *mcp.CallToolRequest) (Principal, error)) (*Server, *daemon.Local) {
	t.Helper()
	dir := t.TempDir()
	st, err := daemon.Open(daemon.Location{Dir: dir}, daemon.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	core := daemon.NewCore(st, nil, nil)
	l := daemon.NewLocalOn(st, core, nil)
	ctx := context.Background()
	for _, u := range []string{"alice", "bob"} {
		if _, err := l.AddUser(ctx, daemon.UserAddRequest{Name: u}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AddGroup(ctx, daemon.GroupAddRequest{Name: "team"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AddMember(ctx, "team", daemon.MemberRequest{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	svc, err := web.New(web.Options{Core: core, Dir: st.Location().StateDir(), PublicURL: "https://files.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	l.UseLinks(svc)
	return New(Options{Core: core, Who: who, Admin: l}), l
}

// TestAdminTools calls quota, groups, the trash, restore, links and
// save_result_page through the SDK's client, as the token's user, and a
// token's grant refusing them.
func TestAdminTools(t *testing.T) {
	s, l := adminServer(t, asAlice)
	cs := connect(t, s)
	ctx := context.Background()
	out, e := call(t, cs, "quota", nil)
	if e != nil || out["user"].(map[string]any)["holder"] != "user:alice" || len(out["groups"].([]any)) != 1 {
		t.Fatalf("quota: %v %v", out, e)
	}
	out, e = call(t, cs, "groups", nil)
	if e != nil || out["groups"].([]any)[0].(map[string]any)["name"] != "team" {
		t.Fatalf("groups: %v %v", out, e)
	}
	if _, e := call(t, cs, "write", map[string]any{"path": "output/r.txt", "text": "v1"}); e != nil {
		t.Fatal(e)
	}
	before := time.Now()
	time.Sleep(20 * time.Millisecond)
	if _, e := call(t, cs, "write", map[string]any{"path": "output/r.txt", "text": "v2"}); e != nil {
		t.Fatal(e)
	}
	if _, e := call(t, cs, "delete", map[string]any{"path": "output/r.txt"}); e != nil {
		t.Fatal(e)
	}
	out, e = call(t, cs, "trash_list", map[string]any{"path": "output"})
	if e != nil || len(out["entries"].([]any)) != 2 {
		t.Fatalf("trash_list: %v %v", out, e)
	}
	newest := out["entries"].([]any)[0].(map[string]any)["entry"].(string)
	if out, e := call(t, cs, "trash_restore", map[string]any{"entries": []string{newest}}); e != nil || len(out["restored"].([]any)) != 1 {
		t.Fatalf("trash_restore: %v %v", out, e)
	}
	if out, e := call(t, cs, "read", map[string]any{"path": "output/r.txt"}); e != nil || out["text"] != "v2" {
		t.Fatalf("after trash_restore: %v %v", out, e)
	}
	if _, e := call(t, cs, "trash_restore", map[string]any{"entries": []string{"trash/nope"}}); e == nil || e["code"] != "NOT_FOUND" {
		t.Fatalf("restore a missing entry: %v", e)
	}
	if out, e := call(t, cs, "restore_at", map[string]any{"path": "output/r.txt", "at": before.UTC().Format(time.RFC3339Nano)}); e != nil {
		t.Fatalf("restore_at: %v %v", out, e)
	}
	if out, e := call(t, cs, "read", map[string]any{"path": "output/r.txt"}); e != nil || out["text"] != "v1" {
		t.Fatalf("after restore_at: %v %v", out, e)
	}
	out, e = call(t, cs, "links_create", map[string]any{"path": "output/r.txt", "ttl": "1h"})
	if e != nil || !strings.HasPrefix(out["markdown"].(string), "[r.txt](https://files.example.org/") {
		t.Fatalf("links_create: %v %v", out, e)
	}
	id := out["id"].(string)
	if out, e := call(t, cs, "links_list", nil); e != nil || len(out["links"].([]any)) != 1 {
		t.Fatalf("links_list: %v %v", out, e)
	}
	if _, e := call(t, cs, "links_create", map[string]any{"path": "../x"}); e == nil || e["code"] != "PATH_ESCAPE" {
		t.Fatalf("a link outside: %v", e)
	}
	// Only one's own links: bob's is not alice's to delete.
	if _, err := l.AddMember(ctx, "team", daemon.MemberRequest{User: "bob"}); err != nil {
		t.Fatal(err)
	}
	bobs, err := l.CreateLink(ctx, daemon.LinkCreateRequest{User: "bob", Path: "groups/team"})
	if err != nil {
		t.Fatal(err)
	}
	if _, e := call(t, cs, "links_delete", map[string]any{"id": bobs.ID}); e == nil || e["code"] != "NOT_FOUND" {
		t.Fatalf("delete another's link: %v", e)
	}
	if _, e := call(t, cs, "links_delete", map[string]any{"id": id}); e != nil {
		t.Fatalf("links_delete: %v", e)
	}
	out, e = call(t, cs, "save_result_page", map[string]any{"title": "Q3 Results!", "content": "All **good**."})
	if e != nil || out["path"] != "output/q3-results.md" || out["content"] != "# Q3 Results!\n\nAll **good**." || !strings.HasPrefix(out["markdown"].(string), "[Q3 Results!](https://files.example.org/") {
		t.Fatalf("save_result_page: %v %v", out, e)
	}
	if out, e := call(t, cs, "save_result_page", map[string]any{"title": "Q3 Results!", "content": "<p>x</p>", "format": "html"}); e != nil || out["path"] != "output/q3-results.html" || out["content"] != nil {
		t.Fatalf("save_result_page html: %v %v", out, e)
	}
	if out, e := call(t, cs, "save_result_page", map[string]any{"title": "Q3 Results!", "content": "again"}); e != nil || out["path"] != "output/q3-results-2.md" {
		t.Fatalf("save_result_page again: %v %v", out, e)
	}

	// A read-only token may list, not restore nor link.
	ro, _ := adminServer(t, func(context.Context, *mcp.CallToolRequest) (Principal, error) {
		return Principal{User: "alice", Grant: &acl.Grant{Access: acl.AccessRead | acl.AccessList}}, nil
	})
	rcs := connect(t, ro)
	if _, e := call(t, rcs, "quota", nil); e != nil {
		t.Fatalf("quota with a read-only token: %v", e)
	}
	if _, e := call(t, rcs, "restore_at", map[string]any{"path": "output", "at": before.UTC().Format(time.RFC3339)}); e == nil || e["code"] != "PERMISSION_DENIED" || e["rule"] != "token_access" {
		t.Fatalf("restore_at with a read-only token: %v", e)
	}
	if _, e := call(t, rcs, "links_create", map[string]any{"path": "output"}); e == nil || e["code"] != "PERMISSION_DENIED" {
		t.Fatalf("links_create with a read-only token: %v", e)
	}
	// Without the admin operations, only save_result_page of them is
	// offered.
	tools, err := connect(t, New(Options{Core: newCore(t), Who: asAlice})).ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == "quota" || tl.Name == "links_create" {
			t.Errorf("%s offered without the admin operations", tl.Name)
		}
	}
}
