package daemon

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

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
