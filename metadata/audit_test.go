package metadata

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

func queryAll(t *testing.T, s *Store, f AuditFilter) []AuditRecord {
	t.Helper()
	var out []AuditRecord
	if err := s.QueryAudit(f, func(r AuditRecord) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatalf("QueryAudit(%+v): %v", f, err)
	}
	return out
}

func paths(rs []AuditRecord) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Path)
	}
	return out
}

func wantCount(t *testing.T, s *Store, want int64) {
	t.Helper()
	n, err := s.AuditCount()
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("AuditCount = %d, want %d", n, want)
	}
}

// sample is a small trail: two users, three zones, one denial.
func sample(base time.Time) []AuditRecord {
	return []AuditRecord{
		{Time: base, User: "alice", View: "alice", Zone: "private:alice", Path: "/a", Op: "create", Result: ResultOK},
		{Time: base.Add(time.Second), User: "bob", View: "bob", Zone: "share", Path: "/share/b", Op: "write", Result: ResultOK, Bytes: 42},
		{Time: base.Add(2 * time.Second), User: "alice", View: "alice", Zone: "uploads:alice", Path: "/uploads/x", Op: "write", Result: "EACCES", Rule: "uploads-read-only"},
		{Time: base.Add(3 * time.Second), User: "alice", View: "alice", Zone: "group:team", Path: "/groups/team/f", Op: "unlink", Result: ResultOK},
	}
}

func TestAuditAppendQuery(t *testing.T) {
	s := newStore(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	recs := sample(base)
	// Appended out of order: the trail is in time order all the same.
	if err := s.AppendAudit([]AuditRecord{recs[2], recs[0]}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit([]AuditRecord{recs[3], recs[1]}); err != nil {
		t.Fatal(err)
	}
	wantCount(t, s, 4)

	all := queryAll(t, s, AuditFilter{})
	if got := fmt.Sprint(paths(all)); got != "[/a /share/b /uploads/x /groups/team/f]" {
		t.Fatalf("order: %s", got)
	}
	d := all[2]
	if d.User != "alice" || d.View != "alice" || d.Zone != "uploads:alice" || d.Op != "write" ||
		d.Result != "EACCES" || d.Rule != "uploads-read-only" || !d.Time.Equal(base.Add(2*time.Second)) || d.ID == "" {
		t.Fatalf("denial read back as %+v", d)
	}
	if all[1].Bytes != 42 {
		t.Fatalf("bytes: %+v", all[1])
	}

	for _, tc := range []struct {
		f    AuditFilter
		want string
	}{
		{AuditFilter{User: "alice"}, "[/a /uploads/x /groups/team/f]"},
		{AuditFilter{User: "carol"}, "[]"},
		{AuditFilter{Zone: "share"}, "[/share/b]"},
		{AuditFilter{Zone: "group"}, "[/groups/team/f]"},
		{AuditFilter{Zone: "group:team"}, "[/groups/team/f]"},
		{AuditFilter{Zone: "private:bob"}, "[]"},
		{AuditFilter{Op: "write"}, "[/share/b /uploads/x]"},
		{AuditFilter{Denied: true}, "[/uploads/x]"},
		{AuditFilter{Since: base.Add(time.Second)}, "[/share/b /uploads/x /groups/team/f]"},
		{AuditFilter{Since: base.Add(10 * time.Second)}, "[]"},
		{AuditFilter{Limit: 2}, "[/uploads/x /groups/team/f]"},
		{AuditFilter{Limit: 2, Oldest: true}, "[/a /share/b]"},
		{AuditFilter{Limit: 10}, "[/a /share/b /uploads/x /groups/team/f]"},
		{AuditFilter{User: "alice", Op: "write", Limit: 1}, "[/uploads/x]"},
		{AuditFilter{After: all[1].ID}, "[/uploads/x /groups/team/f]"},
		{AuditFilter{After: all[3].ID}, "[]"},
		{AuditFilter{After: all[0].ID, Since: base.Add(3 * time.Second)}, "[/groups/team/f]"},
	} {
		if got := fmt.Sprint(paths(queryAll(t, s, tc.f))); got != tc.want {
			t.Errorf("filter %+v: got %s, want %s", tc.f, got, tc.want)
		}
	}

	if err := s.QueryAudit(AuditFilter{After: "zz"}, func(AuditRecord) error { return nil }); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("bad cursor: %v", err)
	}
	stop := errors.New("stop")
	n := 0
	if err := s.QueryAudit(AuditFilter{}, func(AuditRecord) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("callback error: %v after %d", err, n)
	}
}

func TestAuditSameNanosecond(t *testing.T) {
	s := newStore(t)
	at := time.Now()
	var recs []AuditRecord
	for i := range 5 {
		recs = append(recs, AuditRecord{Time: at, User: "alice", Op: "write", Result: ResultOK, Path: fmt.Sprint("/", i)})
	}
	if err := s.AppendAudit(recs); err != nil {
		t.Fatal(err)
	}
	// Concurrent writers at the same instant never overwrite each other.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := s.AppendAudit(recs[:1]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	wantCount(t, s, 9)
	got := queryAll(t, s, AuditFilter{})
	if len(got) != 9 || fmt.Sprint(paths(got[:5])) != "[/0 /1 /2 /3 /4]" {
		t.Fatalf("got %v", paths(got))
	}
}

func TestAuditBigBatchAndZeroTime(t *testing.T) {
	s := newStore(t)
	recs := make([]AuditRecord, 2500)
	for i := range recs {
		recs[i] = AuditRecord{User: "alice", Op: "create", Result: ResultOK, Path: fmt.Sprintf("/f%05d", i)}
	}
	before := time.Now()
	if err := s.AppendAudit(recs); err != nil {
		t.Fatal(err)
	}
	wantCount(t, s, 2500)
	got := queryAll(t, s, AuditFilter{})
	if len(got) != 2500 || got[0].Time.Before(before) {
		t.Fatalf("%d records, first at %v", len(got), got[0].Time)
	}
	for i := 1; i < len(got); i++ {
		if got[i].ID <= got[i-1].ID {
			t.Fatalf("IDs out of order at %d", i)
		}
	}
}

func TestAuditPrune(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	var recs []AuditRecord
	// 30 records a day old, 2500 recent ones (more than one delete batch).
	for i := range 30 {
		recs = append(recs, AuditRecord{Time: now.Add(-24*time.Hour + time.Duration(i)*time.Second), User: "old", Op: "write", Result: ResultOK})
	}
	for i := range 2500 {
		recs = append(recs, AuditRecord{Time: now.Add(-time.Hour + time.Duration(i)*time.Millisecond), User: "new", Op: "write", Result: ResultOK, Path: fmt.Sprint(i)})
	}
	if err := s.AppendAudit(recs); err != nil {
		t.Fatal(err)
	}
	wantCount(t, s, 2530)

	removed, err := s.PruneAudit(0, 0)
	if err != nil || removed != 0 {
		t.Fatalf("no limits: removed %d, %v", removed, err)
	}
	removed, err = s.PruneAudit(12*time.Hour, 0)
	if err != nil || removed != 30 {
		t.Fatalf("by age: removed %d, %v", removed, err)
	}
	wantCount(t, s, 2500)
	if n := len(queryAll(t, s, AuditFilter{User: "old"})); n != 0 {
		t.Fatalf("%d old records left", n)
	}

	removed, err = s.PruneAudit(12*time.Hour, 1000)
	if err != nil || removed != 1500 {
		t.Fatalf("by count: removed %d, %v", removed, err)
	}
	wantCount(t, s, 1000)
	got := queryAll(t, s, AuditFilter{})
	if len(got) != 1000 || got[0].Path != "1500" || got[999].Path != "2499" {
		t.Fatalf("kept %d, from %s to %s", len(got), got[0].Path, got[len(got)-1].Path)
	}
	removed, err = s.PruneAudit(time.Nanosecond, 0)
	if err != nil || removed != 1000 {
		t.Fatalf("everything: removed %d, %v", removed, err)
	}
	wantCount(t, s, 0)
}

func TestAuditSurvivesReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(sample(time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	wantCount(t, ro, 4)
	if got := queryAll(t, ro, AuditFilter{Denied: true}); len(got) != 1 || got[0].Rule != "uploads-read-only" {
		t.Fatalf("after reopen: %+v", got)
	}
	if err := ro.AppendAudit(sample(time.Now())); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("append to read-only store: %v", err)
	}
	if _, err := ro.PruneAudit(time.Nanosecond, 0); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("prune read-only store: %v", err)
	}
}

func TestAuditLeavesCheckClean(t *testing.T) {
	s := newStore(t)
	if err := s.AppendAudit(sample(time.Now())); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(dirBlobs{t.TempDir()}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Fatalf("audit records upset fsck: %+v", rep.Problems)
	}
}
