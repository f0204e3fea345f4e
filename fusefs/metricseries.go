package fusefs

import (
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shedfs/shedfs"
)

// requestSeries keeps the resolved children of the per-request families,
// so that counting a request is one map read under a read lock instead of
// prometheus hashing and checking three label values and taking the
// vector's lock twice on every request (track runs on every FUSE request:
// about 190,000 of them for an untar of the Go tree). A child is made on
// the first request that needs it, as WithLabelValues made it before, so
// /metrics shows the same series with the same values.
type requestSeries struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	mu sync.RWMutex
	by map[seriesKey]series
}

// seriesKey is one (op, zone kind, result) of shedfs_fuse_requests_total.
type seriesKey struct {
	op    string
	kind  shedfs.ZoneKind
	errno syscall.Errno
}

// series is the counter of one seriesKey and the histogram of its op.
type series struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

func newRequestSeries(requests *prometheus.CounterVec, duration *prometheus.HistogramVec) *requestSeries {
	return &requestSeries{requests: requests, duration: duration, by: make(map[seriesKey]series)}
}

// of returns the children for op in zone z with result errno.
func (r *requestSeries) of(op string, z shedfs.Zone, errno syscall.Errno) series {
	k := seriesKey{op: op, kind: z.Kind, errno: errno}
	r.mu.RLock()
	s, ok := r.by[k]
	r.mu.RUnlock()
	if ok {
		return s
	}
	s = series{
		count:    r.requests.WithLabelValues(op, zoneLabel(z), resultLabel(errno)),
		duration: r.duration.WithLabelValues(op),
	}
	r.mu.Lock()
	r.by[k] = s
	r.mu.Unlock()
	return s
}
