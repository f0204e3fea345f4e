package objstore

import (
	"context"
	"errors"
	"io"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what the bucket carried and how often it failed. It is
// a prometheus.Collector that the caller registers; a nil *Metrics counts
// nothing.
type Metrics struct {
	uploaded   prometheus.Counter
	downloaded prometheus.Counter
	errors     *prometheus.CounterVec
}

// Ops are the values of the op label of shedfs_bucket_errors_total.
var Ops = []string{"put", "get", "stat", "delete", "list"}

// NewMetrics creates the bucket families, unregistered.
func NewMetrics() *Metrics {
	m := &Metrics{
		uploaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shedfs_bucket_upload_bytes_total",
			Help: "Object bytes sent to the bucket (a failed upload counts what was sent).",
		}),
		downloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shedfs_bucket_download_bytes_total",
			Help: "Object bytes read from the bucket.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_bucket_errors_total",
			Help: "Bucket requests that failed, by op (put, get, stat, delete, list); a missing object and a request the caller cancelled are not failures.",
		}, []string{"op"}),
	}
	for _, op := range Ops {
		m.errors.WithLabelValues(op)
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.uploaded.Describe(ch)
	m.downloaded.Describe(ch)
	m.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.uploaded.Collect(ch)
	m.downloaded.Collect(ch)
	m.errors.Collect(ch)
}

// failed counts err as a failure of op unless it is none, a missing
// object, or the caller's cancellation; it returns err.
func (m *Metrics) failed(op string, err error) error {
	if m == nil || err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, context.Canceled) {
		return err
	}
	m.errors.WithLabelValues(op).Inc()
	return err
}

func (m *Metrics) addUploaded(n int) {
	if m != nil && n > 0 {
		m.uploaded.Add(float64(n))
	}
}

func (m *Metrics) addDownloaded(n int) {
	if m != nil && n > 0 {
		m.downloaded.Add(float64(n))
	}
}

// uploadReader counts the bytes the client reads from an upload's body.
// It is only an io.Reader, whatever it wraps: the SDK then streams it
// once and never seeks back to hash or resend it.
type uploadReader struct {
	r io.Reader
	m *Metrics
}

func (u *uploadReader) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	u.m.addUploaded(n)
	return n, err
}

// downloadBody counts the bytes read from a GET's body, and a failure
// while reading it as a failed get.
type downloadBody struct {
	body io.ReadCloser
	m    *Metrics
}

func (d *downloadBody) Read(p []byte) (int, error) {
	n, err := d.body.Read(p)
	d.m.addDownloaded(n)
	if err != nil && err != io.EOF {
		d.m.failed("get", err)
	}
	return n, err
}

func (d *downloadBody) Close() error { return d.body.Close() }
