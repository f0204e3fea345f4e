package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultMaxHolders caps the quota holders exported as metrics, so a store
// with many users cannot blow up the series count.
const DefaultMaxHolders = 200

// NewRegistry returns the registry a daemon exports: Go runtime and
// process collectors. The views add their callback-path families, and
// ServeMetrics the store gauges once the daemon exists.
func NewRegistry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return reg, nil
}

// MetricsServer serves /metrics, /healthz and /readyz (health.go) over
// HTTP.
type MetricsServer struct {
	srv *http.Server
	ln  net.Listener
}

// ServeMetrics registers the gauges of d's store and daemon in reg and
// serves reg at addr/metrics, and the probes /healthz and /readyz, until
// Shutdown.
func (d *Daemon) ServeMetrics(addr string, reg *prometheus.Registry, maxHolders int, profiling bool) (*MetricsServer, error) {
	if err := reg.Register(d.fs.StoreCollector(maxHolders)); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := d.registerSessionMetrics(reg); err != nil {
		return nil, err
	}
	if r := d.local.st.Blobs.Remote(); r != nil {
		if err := registerBucketMetrics(reg, r, d.local.st.BucketMetrics); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelError),
	}))
	mux.HandleFunc("/healthz", healthHandler)
	mux.HandleFunc("/readyz", d.readyHandler)
	if profiling {
		// Go's profiler, for finding where a slow callback spends its
		// time; only on request, as it shows the daemon's internals.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics server", "err", err)
		}
	}()
	d.log.Info("metrics listening", "addr", ln.Addr().String())
	return &MetricsServer{srv: srv, ln: ln}, nil
}

// Addr is where the server listens (useful with port 0).
func (m *MetricsServer) Addr() string { return m.ln.Addr().String() }

// Shutdown stops serving.
func (m *MetricsServer) Shutdown(ctx context.Context) error {
	return m.srv.Shutdown(ctx)
}

// AuditStats is what the audit recorder tells about itself.
type AuditStats interface {
	Recorded() uint64
	Dropped() uint64
	Written() uint64
	Failed() uint64
	QueueLen() int
	QueueCap() int
}

// RegisterAuditMetrics exports the audit recorder's counters, so an
// operator sees (and alerts on) a trail that drops events.
func RegisterAuditMetrics(reg prometheus.Registerer, a AuditStats) error {
	cs := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shedfs_audit_events_total", Help: "Audit events handed to the recorder."}, func() float64 { return float64(a.Recorded()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shedfs_audit_dropped_total", Help: "Audit events dropped because the queue was full (each drop is also reported in the trail)."}, func() float64 { return float64(a.Dropped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shedfs_audit_written_total", Help: "Audit records written to the store."}, func() float64 { return float64(a.Written()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shedfs_audit_write_failures_total", Help: "Audit records lost: refused by the store until the daemon stopped, or beyond the queue size while it refused them, or not written on a full disk."}, func() float64 { return float64(a.Failed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shedfs_audit_queue_length", Help: "Audit events waiting to be written."}, func() float64 { return float64(a.QueueLen()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shedfs_audit_queue_capacity", Help: "Size of the audit queue."}, func() float64 { return float64(a.QueueCap()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("audit metrics: %w", err)
		}
	}
	return nil
}
