package metadata

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAppendAuditValue checks that the stored form of an audit record is
// byte for byte what json.Marshal writes, for plain records, for every
// field set, and for strings that need escapes (quotes, control
// characters, HTML characters, non-ASCII, invalid UTF-8, U+2028).
func TestAppendAuditValue(t *testing.T) {
	odd := []string{"", "plain/path.go", `a"b`, `back\slash`, "tab\there", "nl\n", "\x00\x01\x1f\x7f", "<script>&</script>",
		"héllo wörld", "日本", "\xff\xfe bad utf8", "line\u2028sep\u2029", "emoji 🙂", "\b\f"}
	cases := []auditValue{
		{Op: "create"},
		{},
		{User: "alice", Zone: "private:alice", Path: "/src/x.go", Op: "create", Result: "ok"},
		{User: "bob", View: "alice", Zone: "group:team", Path: "/groups/team/f", Op: "unlink", Result: "EACCES", Rule: "not_owner", Bytes: 4096,
			Dropped: 7, Link: "lnk1", Client: "127.0.0.1:5", SHA256: "ab12", Scan: "clean", Session: "s1", Host: "host pid 9"},
		{Op: "write", Bytes: -1},
		{Op: "write", Bytes: math.MaxInt64},
		{Op: "write", Bytes: math.MinInt64},
		{Op: "audit_overflow", Dropped: math.MaxUint64},
	}
	for _, s := range odd {
		cases = append(cases, auditValue{User: s, View: s, Zone: s, Path: s, Op: s, Result: s, Rule: s, Link: s, Client: s, SHA256: s, Scan: s, Session: s, Host: s})
	}
	r := rand.New(rand.NewPCG(1, 2))
	pick := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return odd[r.IntN(len(odd))] + string(b)
	}
	for range 2000 {
		cases = append(cases, auditValue{User: pick(), View: pick(), Zone: pick(), Path: pick(), Op: pick(), Result: pick(), Rule: pick(),
			Bytes: r.Int64() - math.MaxInt64/2, Dropped: r.Uint64() >> r.IntN(64), Link: pick(), Client: pick(), SHA256: pick(), Scan: pick(), Session: pick(), Host: pick()})
	}
	for _, av := range cases {
		want, err := json.Marshal(&av)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendAuditValue([]byte("prefix"), &av); !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("%+v:\n got %s\nwant %s", av, got[len("prefix"):], want)
		}
	}
}

// BenchmarkAuditValue is the encoding of one typical record.
func BenchmarkAuditValue(b *testing.B) {
	av := auditValue{User: "alice", Zone: "private:alice", Path: "/src/cmd/go/internal/load/pkg.go", Op: "create", Result: "ok"}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = appendAuditValue(buf[:0], &av)
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&av); err != nil {
				b.Fatal(err)
			}
		}
	})
}
