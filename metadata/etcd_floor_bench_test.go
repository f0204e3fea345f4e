package metadata

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shedfs/shedfs/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkEtcdFloor measures what one etcd write costs on a 3-member
// cluster of this machine, below anything shedfs does: a plain put, and a
// transaction shaped like a create's (compares on the keys it read, puts
// of the record, the entry, the usage and the commit marker). Each write
// is a raft round with a WAL fsync on a quorum, so this is the floor of a
// sequential writer's per-operation time; the -4 variants run four
// writers at once, which etcd batches into shared raft rounds. It logs
// p50 and p99 besides ns/op.
//
//	go test ./metadata -run '^$' -bench EtcdFloor -benchtime 400x
func BenchmarkEtcdFloor(b *testing.B) {
	c := etcdtest.Start(b, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	var seq atomic.Int64
	put := func(ctx context.Context) error {
		_, err := cli.Put(ctx, fmt.Sprintf("floor/put/%d", seq.Add(1)), "x")
		return err
	}
	txn := func(ctx context.Context) error {
		n := seq.Add(1)
		k := fmt.Sprintf("floor/txn/%d/", n)
		_, err := cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(k+"entry"), "=", 0),
			clientv3.Compare(clientv3.ModRevision(k+"usage"), "=", 0),
			clientv3.Compare(clientv3.ModRevision(k+"dir"), "=", 0),
		).Then(
			clientv3.OpPut(k+"inode", string(make([]byte, 80))),
			clientv3.OpPut(k+"entry", "0123456789"),
			clientv3.OpPut(k+"usage", "0123456789abcdef"),
			clientv3.OpPut(k+"dir", string(make([]byte, 80))),
			clientv3.OpPut(k+"commit", fmt.Sprint(n)),
		).Commit()
		return err
	}
	for _, bc := range []struct {
		name    string
		workers int
		do      func(context.Context) error
	}{
		{"put", 1, put}, {"txn", 1, txn}, {"txn-4", 4, txn}, {"txn-16", 16, txn},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			done := make(chan error, bc.workers)
			b.ResetTimer()
			for range bc.workers {
				go func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							done <- nil
							return
						}
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						t0 := time.Now()
						err := bc.do(ctx)
						lat[i] = time.Since(t0)
						cancel()
						if err != nil {
							done <- err
							return
						}
					}
				}()
			}
			for range bc.workers {
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
