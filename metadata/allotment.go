package metadata

import (
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
