package metadata

import (
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bytes written to open files are charged to the store when the file is
// persisted (close, fsync); until then they are pending in the daemon
// that admitted them. With many daemons on one etcd store each publishes
// what it may have pending per holder as a reservation,
// <prefix>#reserve/<holder>/<daemon>, under its lease, grown in chunks by
// Reserve: one transaction that reads the holder's usage, its limit and
// every other daemon's reservation, admits the growth against their sum,
// and puts the new reservation, all compared at commit. A daemon admits
// writes within its reservation without asking etcd; a dead daemon's
// reservations expire with its lease.

// etcdReservePrefix is where the reservations of h live.
func etcdReservePrefix(prefix string, h Holder) string {
	return strings.TrimSuffix(prefix, "/") + "#reserve/" + string(h) + "/"
}

// reserveTxn is a transaction that reads and writes reservations
// (etcdTxn; writeTxn forwards it).
type reserveTxn interface {
	reservations(h Holder) (others int64, err error)
	setReservation(h Holder, total int64)
}

// reservations sums the other daemons' reservations of h at the snapshot,
// recording what it read for the commit check.
func (t *etcdTxn) reservations(h Holder) (int64, error) {
	from := etcdReservePrefix(string(t.e.prefix), h)
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
			return 0, fmt.Errorf("reservation %s: %w", k, ErrCorrupt)
		}
		sum += n
	}
	t.ranges = append(t.ranges, etcdRange{from: from, to: end})
	return sum, nil
}

// setReservation buffers this daemon's reservation of h (0: none).
func (t *etcdTxn) setReservation(h Holder, total int64) {
	k := etcdReservePrefix(string(t.e.prefix), h) + t.e.id
	if total <= 0 {
		t.writes[k] = etcdWrite{del: true}
		return
	}
	t.writes[k] = etcdWrite{val: []byte(strconv.FormatInt(total, 10)), leased: true}
}

func (t *writeTxn) reservations(h Holder) (int64, error) {
	if r, ok := t.tx.(reserveTxn); ok {
		return r.reservations(h)
	}
	return 0, nil
}

func (t *writeTxn) setReservation(h Holder, total int64) {
	if r, ok := t.tx.(reserveTxn); ok {
		r.setReservation(h, total)
	}
}

// Reserve sets this daemon's reservation of h's bytes to total. Growing
// it is admitted by admit (nil: always) against h's stored usage plus the
// other daemons' reservations and h's limit, in the transaction that puts
// it; admit's error is returned as is. A no-op on a store no other daemon
// shares.
func (s *Store) Reserve(h Holder, total, grow int64, admit func(u Usage, l Limit, delta int64) error) error {
	if !s.Shared() || s.readOnly {
		return nil
	}
	return s.update(func(o *op) error {
		r, ok := o.tx.(reserveTxn)
		if !ok {
			return nil
		}
		if admit != nil && grow > 0 {
			others, err := r.reservations(h)
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
		r.setReservation(h, total)
		return nil
	})
}
