package daemon

import (
	"sync"
	"time"
)

// The request rate of shedfs status is sampled from the FUSE layer's
// request counter (one atomic add per request), with or without --metrics.
const (
	// rateEvery is how often the request counter is sampled.
	rateEvery = 5 * time.Second
	// rateWindow is the span the rate is averaged over.
	rateWindow = time.Minute
)

// rateSample is the request counter at one time.
type rateSample struct {
	at    time.Time
	total uint64
}

// requestRate keeps the last rateWindow of samples of the request counter.
type requestRate struct {
	gather func() uint64
	start  rateSample

	mu      sync.Mutex
	samples []rateSample // oldest first, none older than rateWindow

	stop chan struct{}
	done chan struct{}
}

// newRequestRate starts sampling the request counter total.
func newRequestRate(total func() uint64) *requestRate {
	r := &requestRate{
		gather: total,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	r.start = rateSample{at: time.Now()}
	r.start.total = r.gather()
	r.samples = []rateSample{r.start}
	go r.run()
	return r
}

func (r *requestRate) run() {
	defer close(r.done)
	tick := time.NewTicker(rateEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			r.sample()
		case <-r.stop:
			return
		}
	}
}

// sample adds the counter now and forgets samples older than the window,
// always keeping one to measure from. It returns the new sample.
func (r *requestRate) sample() rateSample {
	total := r.gather()
	s := rateSample{at: time.Now(), total: total}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, s)
	i := 0
	for i < len(r.samples)-1 && s.at.Sub(r.samples[i+1].at) >= rateWindow {
		i++
	}
	r.samples = r.samples[i:]
	return s
}

// current is the rate over the last window up to now; nil on a nil r.
func (r *requestRate) current() *RequestRate {
	if r == nil {
		return nil
	}
	now := r.sample()
	r.mu.Lock()
	from := r.samples[0]
	r.mu.Unlock()
	out := &RequestRate{Total: now.total}
	if dt := now.at.Sub(from.at).Seconds(); dt > 0 && now.total >= from.total {
		out.PerSecond = float64(now.total-from.total) / dt
		out.WindowSeconds = dt
	}
	return out
}

// close stops sampling.
func (r *requestRate) close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}
