package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shedfs/shedfs/daemon"
)

func TestQuotaDefaults(t *testing.T) {
	s := newStoreDir(t)
	ok(t, "user", "add", "old", "--store", s)
	out := ok(t, "quota", "defaults", "--store", s)
	checkTable(t, out, 3)
	for _, want := range []string{"new user none none", "new group none none", "max file size none -"} {
		if !hasRow(out, want) {
			t.Errorf("quota defaults of a new store does not say %q:\n%s", want, out)
		}
	}
	out = ok(t, "quota", "defaults", "--store", s, "--user-bytes", "10GiB", "--user-inodes", "100000", "--max-file-size", "5GiB")
	checkTable(t, out, 3)
	for _, want := range []string{"new user 10 GiB 100000", "max file size 5 GiB -"} {
		if !hasRow(out, want) {
			t.Errorf("quota defaults after set does not say %q:\n%s", want, out)
		}
	}
	ok(t, "quota", "defaults", "--store", s, "--group-bytes", "1G", "--group-inodes", "500", "--user-inodes", "none")
	var got daemon.Settings
	if err := json.Unmarshal([]byte(ok(t, "quota", "defaults", "--json", "--store", s)), &got); err != nil {
		t.Fatal(err)
	}
	want := daemon.Settings{
		DefaultUserLimit:  daemon.Amount{Bytes: 10 << 30},
		DefaultGroupLimit: daemon.Amount{Bytes: 1 << 30, Inodes: 500},
		MaxFileSize:       5 << 30,
	}
	if got != want {
		t.Errorf("quota defaults --json: %+v, want %+v (unspecified fields unchanged)", got, want)
	}
	ok(t, "user", "add", "new", "--store", s)
	var qs []daemon.QuotaInfo
	if err := json.Unmarshal([]byte(ok(t, "quota", "show", "user:new", "--json", "--store", s)), &qs); err != nil ||
		len(qs) != 1 || qs[0].Limit != (daemon.Amount{Bytes: 10 << 30}) {
		t.Errorf("a new user's quota: %+v, %v; want the default", qs, err)
	}
	if err := json.Unmarshal([]byte(ok(t, "quota", "show", "user:old", "--json", "--store", s)), &qs); err != nil ||
		len(qs) != 1 || qs[0].Limit != (daemon.Amount{}) {
		t.Errorf("an existing user's quota: %+v, %v; want it unchanged", qs, err)
	}
	ok(t, "quota", "defaults", "--store", s, "--max-file-size", "0")
	if !hasRow(ok(t, "quota", "defaults", "--store", s), "max file size none -") {
		t.Errorf("--max-file-size 0 did not make it unlimited")
	}
	fails(t, "--max-file-size", "quota", "defaults", "--store", s, "--max-file-size", "lots")
	fails(t, "--user-inodes", "quota", "defaults", "--store", s, "--user-inodes", "1.5")
	fails(t, "--group-bytes", "quota", "defaults", "--store", s, "--group-bytes", "-1")
	fails(t, "no arguments", "quota", "defaults", "extra", "--store", s)
	fails(t, "no store given", "quota", "defaults")
}

// TestQuotaDefaultsBothWays runs the same commands against a store opened
// directly and one served over the admin socket: same output, same errors.
func TestQuotaDefaultsBothWays(t *testing.T) {
	direct := newStoreDir(t)
	served := newStoreDir(t)
	ok(t, "user", "add", "x", "--store", direct)
	st, err := daemon.OpenStore(served, daemon.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := daemon.Listen(daemon.SocketPath(served), daemon.NewLocal(st, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	for _, args := range [][]string{
		{"quota", "defaults"},
		{"quota", "defaults", "--user-bytes", "1GiB", "--max-file-size", "100M"},
		{"quota", "defaults", "--group-inodes", "7"},
		{"quota", "defaults", "--json"},
		{"quota", "defaults", "--max-file-size", "x"},
	} {
		o1, e1, c1 := runCLI(t, append(args, "--store", direct)...)
		o2, e2, c2 := runCLI(t, append(args, "--store", served)...)
		if o1 != o2 || e1 != e2 || c1 != c2 {
			t.Errorf("shedfs %s differs:\ndirect: exit %d\n%s%s\nserved: exit %d\n%s%s", strings.Join(args, " "), c1, o1, e1, c2, o2, e2)
		}
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	fails(t, "locked", "quota", "defaults", "--store", served)
}

// hasRow reports whether a table has a row reading want, with the
// columns' padding collapsed to one space.
func hasRow(table, want string) bool {
	for _, l := range strings.Split(table, "\n") {
		if strings.Join(strings.Fields(l), " ") == want {
			return true
		}
	}
	return false
}
