package metadata

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// The etcd engine holds a store's schema on an etcd cluster, under a key
// prefix, so that many daemons on many hosts can serve one namespace. It
// gives the schema what badger gives it: serializable transactions with
// prefix scans. etcd has no interactive transactions, so Update runs fn
// optimistically against one snapshot revision, buffers its writes, and
// commits them in one etcd Txn that first compares every key fn read (and
// every range it scanned) with what it saw; if another writer changed any
// of them since, nothing is written and fn runs again, as badger does on a
// conflict.

// DefaultMetaTimeout bounds every etcd request: with quorum lost, a
// callback fails with EIO after this long instead of hanging.
const DefaultMetaTimeout = 10 * time.Second

// etcdScanPage is how many keys one range request of a scan fetches.
const etcdScanPage = 512

// EtcdConfig says how to reach the etcd cluster of a store.
type EtcdConfig struct {
	// Endpoints are the members' client addresses (host:port).
	Endpoints []string
	// Prefix is the key prefix the store lives under, so several stores
	// can share one cluster. It always ends in "/".
	Prefix string
	// TLS, when set, is used for every connection.
	TLS *tls.Config
	// Username and Password authenticate when Username is set.
	Username, Password string
	// Timeout bounds each request (DefaultMetaTimeout when zero).
	Timeout time.Duration
}

// ParseMetaURL reads a --meta URL: etcd://host:port[,host:port...]/prefix.
// The prefix is required and made to end in "/", so that store "a" never
// sees the keys of store "ab".
func ParseMetaURL(s string) (EtcdConfig, error) {
	u, err := url.Parse(s)
	if err != nil {
		return EtcdConfig{}, fmt.Errorf("metadata URL %q: %w", s, err)
	}
	if u.Scheme != "etcd" {
		return EtcdConfig{}, fmt.Errorf("metadata URL %q: scheme %q: only etcd:// is known", s, u.Scheme)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return EtcdConfig{}, fmt.Errorf("metadata URL %q: credentials and options come from flags and the environment, not the URL", s)
	}
	var cfg EtcdConfig
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return EtcdConfig{}, fmt.Errorf("metadata URL %q: empty host", s)
		}
		if !strings.Contains(h, ":") {
			h += ":2379"
		}
		cfg.Endpoints = append(cfg.Endpoints, h)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix == "" {
		return EtcdConfig{}, fmt.Errorf("metadata URL %q: needs a key prefix, as in etcd://host:2379/shedfs", s)
	}
	cfg.Prefix = prefix + "/"
	return cfg, nil
}

// etcdKV is the etcd engine of a multi-host store.
type etcdKV struct {
	cli     *clientv3.Client
	prefix  []byte
	timeout time.Duration
	log     *slog.Logger
	// lease is this process's registration lease (etcd_multi.go): its
	// registration key, its commit marker and its open markers live
	// under it, and go with it when the process dies. 0 for a read-only
	// open.
	lease   clientv3.LeaseID
	closing atomic.Bool
	// id names this process among the daemons of the store.
	id string
	// startRev is the store's revision when this process opened it; the
	// change feed starts after it.
	startRev int64
	// commitKey is this process's commit marker (see commit): every
	// write transaction also puts the next commitSeq there, so that a
	// commit whose answer was lost (a leader change mid-request) can be
	// told applied or not. A process commits one (group) transaction
	// at a time (etcd_group.go), so the marker only grows. It lives
	// under the registration lease. Empty for a read-only open.
	commitKey string
	commitSeq atomic.Uint64
	// feed follows the changes of the other processes (etcd_multi.go).
	feed etcdFeed
	// groups queues write transactions for a group commit
	// (etcd_group.go).
	groups etcdGroups
	// requests counts the requests sent (etcd_requests.go).
	requests *etcdRequests
	// outage says when the change feed is interrupted and back
	// (etcd_multi.go).
	outage feedOutage
}

// openEtcd connects to the cluster of cfg and checks that it answers.
// Unless readOnly, it registers this process among the store's daemons
// under a lease of its own (register): any number of processes serve one
// store at once, and what each holds (its registration, commit marker,
// open markers, quota reservations) expires with its lease when it dies.
func openEtcd(cfg EtcdConfig, logger *slog.Logger, readOnly bool) (*etcdKV, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultMetaTimeout
	}
	if cfg.Prefix == "" || !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("open etcd store: prefix %q must be non-empty and end in /", cfg.Prefix)
	}
	reqs := &etcdRequests{}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: timeout,
		// A member gone without closing its connections (a host
		// down) is told within 5+2 s, not the 5+20 s of the
		// defaults; pinging more often than every 5 s makes etcd
		// close the connection (--grpc-keepalive-min-time).
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		TLS:                  cfg.TLS,
		Username:             cfg.Username,
		Password:             cfg.Password,
		MaxCallSendMsgSize:   8 << 20,
		MaxCallRecvMsgSize:   64 << 20,
		// The client's own retries are noise in the daemon's log: a
		// request that fails for good comes back as an error, which the
		// callers log or turn into EIO.
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(reqs.interceptor)},
	})
	if err != nil {
		return nil, fmt.Errorf("open etcd store %v: %w", cfg.Endpoints, err)
	}
	e := &etcdKV{cli: cli, prefix: []byte(cfg.Prefix), timeout: timeout, log: logger, requests: reqs}
	e.outage.log = logger
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := cli.Get(ctx, cfg.Prefix, clientv3.WithCountOnly())
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("open etcd store %v: %w", cfg.Endpoints, etcdErr(err))
	}
	e.startRev = resp.Header.Revision
	e.learnMembers(ctx, cfg.Endpoints)
	if !readOnly {
		if err := e.register(cfg.Prefix); err != nil {
			cli.Close()
			return nil, err
		}
	}
	return e, nil
}

// learnMembers adds the client addresses of every member of the cluster
// to the endpoints the client was given, so that a daemon told of one
// member goes on with the others when that one is gone. The endpoints
// given stay (a proxy or a load balancer in front of the cluster), and
// an address the members advertise that cannot be reached here is
// merely never used.
func (e *etcdKV) learnMembers(ctx context.Context, given []string) {
	resp, err := e.cli.MemberList(ctx)
	if err != nil {
		e.log.Debug("list etcd members", "err", err)
		return
	}
	all := slices.Clone(given)
	for _, m := range resp.Members {
		for _, u := range m.ClientURLs {
			if i := strings.Index(u, "://"); i >= 0 {
				u = u[i+3:]
			}
			if u != "" && !slices.Contains(all, u) {
				all = append(all, u)
			}
		}
	}
	if len(all) > len(given) {
		e.cli.SetEndpoints(all...)
	}
}

// OpenEtcd opens (creating if empty) the metadata of a store kept on an
// etcd cluster, as Open does for an embedded one. Options.InMemory has no
// meaning here and is ignored.
func OpenEtcd(cfg EtcdConfig, opts Options) (*Store, error) {
	kv, err := openEtcd(cfg, opts.Logger, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	where := "etcd://" + strings.Join(cfg.Endpoints, ",") + "/" + strings.TrimSuffix(cfg.Prefix, "/")
	s, err := openKV(kv, where, opts.ReadOnly, opts.MustExist, logger)
	if err != nil {
		kv.Close()
		return nil, err
	}
	return s, nil
}

// etcdErr turns a request that ran out of time (quorum lost, every member
// down) into EIO, which a FUSE callback hands to the caller as is.
func etcdErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrTimeout) ||
		errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) ||
		errors.Is(err, rpctypes.ErrLeaseNotFound) { // this daemon's lease lost (lease.go)
		return fmt.Errorf("etcd: %v: %w", err, syscall.EIO)
	}
	return fmt.Errorf("etcd: %w", err)
}

func (e *etcdKV) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), e.timeout)
}

// Update runs fn against one snapshot and commits its writes if nothing
// it read has changed since; otherwise it runs fn again.
func (e *etcdKV) Update(fn func(tx Txn) error) error { return e.updateAlone(fn) }

// updateAlone is Update; updateGrouped (etcd_group.go) runs it for a
// group of one, and for each member of a group etcd refused for its size.
func (e *etcdKV) updateAlone(fn func(tx Txn) error) error {
	var err error
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		t := newEtcdTxn(e, true)
		if err = fn(t); err != nil {
			if errors.Is(err, errEtcdRetry) {
				continue
			}
			return err
		}
		var ok bool
		if ok, err = t.commit(); err != nil {
			return err
		}
		if ok {
			return nil
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Microsecond)
	}
	return fmt.Errorf("commit after %d attempts: conflicts did not stop", maxConflictRetries)
}

// View runs fn against one snapshot revision.
func (e *etcdKV) View(fn func(tx Txn) error) error {
	for {
		err := fn(newEtcdTxn(e, false))
		if errors.Is(err, errEtcdRetry) {
			continue
		}
		return err
	}
}

// snapshot is a read-only transaction at one revision, for the metadata
// cache; it holds nothing on the server, so discarding it is a no-op.
func (e *etcdKV) snapshot() (Txn, func()) { return newEtcdTxn(e, false), func() {} }

// Sync is a no-op: etcd acknowledges a commit only once a quorum of
// members has it on disk.
func (e *etcdKV) Sync() error { return nil }

// Close stops the change feed, ends the registration (and with it
// everything held under its lease) and closes the client.
func (e *etcdKV) Close() error {
	e.closing.Store(true)
	e.feed.stop()
	if e.lease != 0 {
		ctx, cancel := e.ctx()
		e.cli.Revoke(ctx, e.lease)
		cancel()
	}
	if err := e.cli.Close(); err != nil {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// errEtcdRetry means the snapshot revision a transaction reads at was
// compacted away: it starts again at a new one.
var errEtcdRetry = errors.New("etcd snapshot compacted; retrying")

// etcdRead is what a transaction saw of one key: its mod revision (0 for
// absent), compared at commit.
type etcdRead struct{ mod int64 }

// etcdRange is a key range a transaction scanned, [from, to): at commit no
// key in it may have a mod revision after the snapshot (a new or changed
// key); deleted keys are caught by the per-key reads.
type etcdRange struct{ from, to string }

// etcdTxn is one transaction of the etcd engine: reads at rev, writes
// buffered until commit.
type etcdTxn struct {
	e        *etcdKV
	writable bool
	rev      int64 // snapshot revision; 0 until the first read
	reads    map[string]etcdRead
	ranges   []etcdRange
	writes   map[string]etcdWrite
	// committed is set once the writes are in; rev is then the
	// revision of the commit (committedRev).
	committed bool
}

// etcdWrite is a buffered write: a value, or a delete. leased puts it
// under this process's lease (setLeased).
type etcdWrite struct {
	val    []byte
	del    bool
	leased bool
}

func newEtcdTxn(e *etcdKV, writable bool) *etcdTxn {
	t := &etcdTxn{e: e, writable: writable, reads: map[string]etcdRead{}}
	if writable {
		t.writes = map[string]etcdWrite{}
	}
	return t
}

func (t *etcdTxn) full(key []byte) string {
	return string(t.e.prefix) + string(key)
}

// get fetches keys [from, to) (to empty: the key from alone) at the
// snapshot revision, fixing the revision on the first read.
func (t *etcdTxn) get(from, to string, limit int64) (*clientv3.GetResponse, error) {
	ctx, cancel := t.e.ctx()
	defer cancel()
	var opts []clientv3.OpOption
	if to != "" {
		opts = append(opts, clientv3.WithRange(to), clientv3.WithLimit(limit))
	}
	if t.rev != 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	// The first read is linearizable (etcd's default): the snapshot is at
	// least as new as every commit acknowledged before it.
	resp, err := t.e.cli.Get(ctx, from, opts...)
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil, errEtcdRetry
	}
	if err != nil {
		return nil, etcdErr(err)
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	return resp, nil
}

// Get returns the transaction's own write of key if it made one, or the
// value at the snapshot.
func (t *etcdTxn) Get(key []byte) ([]byte, error) {
	k := t.full(key)
	if w, ok := t.writes[k]; ok {
		if w.del {
			return nil, ErrNotFound
		}
		return slices.Clone(w.val), nil
	}
	resp, err := t.get(k, "", 0)
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		t.reads[k] = etcdRead{}
		return nil, ErrNotFound
	}
	kv := resp.Kvs[0]
	t.reads[k] = etcdRead{mod: kv.ModRevision}
	if kv.Value == nil {
		return []byte{}, nil
	}
	return kv.Value, nil
}

// Set buffers a write.
func (t *etcdTxn) Set(key, value []byte) error {
	if !t.writable {
		return errors.New("set in a read-only transaction")
	}
	t.writes[t.full(key)] = etcdWrite{val: bytes.Clone(value)}
	return nil
}

// Delete buffers a delete.
func (t *etcdTxn) Delete(key []byte) error {
	if !t.writable {
		return errors.New("delete in a read-only transaction")
	}
	t.writes[t.full(key)] = etcdWrite{del: true}
	return nil
}

// Scan walks the keys with prefix from start at the snapshot, merged with
// the transaction's own writes, in key order.
func (t *etcdTxn) Scan(prefix, start []byte, fn func(key, value []byte) error) error {
	from := t.full(prefix)
	if start != nil && bytes.Compare(start, prefix) > 0 {
		from = t.full(start)
	}
	end := clientv3.GetPrefixRangeEnd(t.full(prefix))
	// The transaction's own writes in range, as they are when the scan
	// starts (fn may write more; badger's iterators do not see those
	// either).
	var own []string
	for k := range t.writes {
		if k >= from && k < end {
			own = append(own, k)
		}
	}
	slices.Sort(own)
	ownVals := make(map[string]etcdWrite, len(own))
	for _, k := range own {
		ownVals[k] = t.writes[k]
	}
	emit := func(k string, w etcdWrite) (bool, error) {
		if w.del {
			return false, nil
		}
		v := w.val
		if v == nil {
			v = []byte{}
		}
		err := fn([]byte(k[len(t.e.prefix):]), v)
		if err == errStopScan {
			return true, nil
		}
		return err != nil, err
	}
	// record notes the range the scan has read, [from, upto), for the
	// commit check.
	cursor := from
	record := func(upto string) {
		if upto > from {
			t.ranges = append(t.ranges, etcdRange{from: from, to: upto})
		}
	}
	for {
		resp, err := t.get(cursor, end, etcdScanPage)
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			k := string(kv.Key)
			t.reads[k] = etcdRead{mod: kv.ModRevision}
			for len(own) > 0 && own[0] < k {
				if stop, err := emit(own[0], ownVals[own[0]]); stop || err != nil {
					record(own[0] + "\x00")
					return err
				}
				own = own[1:]
			}
			w := etcdWrite{val: kv.Value}
			if len(own) > 0 && own[0] == k {
				w = ownVals[k]
				own = own[1:]
			}
			if stop, err := emit(k, w); stop || err != nil {
				record(k + "\x00")
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		cursor = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	record(end)
	for _, k := range own {
		if stop, err := emit(k, ownVals[k]); stop || err != nil {
			return err
		}
	}
	return nil
}

// commit writes the buffered writes if nothing read has changed since the
// snapshot. ok is false on a conflict.
func (t *etcdTxn) commit() (ok bool, err error) {
	if len(t.writes) == 0 {
		return true, nil
	}
	var cmps []clientv3.Cmp
	for k, r := range t.reads {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", r.mod))
	}
	for _, r := range t.ranges {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(r.from), "<", t.rev+1).WithRange(r.to))
	}
	ops := make([]clientv3.Op, 0, len(t.writes))
	for k, w := range t.writes {
		if w.del {
			ops = append(ops, clientv3.OpDelete(k))
		} else if w.leased && t.e.lease != 0 {
			ops = append(ops, clientv3.OpPut(k, string(w.val), clientv3.WithLease(t.e.lease)))
		} else {
			ops = append(ops, clientv3.OpPut(k, string(w.val)))
		}
	}
	ctx, cancel := t.e.ctx()
	defer cancel()
	var seq uint64
	if t.e.commitKey != "" {
		seq = t.e.commitSeq.Add(1)
		ops = append(ops, clientv3.OpPut(t.e.commitKey, strconv.FormatUint(seq, 10), clientv3.WithLease(t.e.lease)))
	}
	t.e.feed.committing.RLock()
	resp, abandoned, applied, err := t.e.sendCommit(ctx, cancel, cmps, ops, seq)
	if abandoned {
		t.e.feed.committing.RUnlock()
		t.e.log.Info("etcd leader changed under a commit; the commit marker tells", "applied", applied)
		if applied {
			t.committed, t.rev = true, 0 // at a revision no answer told
			return true, nil
		}
		return false, nil // lost with the old leader: run again
	}
	if err == nil && resp.Succeeded {
		t.rev = resp.Header.Revision
		t.committed = true
		t.e.feed.own(t.rev)
	}
	t.e.feed.committing.RUnlock()
	if err == nil {
		return resp.Succeeded, nil
	}
	if errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return false, fmt.Errorf("commit: %w: %v", errEtcdTooBig, err)
	}
	if seq == 0 || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// Not applied; with the lease lost (lease.go), not until it
		// is renewed.
		return false, fmt.Errorf("commit: %w", etcdErr(err))
	}
	// The answer was lost (a leader change, a connection cut): the
	// transaction may or may not have been applied, and running it again
	// blindly could apply it twice. The marker says which: a
	// linearizable read after the error sees every entry the cluster
	// will ever commit from before it.
	applied, cerr := t.e.applied(seq)
	t.e.log.Warn("etcd commit answer lost; the commit marker tells", "err", err, "applied", applied, "check_err", cerr)
	if cerr != nil {
		return false, fmt.Errorf("commit: outcome unknown after %v: %w", err, etcdErr(cerr))
	}
	if applied {
		// Applied at a revision no answer told: the cache keeps none
		// of the values (committedRev 0).
		t.committed, t.rev = true, 0
		return true, nil
	}
	return false, nil // not applied: run again, as after a conflict
}

// etcdCommitProbe is how long a commit waits for its answer before it
// asks whether the cluster has moved on without it (sendCommit), and
// then how often it asks again.
const etcdCommitProbe = 500 * time.Millisecond

// sendCommit sends a commit and waits for its answer. A commit sent to a
// follower whose leader dies with the proposal is lost, but the member
// answers only when its request timeout has passed (5 s and two election
// timeouts: the writes of a daemon paused 6-7 s when the leader was
// killed). So when the answer is late, and the commit carries this
// process's commit marker (seq), it asks with a linearizable read of the
// marker whether a leader of a later term than the one it sent under
// answers: that leader has committed, before it answers any read, every
// entry it will ever commit from the older terms, so the marker then
// tells for good whether the commit was applied. The request is then
// abandoned (abandoned, with applied). While no new leader answers, or
// the same one does (a slow commit, not a lost one), it goes on waiting.
func (e *etcdKV) sendCommit(ctx context.Context, cancel context.CancelFunc, cmps []clientv3.Cmp, ops []clientv3.Op, seq uint64) (resp *clientv3.TxnResponse, abandoned, applied bool, err error) {
	term := e.requests.term.Load()
	type answer struct {
		resp *clientv3.TxnResponse
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		r, err := e.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		ch <- answer{r, err}
	}()
	if seq == 0 || e.commitKey == "" {
		a := <-ch
		return a.resp, false, false, a.err
	}
	timer := time.NewTimer(etcdCommitProbe)
	defer timer.Stop()
	for {
		select {
		case a := <-ch:
			return a.resp, false, false, a.err
		case <-timer.C:
		}
		if moved, ok := e.probeCommit(seq, term); moved {
			cancel()
			if a := <-ch; a.err == nil {
				return a.resp, false, false, nil // answered meanwhile
			}
			return nil, true, ok, nil
		}
		timer.Reset(etcdCommitProbe / 2)
	}
}

// probeCommit reads the commit marker linearizably: moved reports that a
// leader of a term after term answered, applied that the commit that put
// seq is in.
func (e *etcdKV) probeCommit(seq, term uint64) (moved, applied bool) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdCommitProbe)
	defer cancel()
	resp, err := e.cli.Get(ctx, e.commitKey)
	if err != nil || term == 0 || resp.Header.RaftTerm <= term {
		return false, false
	}
	if len(resp.Kvs) == 0 {
		return true, false
	}
	got, perr := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
	return true, perr == nil && got >= seq
}

// applied reports whether the write transaction that put seq in the
// commit marker was applied, asking until the cluster answers or the
// request timeout has passed.
func (e *etcdKV) applied(seq uint64) (bool, error) {
	deadline := time.Now().Add(e.timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), min(e.timeout, 2*time.Second))
		resp, err := e.cli.Get(ctx, e.commitKey)
		cancel()
		if err == nil {
			if len(resp.Kvs) == 0 {
				return false, nil
			}
			got, perr := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
			return perr == nil && got >= seq, nil
		}
		if time.Now().After(deadline) {
			return false, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// errEtcdTooBig is a transaction etcd refuses for its size (more than
// --max-txn-ops keys, or a request past --max-request-bytes); callers
// that can split their work do so (isTxnTooBig).
var errEtcdTooBig = errors.New("transaction too big for etcd")
