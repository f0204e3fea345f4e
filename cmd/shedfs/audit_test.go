package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/metadata"
)

// auditStore makes a store with a small trail: a write, a denial, and an
// overflow record.
func auditStore(t *testing.T) string {
	t.Helper()
	dir := newStoreDir(t)
	st, err := daemon.OpenStore(dir, daemon.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	err = st.Meta.AppendAudit([]metadata.AuditRecord{
		{Time: now.Add(-3 * time.Hour), User: "alice", View: "alice", Zone: "private:alice", Path: "/old.txt", Op: "write", Result: "ok", Bytes: 5},
		{Time: now.Add(-time.Minute), User: "alice", View: "alice", Zone: "private:alice", Path: "/notes.txt", Op: "write", Result: "ok", Bytes: 12},
		{Time: now.Add(-30 * time.Second), User: "bob", View: "bob", Zone: "uploads:bob", Path: "/uploads/in.csv", Op: "write", Result: "EACCES", Rule: "uploads-read-only"},
		{Time: now.Add(-10 * time.Second), User: "-", Op: metadata.OpAuditOverflow, Result: "dropped", Rule: "audit queue full", Dropped: 7},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAuditCommandReadsStore(t *testing.T) {
	store := auditStore(t)

	out := ok(t, "audit", "--store", store)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "TIME") {
		t.Fatalf("table:\n%s", out)
	}
	for _, col := range []string{"USER", "ZONE", "OP", "PATH", "RESULT", "RULE"} {
		if !strings.Contains(lines[0], col) {
			t.Fatalf("header %q lacks %s", lines[0], col)
		}
	}
	// Aligned: every column starts at the same offset on every line.
	at := strings.Index(lines[0], "PATH")
	if !strings.HasPrefix(lines[2][at:], "/notes.txt") || !strings.HasPrefix(lines[3][at:], "/uploads/in.csv") {
		t.Fatalf("columns not aligned:\n%s", out)
	}
	if !strings.Contains(lines[3], "EACCES") || !strings.Contains(lines[3], "uploads-read-only") {
		t.Fatalf("denial row: %q", lines[3])
	}
	if !strings.Contains(lines[4], "audit_overflow") || !strings.Contains(lines[4], "7 events lost") {
		t.Fatalf("overflow row: %q", lines[4])
	}
	// No user did it: a plain "-" as for any empty cell, not a quoted
	// "-" as for a file named "-" (issue 27).
	if user := strings.Fields(lines[4][strings.Index(lines[0], "USER"):])[0]; user != "-" {
		t.Errorf("overflow row's user column: %q, want -", user)
	}

	denied := ok(t, "audit", "--store", store, "--denied", "--json")
	var rec metadata.AuditRecord
	if err := json.Unmarshal([]byte(denied), &rec); err != nil || strings.Count(denied, "\n") != 1 {
		t.Fatalf("--denied --json: %q (%v)", denied, err)
	}
	if rec.User != "bob" || rec.Zone != "uploads:bob" || rec.Rule != "uploads-read-only" || rec.Result != "EACCES" {
		t.Fatalf("denial: %+v", rec)
	}

	count := func(args ...string) int {
		t.Helper()
		out := ok(t, append([]string{"audit", "--store", store, "--json"}, args...)...)
		return strings.Count(out, "\n")
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 4},
		{[]string{"--user", "alice"}, 2},
		{[]string{"--since", "1h"}, 3},
		{[]string{"--since", "1h", "--user", "alice"}, 1},
		{[]string{"--zone", "uploads"}, 1},
		{[]string{"--zone", "private:alice"}, 2},
		{[]string{"--op", "audit_overflow"}, 1},
		{[]string{"--limit", "2"}, 2},
		{[]string{"--since", "1d"}, 4},
		{[]string{"--user", "carol"}, 0},
	} {
		if got := count(tc.args...); got != tc.want {
			t.Errorf("audit %s: %d records, want %d", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	// An empty answer prints its header, so that it reads as "nothing
	// matched" (issue 27); --json prints nothing.
	if got := ok(t, "audit", "--store", store, "--user", "carol"); strings.TrimSpace(got) != "TIME  USER  ZONE  OP  PATH  RESULT  RULE" {
		t.Errorf("empty answer printed %q, want the header alone", got)
	}
	if got := ok(t, "audit", "--store", store, "--user", "carol", "--json"); got != "" {
		t.Errorf("empty --json answer printed %q", got)
	}
}

func TestAuditCommandBadFlags(t *testing.T) {
	store := auditStore(t)
	fails(t, "--since", "audit", "--store", store, "--since", "garbage")
	fails(t, "--since", "audit", "--store", store, "--since", "-1h")
	fails(t, "--zone", "audit", "--store", store, "--zone", "nowhere")
	fails(t, "--limit", "audit", "--store", store, "--limit", "-3")
	fails(t, "--user", "audit", "--store", store, "--user", "Bad Name")
	fails(t, "takes no arguments", "audit", "--store", store, "extra")
	fails(t, "does not exist", "audit", "--store", filepath.Join(t.TempDir(), "nope"))
	fails(t, "no store", "audit")
}

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAuditFollowThroughDaemon(t *testing.T) {
	store := auditStore(t)
	st, err := daemon.OpenStore(store, daemon.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := daemon.Listen(daemon.SocketPath(store), daemon.NewLocal(st, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	// The daemon holds the store: this can only work through the API.
	if got := strings.Count(ok(t, "audit", "--store", store, "--json"), "\n"); got != 4 {
		t.Fatalf("through the daemon: %d records, want 4", got)
	}

	var stdout, stderr syncBuffer
	app := newApp(&stdout, &stderr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(ctx, []string{"shedfs", "audit", "--store", store, "--follow", "--denied", "--json"})
	}()
	waitFor := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond(stdout.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; output so far:\n%s\nstderr:\n%s", what, stdout.String(), stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the existing denial", func(s string) bool { return strings.Contains(s, "/uploads/in.csv") })

	// New records arrive while following; one is stamped a little in the
	// past, as a batch written late would be.
	err = st.Meta.AppendAudit([]metadata.AuditRecord{
		{Time: time.Now(), User: "alice", Zone: "share", Path: "/share/ok.txt", Op: "write", Result: "ok"},
		{Time: time.Now().Add(-time.Second), User: "alice", Zone: "share", Path: "/share/locked.txt", Op: "unlink", Result: "EPERM", Rule: "owner-only"},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the new denial", func(s string) bool { return strings.Contains(s, "/share/locked.txt") })
	time.Sleep(2 * followEvery) // a few more polls: nothing printed twice
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follow ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not stop when interrupted")
	}
	out := stdout.String()
	if strings.Count(out, "\n") != 2 || strings.Contains(out, "ok.txt") {
		t.Fatalf("follow printed:\n%s", out)
	}
}

func TestAuditSettings(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "12h": 12 * time.Hour, "0": 0, "1.5d": 36 * time.Hour} {
		if got, err := parseAge(in); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "soon", "-1h", "d", "-2d"} {
		if _, err := parseAge(bad); err == nil {
			t.Errorf("parseAge(%q) accepted", bad)
		}
	}

	store := auditStore(t)
	start := func(args ...string) error {
		app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
		app.Commands = []*cli.Command{{
			Name:  "try",
			Flags: auditFlags(),
			Action: func(c *cli.Context) error {
				st, err := daemon.OpenStore(store, daemon.OpenOptions{})
				if err != nil {
					return err
				}
				defer st.Close()
				rec, err := startAudit(c, st, nil)
				if err != nil {
					return err
				}
				if rec != nil {
					return rec.Close()
				}
				return nil
			},
		}}
		return app.Run(append([]string{"shedfs", "try"}, args...))
	}
	for _, args := range [][]string{nil, {"--no-audit"}, {"--audit-max-age", "0", "--audit-max-records", "0"}, {"--audit-queue", "10"}} {
		if err := start(args...); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	for _, args := range [][]string{{"--audit-max-age", "forever"}, {"--audit-max-records", "-1"}, {"--audit-queue", "0"}} {
		if err := start(args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestAuditTableEscapesControls stores records whose user-controlled
// fields hold control characters, a bidi override and invalid UTF-8 (which
// the store keeps as U+FFFD), and
// checks that the table prints each as one row that names them escaped,
// and that JSON lines stay one line per record and round-trip.
func TestAuditTableEscapesControls(t *testing.T) {
	dir := newStoreDir(t)
	st, err := daemon.OpenStore(dir, daemon.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	forged := "/a\n2026-01-01 00:00:00.000  root  share  write  /etc  ok  -"
	paths := []string{forged, "/tab\there", "/cr\rx", "/esc\x1b[31mred", "/bidi\u202egnp.exe", "/bad\xffutf8", `"/quoted"`, "-"}
	now := time.Now()
	var recs []metadata.AuditRecord
	for i, p := range paths {
		recs = append(recs, metadata.AuditRecord{Time: now.Add(time.Duration(i-len(paths)) * time.Second),
			User: "alice", View: "alice", Zone: "private:alice", Path: p, Op: "create\n", Result: "ok", Rule: "r\x00"})
	}
	if err := st.Meta.AppendAudit(recs); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	out := ok(t, "audit", "--store", dir)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1+len(paths) {
		t.Fatalf("%d paths printed as %d lines:\n%s", len(paths), len(lines)-1, out)
	}
	for _, want := range []string{`"/a\n2026-01-01`, `"/tab\there"`, `"/cr\rx"`, `"/esc\x1b[31mred"`, `"/bidi\u202egnp.exe"`, "\"/bad\ufffdutf8\"", `"\"/quoted\""`, `"-"`, `"create\n"`, `"r\x00"`} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %s:\n%s", want, out)
		}
	}
	for _, l := range lines {
		if strings.ContainsAny(l, "\t\r\x1b\x00\u202e") || !utf8.ValidString(l) {
			t.Errorf("raw control or invalid UTF-8 in %q", l)
		}
	}

	js := ok(t, "audit", "--store", dir, "--json")
	jl := strings.Split(strings.TrimSuffix(js, "\n"), "\n")
	if len(jl) != len(paths) {
		t.Fatalf("%d records printed as %d JSON lines:\n%s", len(paths), len(jl), js)
	}
	for i, l := range jl {
		var r metadata.AuditRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if want := strings.ToValidUTF8(paths[i], "\ufffd"); r.Path != want {
			t.Errorf("line %d: path %q, want %q", i, r.Path, want)
		}
	}
}
