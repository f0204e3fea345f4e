package fusefs

import (
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
)

// Metrics are the Prometheus families the callback path feeds
// (docs/design.md, "Observability"). Label values are bounded: operation names, zone
// kinds (never paths or principals), errno names and acl reasons.
type Metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	bytesRead    *prometheus.CounterVec
	bytesWritten *prometheus.CounterVec
	denials      *prometheus.CounterVec
	// trashFreed counts kept files that went for good (trash.go).
	trashFreed *prometheus.CounterVec
	// locksLost counts locks lost with the lease (vfs/filelocks_lost.go).
	locksLost prometheus.Counter
	// kernelEntries and memoryLimit are the entries the views' kernels
	// hold and the soft memory limit set for them (memlimit.go).
	kernelEntries, memoryLimit prometheus.Gauge

	// perRequest holds the resolved children of requests and duration
	// (metricseries.go); readBy and writtenBy those of the byte counters
	// per zone kind, made at the start.
	perRequest        *requestSeries
	readBy, writtenBy [shedfs.ZoneGroup + 1]prometheus.Counter
}

// NewMetrics creates the callback-path families and registers them.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_fuse_requests_total",
			Help: "FUSE requests served, by operation, zone kind and result (ok or errno name).",
		}, []string{"op", "zone", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shedfs_fuse_request_duration_seconds",
			Help: "Time spent in the daemon per FUSE request, by operation.",
			// 1µs to ~4s: a cached getattr is microseconds, an fsync
			// of a large file can take seconds.
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12),
		}, []string{"op"}),
		bytesRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_bytes_read_total",
			Help: "Bytes read through the daemon, by zone kind.",
		}, []string{"zone"}),
		bytesWritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_bytes_written_total",
			Help: "Bytes written, by zone kind.",
		}, []string{"zone"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shedfs_denials_total",
			Help: "Operations refused by the sandbox policy, by rule.",
		}, []string{"reason"}),
	}
	for _, r := range acl.Reasons() {
		m.denials.WithLabelValues(r)
	}
	// Every series exists from the start, so rate() sees the first bytes.
	for k := shedfs.ZonePrivate; k <= shedfs.ZoneGroup; k++ {
		m.readBy[k] = m.bytesRead.WithLabelValues(k.String())
		m.writtenBy[k] = m.bytesWritten.WithLabelValues(k.String())
	}
	m.kernelEntries = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shedfs_fuse_kernel_entries",
		Help: "Entries the views' kernels hold (their lookup counts summed), each a node in the daemon's memory.",
	})
	m.memoryLimit = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shedfs_memory_limit_bytes",
		Help: "Soft memory limit of the daemon's Go heap: --memory-limit raised by the mounted views' read buffers and the nodes their kernels hold, up to --memory-limit-max (0 when not set).",
	})
	m.perRequest = newRequestSeries(m.requests, m.duration)
	m.trashFreed = newTrashFreed()
	m.locksLost = newLocksLost()
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.bytesRead, m.bytesWritten, m.denials, m.trashFreed, m.locksLost, m.kernelEntries, m.memoryLimit} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// zoneLabel is the bounded label of a zone: its kind.
func zoneLabel(z shedfs.Zone) string {
	if z.Kind == shedfs.ZoneNone {
		return "none"
	}
	return z.Kind.String()
}

// resultLabel is "ok" or the errno's name (EACCES, ENOENT, ...).
func resultLabel(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return "errno"
}

// track counts one request when it returns. Callbacks call it deferred
// with a pointer to their errno result.
func (f *FS) track(op string, z shedfs.Zone, start time.Time, errno *syscall.Errno) {
	f.requests.Add(1)
	m := f.opts.Metrics
	if m == nil {
		return
	}
	s := m.perRequest.of(op, z, *errno)
	s.count.Inc()
	s.duration.Observe(time.Since(start).Seconds())
}

// Requests counts every FUSE request served, with or without Prometheus
// metrics, so that status can show a rate.
func (f *FS) Requests() uint64 { return f.requests.Load() }

func (f *FS) countRead(z shedfs.Zone, n int) {
	if m := f.opts.Metrics; m != nil && n > 0 {
		m.zoneCounter(&m.readBy, m.bytesRead, z).Add(float64(n))
	}
}

func (f *FS) countWrite(z shedfs.Zone, n int) {
	if m := f.opts.Metrics; m != nil && n > 0 {
		m.zoneCounter(&m.writtenBy, m.bytesWritten, z).Add(float64(n))
	}
}

// zoneCounter is the child of vec for z's kind: the one made at the
// start, or (a zone without a kind) looked up.
func (m *Metrics) zoneCounter(by *[shedfs.ZoneGroup + 1]prometheus.Counter, vec *prometheus.CounterVec, z shedfs.Zone) prometheus.Counter {
	if int(z.Kind) < len(by) && by[z.Kind] != nil {
		return by[z.Kind]
	}
	return vec.WithLabelValues(zoneLabel(z))
}

func (f *FS) countDenial(reason string) {
	if m := f.opts.Metrics; m != nil {
		m.denials.WithLabelValues(reason).Inc()
	}
}

// StoreCollector exports the state of the store and the daemon as gauges
// read at scrape time: views, open files, quota usage and limits per
// holder (at most maxHolders of them, so a store with many users cannot
// blow up the series count) and the metadata's size: badger's on an
// embedded store, etcd's on a store on etcd (no badger gauges there,
// which would read 0).
type StoreCollector struct {
	fs         *FS
	maxHolders int

	views, openFiles, quotaBytes, quotaInodes, lsm, vlog, engineRequests, commits *prometheus.Desc
	etcdKeys, etcdDB                                                              *prometheus.Desc
}

// NewStoreCollector returns a collector for f; register it once.
func NewStoreCollector(f *FS, maxHolders int) *StoreCollector {
	return &StoreCollector{
		fs:          f,
		maxHolders:  maxHolders,
		views:       prometheus.NewDesc("shedfs_views", "Views mounted by this daemon.", nil, nil),
		openFiles:   prometheus.NewDesc("shedfs_open_files", "Inodes with at least one open handle.", nil, nil),
		quotaBytes:  prometheus.NewDesc("shedfs_quota_bytes", "Bytes charged to a quota holder (kind used, of which trash: kept files) and its limit (0: unlimited).", []string{"holder", "kind"}, nil),
		quotaInodes: prometheus.NewDesc("shedfs_quota_inodes", "Inodes charged to a quota holder (kind used, of which trash: kept files) and its limit (0: unlimited).", []string{"holder", "kind"}, nil),
		lsm:         prometheus.NewDesc("shedfs_badger_lsm_bytes", "Size of badger's LSM tree on disk.", nil, nil),
		vlog:        prometheus.NewDesc("shedfs_badger_vlog_bytes", "Size of badger's value log on disk.", nil, nil),
		// What a FUSE operation costs on etcd is mostly its round trips.
		engineRequests: prometheus.NewDesc("shedfs_etcd_requests_total", "Requests sent to etcd (round trips), by kind: Range, Txn, Put, DeleteRange, Lease...", []string{"kind"}, nil),
		commits:        prometheus.NewDesc("shedfs_store_commits_total", "Transactions committed to the metadata store (namespace changes and audit batches).", nil, nil),
		etcdKeys:       prometheus.NewDesc("shedfs_etcd_keys", "Keys the store has on etcd (--meta).", nil, nil),
		etcdDB:         prometheus.NewDesc("shedfs_etcd_db_bytes", "Size of the etcd cluster's database (every store on it; kind size or in_use), as the first member to answer says.", []string{"kind"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.views, c.openFiles, c.quotaBytes, c.quotaInodes, c.lsm, c.vlog, c.engineRequests, c.commits, c.etcdKeys, c.etcdDB} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.fs
	ch <- prometheus.MustNewConstMetric(c.views, prometheus.GaugeValue, float64(len(f.notify.all())))
	ch <- prometheus.MustNewConstMetric(c.openFiles, prometheus.GaugeValue, float64(f.OpenFiles()))
	if es, onEtcd, err := f.store.EtcdSize(); !onEtcd {
		lsm, vlog := f.store.EngineSize()
		ch <- prometheus.MustNewConstMetric(c.lsm, prometheus.GaugeValue, float64(lsm))
		ch <- prometheus.MustNewConstMetric(c.vlog, prometheus.GaugeValue, float64(vlog))
	} else if err != nil {
		f.log.Error("metrics: size of the store on etcd", "err", err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.etcdKeys, prometheus.GaugeValue, float64(es.Keys))
		ch <- prometheus.MustNewConstMetric(c.etcdDB, prometheus.GaugeValue, float64(es.DBBytes), "size")
		ch <- prometheus.MustNewConstMetric(c.etcdDB, prometheus.GaugeValue, float64(es.DBInUse), "in_use")
	}
	ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(f.store.Commits()))
	for kind, n := range f.store.EngineRequests() {
		ch <- prometheus.MustNewConstMetric(c.engineRequests, prometheus.CounterValue, float64(n), kind)
	}
	holders, err := f.store.Holders()
	if err != nil {
		f.log.Error("metrics: list holders", "err", err)
		return
	}
	// A session's usage is in its user's; sessions get no labels.
	holders = slices.DeleteFunc(holders, nestedHolder)
	if c.maxHolders > 0 && len(holders) > c.maxHolders {
		holders = holders[:c.maxHolders]
	}
	for _, h := range holders {
		u, err := f.acct.Usage(h)
		if err != nil {
			continue
		}
		l, err := f.store.GetLimit(h)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.quotaBytes, prometheus.GaugeValue, float64(u.Bytes), string(h), "used")
		ch <- prometheus.MustNewConstMetric(c.quotaBytes, prometheus.GaugeValue, float64(l.Bytes), string(h), "limit")
		ch <- prometheus.MustNewConstMetric(c.quotaInodes, prometheus.GaugeValue, float64(u.Inodes), string(h), "used")
		ch <- prometheus.MustNewConstMetric(c.quotaInodes, prometheus.GaugeValue, float64(l.Inodes), string(h), "limit")
		if t, err := f.store.TrashUsage(h); err == nil {
			// Part of "used": what the trash keeps, evicted first.
			ch <- prometheus.MustNewConstMetric(c.quotaBytes, prometheus.GaugeValue, float64(t.Bytes), string(h), "trash")
			ch <- prometheus.MustNewConstMetric(c.quotaInodes, prometheus.GaugeValue, float64(t.Inodes), string(h), "trash")
		}
	}
}

// StoreCollector returns the collector of the store gauges for f, for a
// daemon to register once.
func (f *FS) StoreCollector(maxHolders int) prometheus.Collector {
	return NewStoreCollector(f, maxHolders)
}
