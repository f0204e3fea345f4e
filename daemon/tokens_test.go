package daemon

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// TestTokens makes, lists, uses and revokes tokens over the admin socket
// as the CLI does, and checks that Authenticate refuses every token it
// must: malformed, unknown, a wrong secret, expired, revoked, for another
// door, of a removed user (even one added again under the same name), of
// a closed session.
func TestTokens(t *testing.T) {
	st := openTestStore(t)
	l := NewLocal(st, nil)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	l.clock = func() time.Time { return now }
	serveTestAdmin(t, st, l)
	c := dialTest(t, st)
	ctx := context.Background()
	for _, name := range []string{"alice", "bob"} {
		if _, err := c.AddUser(ctx, UserAddRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.OpenSession(ctx, SessionOpenRequest{User: "alice", ID: "run1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []TokenCreateRequest{
		{},
		{User: "nobody"},
		{User: "alice", Session: "nosuch"},
		{User: "alice", Root: "../etc"},
		{User: "alice", Root: "/etc"},
		{User: "alice", Access: "read,exec"},
		{User: "alice", Allow: []string{"/abs"}},
		{User: "alice", Deny: []string{"["}},
		{User: "alice", Doors: []string{"fuse"}},
		{User: "alice", TTL: "soon"},
		{User: "alice", TTL: "-1h"},
		{User: "alice", TTL: "9000h"},
		{User: "alice", Reason: "bad\nreason"},
	} {
		if _, err := c.CreateToken(ctx, bad); codeOf(t, err) != CodeInvalid && codeOf(t, err) != CodeNotFound {
			t.Errorf("create %+v: %v, want invalid or not found", bad, err)
		}
	}
	full, err := c.CreateToken(ctx, TokenCreateRequest{User: "alice", Reason: "CI run 42"})
	if err != nil || !strings.HasPrefix(full.Token, "shedfs_"+full.ID+"_") || full.Access != "all" || full.Root != "/" {
		t.Fatalf("create: %+v %v", full, err)
	}
	if !full.Expires.Equal(now.Add(DefaultTokenTTL)) {
		t.Errorf("expires %v, want %v", full.Expires, now.Add(DefaultTokenTTL))
	}
	ro, err := c.CreateToken(ctx, TokenCreateRequest{User: "alice", Root: "./output//reports/", Access: "read,list", Doors: []string{"api"}, TTL: "1h", Deny: []string{"*.key"}})
	if err != nil || ro.Root != "/output/reports" || ro.Access != "read,list" {
		t.Fatalf("create read-only: %+v %v", ro, err)
	}
	sess, err := c.CreateToken(ctx, TokenCreateRequest{User: "alice", Session: "run1"})
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := c.CreateToken(ctx, TokenCreateRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}

	list, err := c.ListTokens(ctx, "alice")
	if err != nil || len(list) != 3 {
		t.Fatalf("list alice: %+v %v", list, err)
	}
	for _, ti := range list {
		if strings.Contains(ti.ID, "_") {
			t.Errorf("list shows more than an id: %+v", ti)
		}
	}
	if all, err := c.ListTokens(ctx, ""); err != nil || len(all) != 4 {
		t.Fatalf("list: %+v %v", all, err)
	}

	b, err := l.Authenticate(full.Token, "mcp")
	if err != nil || b.User != "alice" || b.Session != "" || b.Grant.Access != acl.AccessAll || b.Reason != "CI run 42" || b.TokenID != full.ID {
		t.Fatalf("authenticate: %+v %v", b, err)
	}
	b, err = l.Authenticate(ro.Token, "api")
	if err != nil || b.Grant.Root != "output/reports" || b.Grant.Access != acl.AccessRead|acl.AccessList || len(b.Grant.Deny) != 1 {
		t.Fatalf("authenticate read-only: %+v %v", b, err)
	}
	if b, err := l.Authenticate(sess.Token, "api"); err != nil || b.Session != "run1" {
		t.Fatalf("authenticate session token: %+v %v", b, err)
	}
	refused := func(what, token, door string) {
		t.Helper()
		if b, err := l.Authenticate(token, door); err == nil || codeOf(t, err) != CodeUnauthorized {
			t.Errorf("%s: %+v %v, want unauthorized", what, b, err)
		}
	}
	refused("empty", "", "mcp")
	refused("malformed", "Bearer "+full.Token, "mcp")
	refused("wrong secret", full.Token[:len(full.Token)-4]+"aaaa", "mcp")
	refused("unknown id", strings.Replace(full.Token, full.ID, strings.Repeat("a", len(full.ID)), 1), "mcp")
	refused("another door", ro.Token, "mcp")

	now = now.Add(2 * time.Hour)
	refused("expired", ro.Token, "api")
	if list, _ := c.ListTokens(ctx, "alice"); !expiredIn(list, ro.ID) {
		t.Errorf("list does not mark the expired token: %+v", list)
	}
	if err := c.RevokeToken(ctx, full.ID); err != nil {
		t.Fatal(err)
	}
	refused("revoked", full.Token, "mcp")
	if err := c.RevokeToken(ctx, full.ID); codeOf(t, err) != CodeNotFound {
		t.Errorf("revoke twice: %v", err)
	}
	if err := c.RevokeToken(ctx, "../x"); codeOf(t, err) != CodeInvalid {
		t.Errorf("revoke a bad id: %v", err)
	}
	if _, err := c.CloseSession(ctx, SessionCloseRequest{User: "alice", ID: "run1"}); err != nil {
		t.Fatal(err)
	}
	refused("closed session", sess.Token, "api")

	// A token of a removed user opens nothing for a new user of that name.
	if _, err := st.Meta.RemoveUser("bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddUser(ctx, UserAddRequest{Name: "bob"}); err != nil {
		t.Fatal(err)
	}
	refused("removed user, added again", bobs.Token, "mcp")
	// Removing a user through the admin API deletes its tokens.
	if _, err := c.CreateToken(ctx, TokenCreateRequest{User: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RemoveUser(ctx, "bob", true); err != nil {
		t.Fatal(err)
	}
	if left, err := c.ListTokens(ctx, "bob"); err != nil || len(left) != 0 {
		t.Errorf("tokens of a removed user: %+v %v", left, err)
	}
}

func expiredIn(list []TokenInfo, id string) bool {
	for _, t := range list {
		if t.ID == id {
			return t.Expired
		}
	}
	return false
}

// eventLog keeps the events a core records, for tests.
type eventLog struct {
	mu     sync.Mutex
	events []shedfs.Event
}

func (r *eventLog) Record(e shedfs.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// TestAuthenticateAudited checks that every refused bearer token leaves
// one audit event (op authenticate, rule token_invalid, EACCES) with the
// door and, where the token's record was found, its id and user, and that
// an accepted token leaves none.
func TestAuthenticateAudited(t *testing.T) {
	st := openTestStore(t)
	rec := &eventLog{}
	l := NewLocalOn(st, NewCore(st, rec, nil), nil)
	ctx := context.Background()
	if _, err := l.AddUser(ctx, UserAddRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	tok, err := l.CreateToken(ctx, TokenCreateRequest{User: "alice", Doors: []string{"api"}})
	if err != nil {
		t.Fatal(err)
	}
	unknown := strings.Replace(tok.Token, tok.ID, strings.Repeat("a", len(tok.ID)), 1)
	cases := []struct {
		name, token, door string
		user, id          string
	}{
		{"malformed", "not-a-token", "api", shedfs.NoUser, ""},
		{"unknown id", unknown, "mcp", shedfs.NoUser, strings.Repeat("a", len(tok.ID))},
		{"wrong secret", tok.Token[:len(tok.Token)-4] + "aaaa", "api", "alice", tok.ID},
		{"another door", tok.Token, "mcp", "alice", tok.ID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec.mu.Lock()
			rec.events = nil
			rec.mu.Unlock()
			if _, err := l.Authenticate(c.token, c.door); codeOf(t, err) != CodeUnauthorized {
				t.Fatalf("authenticate: %v, want unauthorized", err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.events) != 1 {
				t.Fatalf("events %+v, want one", rec.events)
			}
			e := rec.events[0]
			if e.Op != OpAuthenticate || e.Errno != syscall.EACCES || e.Reason != acl.ReasonTokenInvalid || e.Door != c.door || e.User != c.user || e.Token != c.id {
				t.Errorf("event %+v, want op %s EACCES %s door %s user %s token %q", e, OpAuthenticate, acl.ReasonTokenInvalid, c.door, c.user, c.id)
			}
		})
	}
	rec.mu.Lock()
	rec.events = nil
	rec.mu.Unlock()
	if _, err := l.Authenticate(tok.Token, "api"); err != nil {
		t.Fatal(err)
	}
	if len(rec.events) != 0 {
		t.Errorf("an accepted token was audited: %+v", rec.events)
	}
}
