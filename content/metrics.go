package content

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the content families (README, "Content"): scans by result,
// scan latency, the queue, the quarantine, whether clamd answers, and
// the hashing done. A nil *Metrics counts nothing.
type Metrics struct {
	scans       *prometheus.CounterVec
	latency     prometheus.Histogram
	queue       prometheus.Gauge
	quarantined prometheus.Gauge
	up          prometheus.Gauge
	hashedFiles prometheus.Counter
	hashedBytes prometheus.Counter
}

// ScanResults are the values of the result label of shedfs_scans_total.
var ScanResults = []string{"clean", "infected", "error", "unreachable"}

// NewMetrics creates and registers the content families. shedfs_clamd_up
// is registered only with a clamd (clamd): without one there is nothing
// to be up or down, and no series says so, not a 1.
func NewMetrics(reg prometheus.Registerer, clamd bool) (*Metrics, error) {
	m := &Metrics{
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_scans_total",
			Help: "Scans by clamd, by result (clean, infected, error: clamd refused the file, unreachable: no answer).",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shedfs_scan_duration_seconds",
			Help:    "Time of one scan by clamd, content streaming included.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 4, 9),
		}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shedfs_content_queue_length",
			Help: "Files waiting in memory for their digest and scan (more may wait in the store when it ran over).",
		}),
		quarantined: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shedfs_quarantined_files",
			Help: "Files found infected and not released or deleted.",
		}),
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shedfs_clamd_up",
			Help: "1 when the last scan reached clamd, 0 when it did not.",
		}),
		hashedFiles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shedfs_content_digests_total",
			Help: "Files whose SHA-256 the background queue computed.",
		}),
		hashedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shedfs_content_digest_bytes_total",
			Help: "Bytes read by the background queue to hash and scan.",
		}),
	}
	for _, r := range ScanResults {
		m.scans.WithLabelValues(r)
	}
	cs := []prometheus.Collector{m.scans, m.latency, m.queue, m.quarantined, m.hashedFiles, m.hashedBytes}
	if clamd {
		m.up.Set(1)
		cs = append(cs, m.up)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) scanned(result string, d time.Duration) {
	if m == nil {
		return
	}
	m.scans.WithLabelValues(result).Inc()
	m.latency.Observe(d.Seconds())
}

// setUp sets shedfs_clamd_up; without a clamd the gauge is unregistered
// and setting it shows nowhere.
func (m *Metrics) setUp(up bool) {
	if m == nil {
		return
	}
	if up {
		m.up.Set(1)
	} else {
		m.up.Set(0)
	}
}

func (m *Metrics) setQueue(n int) {
	if m != nil {
		m.queue.Set(float64(n))
	}
}

func (m *Metrics) setQuarantined(n int) {
	if m != nil {
		m.quarantined.Set(float64(n))
	}
}

func (m *Metrics) hashed(bytes uint64) {
	if m != nil {
		m.hashedFiles.Inc()
		m.hashedBytes.Add(float64(bytes))
	}
}
