package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shedfs/shedfs/daemon"
)

// TestTokenCommands: a token is printed once on stdout (a note on stderr
// says so), listed without its secret, and revoked; bad flags are one
// clear line.
func TestTokenCommands(t *testing.T) {
	store := newStoreDir(t)
	ok(t, "user", "add", "alice", "--store", store)
	fails(t, "no user named bob", "token", "create", "--user", "bob", "--store", store)
	fails(t, "leaves the view root", "token", "create", "--user", "alice", "--root", "../x", "--store", store)
	fails(t, "not one of", "token", "create", "--user", "alice", "--access", "read,exec", "--store", store)
	fails(t, "--ttl", "token", "create", "--user", "alice", "--ttl", "soon", "--store", store)
	fails(t, "door", "token", "create", "--user", "alice", "--door", "fuse", "--store", store)

	out, errOut, code := runCLI(t, "token", "create", "--user", "alice", "--root", "output", "--access", "read,list",
		"--door", "mcp,api", "--ttl", "2d", "--deny", "*.key", "--reason", "nightly report", "--store", store)
	if code != 0 || !strings.HasPrefix(out, "shedfs_") || strings.Count(out, "\n") != 1 {
		t.Fatalf("token create: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "not shown again") {
		t.Errorf("token create does not say the token is shown once: %q", errOut)
	}
	token := strings.TrimSpace(out)
	var list []daemon.TokenInfo
	if err := json.Unmarshal([]byte(ok(t, "token", "list", "--json", "--store", store)), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Root != "/output" || list[0].Access != "read,list" || len(list[0].Doors) != 2 || list[0].Reason != "nightly report" {
		t.Fatalf("token list: %+v", list)
	}
	if !strings.Contains(token, list[0].ID) {
		t.Errorf("the token %q does not carry its id %s", token, list[0].ID)
	}
	table := ok(t, "token", "list", "--store", store)
	checkTable(t, table, 1)
	if strings.Contains(table, token[len("shedfs_")+len(list[0].ID)+1:]) {
		t.Error("token list shows the secret")
	}
	ok(t, "token", "revoke", list[0].ID, "--store", store)
	fails(t, "no token", "token", "revoke", list[0].ID, "--store", store)
	fails(t, "not a token id", "token", "revoke", "x", "--store", store)
	checkTable(t, ok(t, "token", "list", "--store", store), 0)
}

// TestLockCommands: without locks, list is empty and release says so.
func TestLockCommands(t *testing.T) {
	store := newStoreDir(t)
	ok(t, "user", "add", "alice", "--store", store)
	checkTable(t, ok(t, "lock", "list", "--store", store), 0)
	fails(t, "no output/x", "lock", "release", "--user", "alice", "output/x", "--store", store)
	fails(t, "--user", "lock", "release", "output/x", "--store", store)
}

func TestAgentAddr(t *testing.T) {
	for in, want := range map[string]string{
		"8468": "127.0.0.1:8468", ":8468": "127.0.0.1:8468", "127.0.0.1:8468": "127.0.0.1:8468",
		"0.0.0.0:8468": "0.0.0.0:8468", "[::1]:8468": "[::1]:8468",
	} {
		if got, err := agentAddr(in); err != nil || got != want {
			t.Errorf("agentAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"host:", "a:b:c"} {
		if _, err := agentAddr(bad); err == nil {
			t.Errorf("agentAddr(%q) passed", bad)
		}
	}
}
