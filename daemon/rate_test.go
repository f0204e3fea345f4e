package daemon

import (
	"testing"
	"time"

	"sync/atomic"
)

// TestRequestRate checks the rate against a registry whose request counter
// the test moves, and that a nil rate reads as nil.
func TestRequestRate(t *testing.T) {
	var c atomic.Uint64
	c.Add(10)
	r := newRequestRate(c.Load)
	defer r.close()
	c.Add(30)
	c.Add(60)
	time.Sleep(20 * time.Millisecond)
	got := r.current()
	if got.Total != 100 {
		t.Errorf("total %d, want 100", got.Total)
	}
	if got.WindowSeconds <= 0 || got.PerSecond <= 0 || got.PerSecond*got.WindowSeconds < 89 || got.PerSecond*got.WindowSeconds > 91 {
		t.Errorf("rate %+v: want 90 requests over the window", got)
	}
	// Samples older than the window go, but one is always kept.
	r.mu.Lock()
	old := time.Now().Add(-3 * rateWindow)
	r.samples = []rateSample{{at: old, total: 0}, {at: old.Add(time.Second), total: 0}, {at: time.Now().Add(-rateWindow - time.Second), total: 40}}
	r.mu.Unlock()
	got = r.current()
	if got.WindowSeconds < rateWindow.Seconds() || got.WindowSeconds > rateWindow.Seconds()+5 {
		t.Errorf("window %.1fs, want just over %v", got.WindowSeconds, rateWindow)
	}
	if want := 60 / got.WindowSeconds; got.PerSecond < want*0.99 || got.PerSecond > want*1.01 {
		t.Errorf("rate %.3f/s, want %.3f/s", got.PerSecond, want)
	}
	var none *requestRate
	if none.current() != nil {
		t.Error("a daemon without metrics has a request rate")
	}
}
