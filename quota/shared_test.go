package quota

import (
	"syscall"
	"testing"
	"time"

	"github.com/shedfs/shedfs"
)

// sharedLedger is a ledger other daemons share: others is what they hold
// allotted, mine this daemon's allotment, asks the transactions.
type sharedLedger struct {
	*ledger
	others, mine int64
	asks         int
}

func (l *sharedLedger) Shared() bool { return true }

func (l *sharedLedger) Allot(h shedfs.Holder, total, grow int64, admit func(u shedfs.Usage, lim shedfs.Limit, delta int64) error) error {
	l.asks++
	if admit != nil && grow > 0 {
		u, _ := l.Usage(h)
		lim, _ := l.GetLimit(h)
		u.Bytes += l.others + total - grow
		if err := admit(u, lim, grow); err != nil {
			return err
		}
	}
	l.mine = total
	return nil
}

// TestCoverShared: on a shared ledger, pending bytes are covered by a
// allotment grown by chunks, exactly near the limit, refused past it
// with the other daemons' allotments counted; writes within the
// allotment ask nothing; bytes persisted leave the allotment's room.
func TestCoverShared(t *testing.T) {
	l := &sharedLedger{ledger: newLedger(), others: 3 << 20}
	h := shedfs.Holder("group:g")
	l.limits[h] = shedfs.Limit{Bytes: 10 << 20}
	a := New(l)
	cover := func(n int64) bool {
		t.Helper()
		unlock := a.Lock(h)
		defer unlock()
		d, err := a.Cover(h, n)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed() {
			a.Add(h, n)
		} else if d.Errno != syscall.EDQUOT {
			t.Fatalf("refusal %v, want EDQUOT", d.Errno)
		}
		return d.Allowed()
	}
	if !cover(64<<10) || l.mine != AllotChunk || l.asks != 1 {
		t.Fatalf("first write: allotment %d after %d asks, want one chunk after 1", l.mine, l.asks)
	}
	for range 63 {
		cover(64 << 10)
	}
	if l.asks != 1 {
		t.Fatalf("4 MiB of writes asked %d times, want once", l.asks)
	}
	// 4 MiB pending + 3 MiB others: a second chunk (8 MiB) does not fit
	// under 10 MiB, exactly what is needed does.
	if !cover(64<<10) || l.mine != 4<<20+64<<10 {
		t.Fatalf("write past the chunk: allotment %d", l.mine)
	}
	for cover(1 << 20) {
	}
	if a.Pending(h)+l.others > 10<<20 {
		t.Fatalf("pending %d + others %d past the 10 MiB limit", a.Pending(h), l.others)
	}
	// Persisting moves bytes into the stored usage: the room they held
	// is not used again without asking. (Some stay pending, so the
	// allotment is not given back.)
	p := a.Pending(h) - 64<<10
	l.charge(h, p)
	a.Add(h, -p)
	for cover(64 << 10) {
	}
	u, _ := l.Usage(h)
	if u.Bytes+a.Pending(h)+l.others > 10<<20 {
		t.Fatalf("stored %d + pending %d + others %d past the 10 MiB limit", u.Bytes, a.Pending(h), l.others)
	}
}

// TestLeaseRenewedShared: after the lease was lost (mine gone from the
// ledger), a allotment that still fits is put back whole; one that no
// longer fits (the others took the room) shrinks to the bytes pending,
// put back unadmitted, and the next write asks again.
func TestLeaseRenewedShared(t *testing.T) {
	l := &sharedLedger{ledger: newLedger(), others: 1 << 20}
	h := shedfs.Holder("group:g")
	l.limits[h] = shedfs.Limit{Bytes: 10 << 20}
	a := New(l)
	unlock := a.Lock(h)
	if d, err := a.Cover(h, 1<<20); err != nil || !d.Allowed() {
		t.Fatal(d, err)
	}
	a.Add(h, 1<<20)
	unlock()
	if l.mine != AllotChunk {
		t.Fatalf("allotment %d, want a chunk", l.mine)
	}
	l.mine = 0 // the lease went, and the allotment with it
	a.LeaseRenewed()
	if l.mine != AllotChunk {
		t.Errorf("renewed with room left: allotment %d, want the chunk back", l.mine)
	}
	l.mine, l.others = 0, 9<<20+512<<10 // the others used the room meanwhile
	a.LeaseRenewed()
	if l.mine != 1<<20 {
		t.Errorf("renewed without room: allotment %d, want the 1 MiB pending", l.mine)
	}
	asks := l.asks
	unlock = a.Lock(h)
	d, err := a.Cover(h, 1)
	unlock()
	if err != nil || d.Allowed() || l.asks == asks {
		t.Errorf("a write after the shrunk renewal: %v %v after %d new asks, want EDQUOT after asking", d, err, l.asks-asks)
	}
}

// TestAllotmentGivenBackWhenIdle: once nothing is pending, the
// allotment stays for AllotIdle (the next small file asks nothing)
// and then goes, also when persisting used up all of its room here (an
// exact allotment near the limit, which used to stay in the store).
func TestAllotmentGivenBackWhenIdle(t *testing.T) {
	for _, limit := range []int64{1 << 30, 100 << 10} {
		l := &sharedLedger{ledger: newLedger()}
		h := shedfs.Holder("group:g")
		l.limits[h] = shedfs.Limit{Bytes: limit}
		a := New(l)
		unlock := a.Lock(h)
		if d, err := a.Cover(h, 64<<10); err != nil || !d.Allowed() {
			t.Fatalf("limit %d: cover 64 KiB: %v %v", limit, d, err)
		}
		a.Add(h, 64<<10)
		unlock()
		// The file is persisted: its bytes move into the stored usage.
		l.charge(h, 64<<10)
		a.Add(h, -64<<10)
		unlock = a.Lock(h)
		if l.mine == 0 {
			t.Fatalf("limit %d: allotment given back at once", limit)
		}
		unlock()
		deadline := time.Now().Add(AllotIdle + 2*time.Second)
		for {
			unlock = a.Lock(h)
			mine := l.mine
			unlock()
			if mine == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("limit %d: allotment of %d still stored %v after nothing was pending", limit, mine, AllotIdle+2*time.Second)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
