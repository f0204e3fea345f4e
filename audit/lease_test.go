package audit

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shedfs/shedfs/internal/etcdtest"
	"github.com/shedfs/shedfs/metadata"
)

// TestEtcdLeaseLostKeepsRecords: on an etcd store whose daemon lease is
// revoked (as if etcd had been out of reach past the TTL), the store
// refuses the records meanwhile; the recorder keeps them and writes them
// once the lease is granted again, losing none.
func TestEtcdLeaseLostKeepsRecords(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s, err := metadata.OpenEtcd(metadata.EtcdConfig{Endpoints: c.Endpoints(), Prefix: "test/"}, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := New(s, Options{FlushInterval: 10 * time.Millisecond})
	defer r.Close()
	r.Record(write("alice", "/before"))
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Leases {
		if _, err := cli.Revoke(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/during1", "/during2", "/during3"} {
		r.Record(write("alice", p))
	}
	if err := r.Flush(); err != nil {
		t.Logf("flush with the lease gone: %v", err)
	} else {
		t.Log("the lease was back before the flush")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := records(t, s, metadata.AuditFilter{Oldest: true})
		if len(got) == 4 {
			if got[3].Path != "/during3" {
				t.Fatalf("last record %+v", got[3])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records stored 20 s after the lease was revoked, want 4 (failed %d)", len(got), r.Failed())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.Failed() != 0 {
		t.Fatalf("failed %d", r.Failed())
	}
}
