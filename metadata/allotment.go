package metadata

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/shedfs/shedfs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bytes written to open files are charged to the store when the file is
// persisted (close, fsync); until then they are pending in the daemon
// that admitted them. With many daemons on one etcd store each publishes
// what it may have pending per holder as a allotment,
// <prefix>#reserve/<holder>/<daemon>, under its lease, grown in chunks by
// Allot: one transaction that reads the holder's usage, its limit and
// every other daemon's allotment, admits the growth against their sum,
// and puts the new allotment, all compared at commit. A daemon admits
// writes within its allotment without asking etcd; a dead daemon's
// allotments expire with its lease.

// etcdAllotPrefix is where the allotments of h live.
func etcdAllotPrefix(prefix string, h shedfs.Holder) string {
	return strings.TrimSuffix(prefix, "/") + "#reserve/" + string(h) + "/"
}

// allotTxn is a transaction that reads and writes allotments
// (etcdTxn; writeTxn forwards it).
type allotTxn interface {
	allotments(h shedfs.Holder) (others int64, err error)
	setAllotment(h shedfs.Holder, total int64)
}

// allotments sums the other daemons' allotments of h at the snapshot,
// recording what it read for the commit check.
func (t *etcdTxn) allotments(h shedfs.Holder) (int64, error) {
	from := etcdAllotPrefix(string(t.e.prefix), h)
	end := clientv3.GetPrefixRangeEnd(from)
	resp, err := t.get(from, end, 0)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		t.reads[k] = etcdRead{mod: kv.ModRevision}
		if k == from+t.e.id {
			continue
		}
		n, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("allotment %s: %w", k, ErrCorrupt)
		}
		sum += n
	}
	t.ranges = append(t.ranges, etcdRange{from: from, to: end})
	return sum, nil
}

// setAllotment buffers this daemon's allotment of h (0: none).
func (t *etcdTxn) setAllotment(h shedfs.Holder, total int64) {
	k := etcdAllotPrefix(string(t.e.prefix), h) + t.e.id
	if total <= 0 {
		t.writes[k] = etcdWrite{del: true}
		return
	}
	t.writes[k] = etcdWrite{val: []byte(strconv.FormatInt(total, 10)), leased: true}
}

func (t *writeTxn) allotments(h shedfs.Holder) (int64, error) {
	if r, ok := t.tx.(allotTxn); ok {
		return r.allotments(h)
	}
	return 0, nil
}

func (t *writeTxn) setAllotment(h shedfs.Holder, total int64) {
	if r, ok := t.tx.(allotTxn); ok {
		r.setAllotment(h, total)
	}
}

// Allot sets this daemon's allotment of h's bytes to total. Growing
// it is admitted by admit (nil: always) against h's stored usage plus the
// other daemons' allotments and h's limit, in the transaction that puts
// it; admit's error is returned as is. A no-op on a store no other daemon
// shares.
func (s *Store) Allot(h shedfs.Holder, total, grow int64, admit func(u shedfs.Usage, l shedfs.Limit, delta int64) error) error {
	if !s.Shared() || s.readOnly {
		return nil
	}
	return s.update(func(o *op) error {
		r, ok := o.tx.(allotTxn)
		if !ok {
			return nil
		}
		if admit != nil && grow > 0 {
			others, err := r.allotments(h)
			if err != nil {
				return err
			}
			u, l, err := o.quota(h)
			if err != nil {
				return err
			}
			u.Bytes += others + total - grow
			if err := admit(u, l, grow); err != nil {
				return err
			}
		}
		r.setAllotment(h, total)
		return nil
	})
}

// A daemon refused room that another holds allotted but does not use (a
// chunk it took and did not fill, or an allotment kept for AllotIdle
// after its files were closed) asks for it back: AskAllotments puts a
// request, <prefix>#want/<daemon> = holder, under its lease; every other
// daemon follows those requests (FollowWants) and answers each by putting
// its allotment of the holder again, shrunk to what it has pending, or
// deleting it when nothing is; AwaitAllotments waits for those answers.
// Then the refused daemon asks once more, exactly: what fits is admitted,
// and "exactly" holds across daemons, not only within one.

// etcdWantPrefix is where the requests for allotments given back live.
func etcdWantPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "#want/" }

// AskAllotments asks the other daemons to give back what they hold
// allotted of h beyond what they have pending. rev is the request's
// revision, for AwaitAllotments; held reports whether any other daemon
// holds an allotment of h (when none does there is nothing to wait
// for). A no-op on a store no other daemon shares.
func (s *Store) AskAllotments(h shedfs.Holder) (rev int64, held bool, err error) {
	e, ok := s.engine().(*etcdKV)
	if !ok || e.lease == 0 {
		return 0, false, nil
	}
	from := etcdAllotPrefix(string(e.prefix), h)
	ctx, cancel := e.ctx()
	defer cancel()
	resp, err := e.cli.Txn(ctx).Then(
		clientv3.OpPut(etcdWantPrefix(string(e.prefix))+e.id, string(h), clientv3.WithLease(e.lease)),
		clientv3.OpGet(from, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return 0, false, fmt.Errorf("ask for allotments of %s: %w", h, etcdErr(err))
	}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		if string(kv.Key) != from+e.id {
			held = true
		}
	}
	return resp.Header.Revision, held, nil
}

// AwaitAllotments waits until every other daemon holding an allotment of
// h has answered the request AskAllotments made at rev (put its
// allotment again, or deleted it), or ctx ends.
func (s *Store) AwaitAllotments(ctx context.Context, h shedfs.Holder, rev int64) error {
	e, ok := s.engine().(*etcdKV)
	if !ok || e.lease == 0 {
		return nil
	}
	from := etcdAllotPrefix(string(e.prefix), h)
	gctx, cancel := context.WithTimeout(ctx, e.timeout)
	resp, err := e.cli.Get(gctx, from, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		return fmt.Errorf("allotments of %s: %w", h, etcdErr(err))
	}
	waiting := make(map[string]bool)
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); k != from+e.id && kv.ModRevision <= rev {
			waiting[k] = true
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for wr := range e.cli.Watch(wctx, from, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("allotments of %s: %w", h, etcdErr(err))
		}
		for _, ev := range wr.Events {
			delete(waiting, string(ev.Kv.Key)) // put again or deleted: answered
		}
		if len(waiting) == 0 {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("allotments of %s: watch ended", h)
}

// FollowWants makes fn run (on a goroutine of the feed) whenever another
// daemon asks for the allotments of a holder (AskAllotments): fn gives
// back what this daemon holds beyond what it has pending. It does
// nothing on an embedded store.
func (s *Store) FollowWants(fn func(h shedfs.Holder)) {
	s.follow.wants.Store(&fn)
}
