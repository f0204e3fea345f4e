package metadata

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"google.golang.org/grpc"
)

// Every etcd request a daemon makes is a round trip to the cluster, and a
// write is also a raft round with a WAL fsync on a quorum of members: what
// a FUSE operation costs on etcd is, to first order, how many of them it
// makes. etcdRequests counts them by kind (the gRPC method: Range, Txn,
// Put, DeleteRange, LeaseGrant, ...) so that the metrics and the tests can
// tell what each operation costs (EngineRequests).

// etcdRequests counts a client's unary requests by method.
type etcdRequests struct {
	mu sync.Mutex
	n  map[string]uint64
	// term is the highest raft term an answer named: a commit whose
	// answer is late tells by it whether the cluster has elected a new
	// leader since (kv_etcd.go, awaitCommit).
	term atomic.Uint64
}

// interceptor counts each unary call before it is sent (a retried call
// counts once per attempt the client makes through it).
func (r *etcdRequests) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	name := method[strings.LastIndexByte(method, '/')+1:]
	if ctx.Value(etcdUncounted{}) != nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	r.mu.Lock()
	if r.n == nil {
		r.n = make(map[string]uint64)
	}
	r.n[name]++
	r.mu.Unlock()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if h, ok := reply.(interface {
		GetHeader() *etcdserverpb.ResponseHeader
	}); ok && err == nil {
		r.sawTerm(h.GetHeader().GetRaftTerm())
	}
	return err
}

// sawTerm notes a raft term an answer named.
func (r *etcdRequests) sawTerm(term uint64) {
	for {
		old := r.term.Load()
		if term <= old || r.term.CompareAndSwap(old, term) {
			return
		}
	}
}

// etcdUncounted marks the context of a request made for the metrics
// themselves (EtcdSize at a scrape), which the counts leave out: a scrape
// must not change what the next one tells of the operations.
type etcdUncounted struct{}

// uncounted is ctx with its requests left out of the counts.
func uncounted(ctx context.Context) context.Context {
	return context.WithValue(ctx, etcdUncounted{}, true)
}

// snapshot copies the counts.
func (r *etcdRequests) snapshot() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]uint64, len(r.n))
	for k, v := range r.n {
		out[k] = v
	}
	return out
}

// EngineRequests reports how many requests this process has sent to the
// metadata engine, by kind, for the metrics: etcd's round trips (Range,
// Txn, Put, DeleteRange, Lease...); nil for an embedded store, which
// makes none.
func (s *Store) EngineRequests() map[string]uint64 {
	if e, ok := s.engine().(*etcdKV); ok {
		return e.requests.snapshot()
	}
	return nil
}
