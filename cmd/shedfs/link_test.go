package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/web"
)

// TestLinkCommandsWithoutDaemon: with no daemon, links can be listed,
// revoked and the key rotated on the store, but none can be made (no
// server would answer it).
func TestLinkCommandsWithoutDaemon(t *testing.T) {
	store := newStoreDir(t)
	ok(t, "user", "add", "alice", "--store", store)
	fails(t, "--http", "link", "create", "--user", "alice", ".", "--store", store)
	fails(t, "between", "link", "create", "--user", "alice", ".", "--ttl", "30d", "--store", store)
	fails(t, "between", "link", "defaults", "--ttl", "8d", "--store", store)
	if out := ok(t, "link", "defaults", "--ttl", "12h", "--store", store); !strings.Contains(out, "12h0m0s") {
		t.Errorf("link defaults: %q", out)
	}

	// Two links, as a daemon would have made them.
	st, err := daemon.OpenStore(store, daemon.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := st.Meta.GetUser("alice")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, id := range []string{"AAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBB"} {
		if err := st.Meta.PutLink(metadata.Link{ID: id, User: "alice", Ino: u.Roots.Output, Created: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Meta.PutLink(metadata.Link{ID: "CCCCCCCCCCCCCCCC", User: "alice", Ino: u.Roots.Output, Created: now.Add(-2 * time.Hour), Expires: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	var ls []web.Info
	if err := json.Unmarshal([]byte(ok(t, "link", "list", "--json", "--store", store)), &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].Path != "output" || ls[0].URL != "" || ls[0].User != "alice" {
		t.Fatalf("link list (the expired one left out): %+v", ls)
	}
	checkTable(t, ok(t, "link", "list", "--user", "alice", "--store", store), 2)
	ok(t, "link", "revoke", "AAAAAAAAAAAAAAAA", "--store", store)
	fails(t, "no link", "link", "revoke", "AAAAAAAAAAAAAAAA", "--store", store)
	fails(t, "not a link id", "link", "revoke", "../x", "--store", store)
	if out := ok(t, "link", "list", "--json", "--store", store); strings.Contains(out, "AAAAAAAAAAAAAAAA") {
		t.Errorf("revoked link still listed: %s", out)
	}
	ok(t, "link", "rotate-key", "--store", store)
	fi, err := os.Stat(filepath.Join(store, web.KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file after rotate-key: %v %v", fi, err)
	}
}
