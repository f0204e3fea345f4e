package quota

import (
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// ledger is a store's usage and limits in memory; commit moves pending
// bytes into the stored usage as a store transaction would.
type ledger struct {
	mu     sync.Mutex
	usage  map[shedfs.Holder]shedfs.Usage
	limits map[shedfs.Holder]shedfs.Limit
}

func newLedger() *ledger {
	return &ledger{usage: map[shedfs.Holder]shedfs.Usage{}, limits: map[shedfs.Holder]shedfs.Limit{}}
}

func (l *ledger) Usage(h shedfs.Holder) (shedfs.Usage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.usage[h], nil
}

func (l *ledger) GetLimit(h shedfs.Holder) (shedfs.Limit, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limits[h], nil
}

func (l *ledger) charge(h shedfs.Holder, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.usage[h]
	u.Bytes += bytes
	l.usage[h] = u
}

const mib = 1 << 20

// TestPendingInUsage: bytes held pending count in Usage and Quota, and in
// the admission of the next charge, until they are committed or released.
func TestPendingInUsage(t *testing.T) {
	led := newLedger()
	h := shedfs.Holder("user:alice")
	led.limits[h] = shedfs.Limit{Bytes: 4 * mib}
	a := New(led)

	// An open file grew by 3 MiB in a view: admitted and pending.
	unlock := a.Lock(h)
	u, l, err := a.Quota(h)
	if err != nil {
		t.Fatal(err)
	}
	if !acl.AdmitBytes(u, l, 3*mib).Allowed() {
		t.Fatal("3 MiB into an empty 4 MiB quota refused")
	}
	a.Add(h, 3*mib)
	unlock()
	if u, _ := a.Usage(h); u.Bytes != 3*mib {
		t.Errorf("usage with 3 MiB pending: %d", u.Bytes)
	}

	// 2 MiB more no longer fits.
	unlock = a.Lock(h)
	u, l, _ = a.Quota(h)
	if d := acl.AdmitBytes(u, l, 2*mib); d.Allowed() {
		t.Errorf("2 MiB admitted on top of 3 MiB pending in 4 MiB")
	} else if d.Errno != syscall.EDQUOT || d.Reason != acl.ReasonQuotaBytes {
		t.Errorf("refusal %v, want EDQUOT quota_bytes", d)
	}
	unlock()

	// 1 MiB does, and is pending until stored.
	unlock = a.Lock(h)
	u, l, _ = a.Quota(h)
	if !acl.AdmitBytes(u, l, 1*mib).Allowed() {
		t.Fatal("1 MiB refused")
	}
	a.Add(h, 1*mib)
	unlock()
	if u, _ := a.Usage(h); u.Bytes != 4*mib {
		t.Errorf("usage with 4 MiB pending: %d", u.Bytes)
	}
	unlock = a.Lock(h)
	led.charge(h, 1*mib)
	a.Add(h, -1*mib)
	unlock()
	if u, _ := a.Usage(h); u.Bytes != 4*mib || a.Pending(h) != 3*mib {
		t.Errorf("after commit: usage %d pending %d", u.Bytes, a.Pending(h))
	}

	// The file is closed: its pending bytes land.
	unlock = a.Lock(h)
	led.charge(h, 3*mib)
	a.Add(h, -3*mib)
	unlock()
	if u, _ := a.Usage(h); u.Bytes != 4*mib || a.Pending(h) != 0 {
		t.Errorf("after persist: usage %d pending %d", u.Bytes, a.Pending(h))
	}
}

// TestConcurrentAdmissions: writers (reserve under Lock, persist later)
// and transfers admitted in chunks race on one holder; at no
// moment do stored plus pending bytes pass the limit, and at the end
// nothing is left pending.
func TestConcurrentAdmissions(t *testing.T) {
	led := newLedger()
	h := shedfs.Holder("group:team")
	const limit = 64 * 4096
	led.limits[h] = shedfs.Limit{Bytes: limit}
	a := New(led)
	var admitted, refused atomic.Int64
	check := func() {
		u, _ := a.Usage(h)
		if u.Bytes > limit {
			t.Errorf("usage %d passed the limit %d", u.Bytes, limit)
		}
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				switch (w + i) % 3 {
				case 0: // a view's write, persisted at once
					unlock := a.Lock(h)
					u, l, _ := a.Quota(h)
					if acl.AdmitBytes(u, l, 4096).Allowed() {
						a.Add(h, 4096)
						admitted.Add(1)
					} else {
						refused.Add(1)
						unlock()
						continue
					}
					unlock()
					check()
					unlock = a.Lock(h)
					led.charge(h, 4096)
					a.Add(h, -4096)
					unlock()
				case 1: // a transfer admitted in two chunks, then stored
					held := int64(0)
					for range 2 {
						unlock := a.Lock(h)
						u, l, _ := a.Quota(h)
						if acl.AdmitBytes(u, l, 4096).Allowed() {
							a.Add(h, 4096)
							held += 4096
						}
						unlock()
					}
					if held < 8192 {
						a.Add(h, -held)
						refused.Add(1)
						continue
					}
					check()
					unlock := a.Lock(h)
					led.charge(h, held)
					a.Add(h, -held)
					unlock()
					admitted.Add(1)
				default: // a delete frees
					unlock := a.Lock(h)
					if u, _ := led.Usage(h); u.Bytes >= 8192 {
						led.charge(h, -8192)
					}
					unlock()
				}
				check()
			}
		}()
	}
	wg.Wait()
	if a.Pending(h) != 0 {
		t.Errorf("pending %d at the end", a.Pending(h))
	}
	if admitted.Load() == 0 || refused.Load() == 0 {
		t.Errorf("admitted %d, refused %d: the race never met the limit", admitted.Load(), refused.Load())
	}
}
