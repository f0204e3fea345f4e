package metadata

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shedfs/shedfs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Many daemons serve one etcd store at once. Each registers under a lease
// of its own (register); what only it holds lives under that lease and
// goes when the daemon dies: its registration, its commit marker, and its
// open markers (open.go). The etcd transactions keep the schema
// consistent between them (every read compared at commit, the metadata
// cache's reads included: revTxn), and each follows the others' changes
// through etcd's watch (etcdFeed) to drop what it cached of them.

// etcdLeaseTTL is how long what a daemon held under its lease outlives
// the daemon when it dies without closing the store.
const etcdLeaseTTL = 10 // seconds

// etcdDaemonPrefix is where the daemons of a store register. It lies
// outside the store's prefix, so the schema never sees it.
func etcdDaemonPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "#daemon/" }

// daemonHost names this process among the daemons sharing a store: in
// their registrations (Peers) and in the audit records they write.
func daemonHost() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}

// randomU32 is a random starting point for a per-process counter.
func randomU32() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint32(time.Now().UnixNano())
	}
	return binary.BigEndian.Uint32(b[:])
}

// register puts this process's registration key under a lease kept alive
// until Close.
func (e *etcdKV) register(prefix string) error {
	ctx, cancel := e.ctx()
	defer cancel()
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("open etcd store %s: daemon id: %w", prefix, err)
	}
	e.id = hex.EncodeToString(id[:])
	lease, err := e.cli.Grant(ctx, etcdLeaseTTL)
	if err != nil {
		return fmt.Errorf("open etcd store %s: lease: %w", prefix, etcdErr(err))
	}
	if _, err := e.cli.Put(ctx, etcdDaemonPrefix(prefix)+e.id,
		fmt.Sprintf("%s since %s", daemonHost(), time.Now().UTC().Format(time.RFC3339)),
		clientv3.WithLease(lease.ID)); err != nil {
		e.cli.Revoke(ctx, lease.ID)
		return fmt.Errorf("open etcd store %s: register: %w", prefix, etcdErr(err))
	}
	ch, err := e.cli.KeepAlive(context.Background(), lease.ID)
	if err != nil {
		e.cli.Revoke(ctx, lease.ID)
		return fmt.Errorf("open etcd store %s: keep lease alive: %w", prefix, etcdErr(err))
	}
	e.lease = lease.ID
	e.commitKey = strings.TrimSuffix(prefix, "/") + "#commit/" + e.id
	go e.keepLease(prefix, ch)
	return nil
}

// peers lists the other daemons registered on the store (their
// registration values: host, pid, start time).
func (e *etcdKV) peers() ([]string, error) {
	ctx, cancel := e.ctx()
	defer cancel()
	pfx := etcdDaemonPrefix(string(e.prefix))
	resp, err := e.cli.Get(ctx, pfx, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list daemons: %w", etcdErr(err))
	}
	var out []string
	for _, kv := range resp.Kvs {
		if e.id != "" && string(kv.Key) == pfx+e.id {
			continue
		}
		out = append(out, string(kv.Value))
	}
	return out, nil
}

// etcdFeed follows the store's changes with an etcd watch from the
// revision the process opened it at, and hands every change another
// process made to on. The process's own commits are told apart by their
// revisions (own), noted as they commit. A commit's event may arrive
// before its answer does, so a commit holds committing (read) from before
// its request until its revision is noted, and the feed takes it (write)
// before it tells a change foreign.
type etcdFeed struct {
	committing sync.RWMutex
	mu         sync.Mutex
	owned      map[int64]struct{}
	last       int64 // the revision mine saw last
	lastMine   bool
	cancel     context.CancelFunc
	done       chan struct{}
	// renewed runs once this daemon's lease, lost, is granted again
	// (lease.go).
	renewed atomic.Pointer[func()]
}

// own notes the revision of one of this process's commits.
func (f *etcdFeed) own(rev int64) {
	f.mu.Lock()
	if f.owned != nil {
		f.owned[rev] = struct{}{}
	}
	f.mu.Unlock()
}

// mine reports whether rev is one of this process's commits and forgets
// the revisions before it (the watch delivers in revision order, and the
// events of one commit one after another).
func (f *etcdFeed) mine(rev int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rev == f.last {
		return f.lastMine
	}
	_, ok := f.owned[rev]
	for r := range f.owned {
		if r <= rev {
			delete(f.owned, r)
		}
	}
	f.last, f.lastMine = rev, ok
	return ok
}

// follow starts the feed: on gets the keys (without the store prefix)
// that other processes changed, in revision order, or lost when changes
// may have been missed (the watched revision was compacted away), after
// which anything may have changed. gone is called when another daemon's
// registration ends (it closed, or died and its lease expired). locked is
// called with the inode whose lock records another daemon changed (0:
// any, after lost changes). wanted is called with the holder whose
// allotments another daemon asks for (allotment.go).
func (e *etcdKV) follow(on func(keys [][]byte, lost bool), gone func(), locked func(ino uint64), wanted func(h shedfs.Holder)) {
	f := &e.feed
	ctx, cancel := context.WithCancel(context.Background())
	f.mu.Lock()
	f.owned = make(map[int64]struct{})
	f.cancel, f.done = cancel, make(chan struct{})
	f.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(4)
	go func() {
		defer wg.Done()
		e.watch(ctx, string(e.prefix), func(resp clientv3.WatchResponse) {
			var keys [][]byte
			f.committing.Lock()
			//lint:ignore SA2001 waits for the commits under way to note their revisions
			f.committing.Unlock()
			for _, ev := range resp.Events {
				if f.mine(ev.Kv.ModRevision) {
					continue
				}
				keys = append(keys, ev.Kv.Key[len(e.prefix):])
			}
			if len(keys) > 0 {
				on(keys, false)
			}
		}, func() { on(nil, true) })
	}()
	go func() {
		defer wg.Done()
		e.watch(ctx, etcdDaemonPrefix(string(e.prefix)), func(resp clientv3.WatchResponse) {
			for _, ev := range resp.Events {
				// This daemon's own registration goes when its lease
				// was lost (lease.go): what it held open is its own
				// to put back, not to reclaim.
				if ev.Type == clientv3.EventTypeDelete && string(ev.Kv.Key) != etcdDaemonPrefix(string(e.prefix))+e.id {
					gone()
					return
				}
			}
		}, gone)
	}()
	go func() {
		defer wg.Done()
		root := etcdLockRoot(string(e.prefix))
		e.watch(ctx, root, func(resp clientv3.WatchResponse) {
			for _, ev := range resp.Events {
				k := string(ev.Kv.Key)
				if !strings.HasSuffix(k, "/"+e.id) {
					if ino := lockIno(k, root); ino != 0 {
						locked(ino)
					}
				}
			}
		}, func() { locked(0) })
	}()
	go func() {
		defer wg.Done()
		own := etcdWantPrefix(string(e.prefix)) + e.id
		e.watch(ctx, etcdWantPrefix(string(e.prefix)), func(resp clientv3.WatchResponse) {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut && string(ev.Kv.Key) != own {
					wanted(shedfs.Holder(ev.Kv.Value))
				}
			}
		}, func() {}) // a request missed is asked again after its wait
	}()
	go func() {
		wg.Wait()
		close(f.done)
	}()
}

// watch follows the keys under prefix from the store's open revision until
// ctx ends, resuming after interruptions; lost is called when the
// revision to resume from was compacted away. An interruption (quorum
// lost, the member gone) is retried with a backoff of up to
// etcdWatchBackoff, and said once for all the watches of the feed
// (feedOutage), not at every retry.
func (e *etcdKV) watch(ctx context.Context, prefix string, fn func(clientv3.WatchResponse), lost func()) {
	next := e.startRev + 1
	delay := etcdWatchRetry
	down := false
	for ctx.Err() == nil {
		wctx, wcancel := context.WithCancel(ctx)
		wch := e.cli.Watch(clientv3.WithRequireLeader(wctx), prefix,
			clientv3.WithPrefix(), clientv3.WithRev(next), clientv3.WithCreatedNotify())
		for resp := range wch {
			if resp.CompactRevision != 0 {
				e.log.Warn("etcd change feed lost changes (compacted)", "keys", prefix, "from", next, "compacted", resp.CompactRevision)
				next = resp.CompactRevision
				lost()
				break
			}
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil && !down {
					down = true
					e.outage.down(err)
				}
				break
			}
			if resp.Created {
				if down {
					down = false
					e.outage.up()
				}
				delay = etcdWatchRetry
				continue
			}
			if n := len(resp.Events); n > 0 {
				next = resp.Events[n-1].Kv.ModRevision + 1
			}
			fn(resp)
		}
		wcancel()
		if ctx.Err() == nil && !down {
			// Closed without an error (the client's connection
			// went): an interruption all the same.
			down = true
			e.outage.down(errors.New("watch closed"))
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, etcdWatchBackoff)
	}
	if down {
		e.outage.up()
	}
}

const (
	// etcdWatchRetry is the first wait before a watch interrupted is
	// set up again, doubled at each failure up to etcdWatchBackoff.
	etcdWatchRetry   = 100 * time.Millisecond
	etcdWatchBackoff = 2 * time.Second
)

// feedOutage says once that the change feed is interrupted, when the
// first of its watches is, and once that it has resumed, when the last
// is back.
type feedOutage struct {
	log   *slog.Logger
	mu    sync.Mutex
	n     int
	since time.Time
}

func (o *feedOutage) down(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
	if o.n == 1 {
		o.since = time.Now()
		o.log.Warn("etcd change feed interrupted; resuming when etcd answers", "err", err)
	}
}

func (o *feedOutage) up() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == 0 {
		return
	}
	o.n--
	if o.n == 0 {
		o.log.Info("etcd change feed resumed", "after", time.Since(o.since).Round(time.Millisecond))
	}
}

// stop ends the feed and waits for it.
func (f *etcdFeed) stop() {
	f.mu.Lock()
	cancel, done := f.cancel, f.done
	f.cancel = nil
	f.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// readRev is the revision of key as the transaction read it (0: absent).
func (t *etcdTxn) readRev(key []byte) int64 { return t.reads[t.full(key)].mod }

// assume records that the transaction saw key at rev without reading it
// (the metadata cache served it): the commit compares it as any read.
func (t *etcdTxn) assume(key []byte, rev int64) { t.reads[t.full(key)] = etcdRead{mod: rev} }

// committedRev is the revision the transaction's writes got, 0 before the
// commit or when no answer told it.
func (t *etcdTxn) committedRev() int64 {
	if !t.committed {
		return 0
	}
	return t.rev
}

// EtcdSize is what a store on etcd takes there.
type EtcdSize struct {
	// Keys is how many keys the store's schema has under its prefix.
	Keys int64
	// DBBytes is the size of the cluster's database, which every store
	// on the cluster shares (and the history not compacted yet), as
	// the first member to answer says; DBInUse the part of it in use
	// (the rest is free pages until a defragmentation).
	DBBytes, DBInUse int64
}

// EtcdSize reports what a store on etcd takes there; ok is false for an
// embedded store (EngineSize tells its size). Its two requests are not
// counted in EngineRequests: the metrics ask it at every scrape.
func (s *Store) EtcdSize() (size EtcdSize, ok bool, err error) {
	e, isEtcd := s.engine().(*etcdKV)
	if !isEtcd {
		return EtcdSize{}, false, nil
	}
	ctx, cancel := e.ctx()
	defer cancel()
	ctx = uncounted(ctx)
	resp, err := e.cli.Get(ctx, string(e.prefix), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return EtcdSize{}, true, fmt.Errorf("count the store's keys: %w", etcdErr(err))
	}
	size.Keys = resp.Count
	var last error
	for _, ep := range e.cli.Endpoints() {
		sctx, scancel := context.WithTimeout(uncounted(context.Background()), min(e.timeout, 2*time.Second))
		st, err := e.cli.Status(sctx, ep)
		scancel()
		if err != nil {
			last = err
			continue
		}
		size.DBBytes, size.DBInUse = st.DbSize, st.DbSizeInUse
		return size, true, nil
	}
	return size, true, fmt.Errorf("etcd database size: %w", etcdErr(last))
}
