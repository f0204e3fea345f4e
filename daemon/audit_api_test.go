package daemon

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/audit"
	"github.com/shedfs/shedfs/metadata"
)

func auditAll(t *testing.T, a AuditReader, f metadata.AuditFilter) []metadata.AuditRecord {
	t.Helper()
	var out []metadata.AuditRecord
	if err := a.Audit(context.Background(), f, func(r metadata.AuditRecord) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatalf("Audit(%+v): %v", f, err)
	}
	return out
}

func TestAuditOverSocketMatchesStore(t *testing.T) {
	st := openTestStore(t)
	base := time.Now().Add(-time.Hour)
	var recs []metadata.AuditRecord
	for i := range MaxAuditAnswer + 500 { // more than one page
		r := metadata.AuditRecord{Time: base.Add(time.Duration(i) * time.Millisecond), User: "alice", View: "alice",
			Zone: "private:alice", Path: fmt.Sprint("/f", i), Op: "create", Result: metadata.ResultOK}
		if i%1000 == 7 {
			r.User, r.View, r.Zone, r.Op, r.Result, r.Rule = "bob", "bob", "share", "unlink", "EPERM", "owner-only"
		}
		recs = append(recs, r)
	}
	if err := st.Meta.AppendAudit(recs); err != nil {
		t.Fatal(err)
	}
	local := NewLocal(st, nil)
	serveTestAdmin(t, st, local)
	client := dialTest(t, st)

	for _, f := range []metadata.AuditFilter{
		{},
		{User: "bob"},
		{Denied: true, Zone: "share", Op: "unlink"},
		{Limit: 3},
		{Limit: 3, Oldest: true},
		{Limit: MaxAuditAnswer + 100, Oldest: true},
		{Since: base.Add(10 * time.Second), User: "alice"},
	} {
		want := auditAll(t, local, f)
		got := auditAll(t, client, f)
		if len(want) == 0 || !reflect.DeepEqual(ids(got), ids(want)) {
			t.Errorf("filter %+v: daemon gave %d records, store %d", f, len(got), len(want))
		}
	}
	if d := auditAll(t, client, metadata.AuditFilter{Denied: true, Limit: 1}); len(d) != 1 || d[0].Rule != "owner-only" || d[0].Result != "EPERM" {
		t.Errorf("denial over the API: %+v", d)
	}
	if err := client.Audit(context.Background(), metadata.AuditFilter{Limit: MaxAuditAnswer + 1}, func(metadata.AuditRecord) error { return nil }); codeOf(t, err) != CodeInvalid {
		t.Errorf("too large a tail: %v", err)
	}
	if err := client.Audit(context.Background(), metadata.AuditFilter{After: "nonsense"}, func(metadata.AuditRecord) error { return nil }); codeOf(t, err) != CodeInvalid {
		t.Errorf("bad cursor: %v", err)
	}
	for _, q := range []string{"", "?limit=0", "?limit=10&bogus=1", "?limit=10&since=yesterday", "?limit=10&denied=maybe", "?limit=1&limit=2"} {
		if code, _ := rawRequest(t, SocketPath(st.Dir), http.MethodGet, "/v1/audit"+q, nil); code != http.StatusBadRequest {
			t.Errorf("GET /v1/audit%s: %d, want 400", q, code)
		}
	}
	if code, _ := rawRequest(t, SocketPath(st.Dir), http.MethodPost, "/v1/audit", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/audit: %d, want 405", code)
	}
}

func ids(rs []metadata.AuditRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// TestAuditFlushOverSocket: POST /v1/audit/flush stores every event the
// daemon's recorder holds in its batch, so that `shedfs audit` right
// after a refusal shows it (issue 27: the batch waits up to its flush
// interval, and the command printed nothing).
func TestAuditFlushOverSocket(t *testing.T) {
	st := openTestStore(t)
	rec := audit.New(st.Meta, audit.Options{FlushInterval: time.Hour, RetentionInterval: time.Hour})
	t.Cleanup(func() { rec.Close() })
	local := newLocal(st, NewCore(st, rec, nil), nil)
	serveTestAdmin(t, st, local)
	client := dialTest(t, st)
	local.core.Record(shedfs.Event{Time: time.Now(), User: "alice", Zone: shedfs.Zone{Kind: shedfs.ZonePrivate, Principal: "alice"},
		Path: "/x", Op: "create", Errno: syscall.EACCES, Reason: "dir_mode"})
	denied := metadata.AuditFilter{Denied: true}
	if got := auditAll(t, client, denied); len(got) != 0 {
		t.Fatalf("the batch was stored before the flush interval: %+v", got)
	}
	if err := client.FlushAudit(context.Background()); err != nil {
		t.Fatalf("FlushAudit: %v", err)
	}
	if got := auditAll(t, client, denied); len(got) != 1 || got[0].Path != "/x" {
		t.Errorf("after FlushAudit: %+v, want the one denial", got)
	}
	// Without a recorder (the CLI's own store, --no-audit) there is
	// nothing to flush.
	if err := NewLocal(st, nil).FlushAudit(context.Background()); err != nil {
		t.Errorf("FlushAudit without a recorder: %v", err)
	}
	if code, _ := rawRequest(t, SocketPath(st.Dir), http.MethodGet, "/v1/audit/flush", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/audit/flush: %d, want 405", code)
	}
}
