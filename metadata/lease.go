package metadata

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A daemon's lease can end while the daemon lives: etcd unreachable for
// longer than the TTL, or the lease revoked by an operator. Everything it
// held under the lease is then gone, and the other daemons act on that:
// they reclaim the files it held open, take the locks it held, use the
// quota it had reserved. From that moment every write of this daemon fails
// with EIO (each commit puts the commit marker under the lease, which etcd
// refuses: etcdErr), so that it never acts on state the others may have
// reclaimed. keepLease grants the lease again, under the same id (so
// every key this daemon puts keeps naming it), registers the daemon again
// and tells the store's user (FollowLease), who puts back what it still
// holds where that is still true: its open markers, its quota
// allotments (admitted again), its locks (unless another daemon took a
// conflicting one meanwhile).

// keepLease follows the keep-alive channel of the daemon's lease and,
// when it closes without Close, renews the lease until it succeeds or the
// store closes.
func (e *etcdKV) keepLease(prefix string, ch <-chan *clientv3.LeaseKeepAliveResponse) {
	for {
		for range ch {
		}
		if e.closing.Load() {
			return
		}
		e.log.Error("etcd lease of this daemon ended: writes fail with EIO until it is renewed", "store", prefix)
		delay := 100 * time.Millisecond
		for {
			var err error
			if ch, err = e.renewLease(prefix); err == nil {
				break
			}
			if e.closing.Load() {
				return
			}
			e.log.Warn("renew the etcd lease of this daemon", "store", prefix, "err", err)
			time.Sleep(delay)
			delay = min(2*delay, 2*time.Second)
		}
		e.log.Info("etcd lease of this daemon renewed; putting back what it holds", "store", prefix)
		if fn := e.feed.renewed.Load(); fn != nil {
			(*fn)()
		}
	}
}

// renewLease grants the daemon's lease again under its id, registers the
// daemon under it and keeps it alive. A lease that turns out to be alive
// still (the keep-alives timed out, the lease did not) is kept alive
// again.
func (e *etcdKV) renewLease(prefix string) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ctx, cancel := e.ctx()
	defer cancel()
	_, err := clientv3.RetryLeaseClient(e.cli).LeaseGrant(ctx,
		&etcdserverpb.LeaseGrantRequest{TTL: etcdLeaseTTL, ID: int64(e.lease)})
	if err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
		return nil, fmt.Errorf("grant lease: %w", etcdErr(err))
	}
	if _, err := e.cli.Put(ctx, etcdDaemonPrefix(prefix)+e.id,
		fmt.Sprintf("%s renewed %s", daemonHost(), time.Now().UTC().Format(time.RFC3339)),
		clientv3.WithLease(e.lease)); err != nil {
		return nil, fmt.Errorf("register: %w", etcdErr(err))
	}
	ch, err := e.cli.KeepAlive(context.Background(), e.lease)
	if err != nil {
		return nil, fmt.Errorf("keep lease alive: %w", etcdErr(err))
	}
	return ch, nil
}

// FollowLease makes fn run (on a goroutine of its own) whenever this
// daemon's lease on a shared store was lost and has been granted again,
// so that it puts back what it holds (Hold, Reserve, PublishLocks). It
// does nothing on an embedded store.
func (s *Store) FollowLease(fn func()) {
	if e := s.lockEngine(); e != nil {
		e.feed.renewed.Store(&fn)
	}
}
