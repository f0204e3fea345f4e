// Package audit turns the FUSE layer's events into the store's audit
// trail. It is its own package because it sits between two parts that must
// stay ignorant of each other's constraints: the callback path (fusefs)
// must never block on a disk write, so it hands events to a bounded queue
// and moves on; the store (metadata) must not know about queues, batching
// or retention schedules, so it only appends, queries and prunes records.
// The Recorder here owns the queue, the batch writer and the retention
// ticker, and counts every event it could not keep so that nothing is lost
// silently.
package audit

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// Defaults of Options, chosen for a busy daemon: a queue that absorbs a
// burst of tens of thousands of operations, a batch per 100 ms, and a
// trail that holds a month or a million records, whichever is smaller.
const (
	DefaultQueueSize         = 16384
	DefaultBatchSize         = 1000
	DefaultFlushInterval     = 100 * time.Millisecond
	DefaultRetentionInterval = time.Minute
	DefaultMaxAge            = 30 * 24 * time.Hour
	DefaultMaxRecords        = 1_000_000
)

// overflowLogEvery bounds how often a full queue is logged, so that an
// overflow storm does not also become a log storm.
const overflowLogEvery = 5 * time.Second

// Options tunes a Recorder. Zero fields take the defaults; a negative
// RetentionInterval, MaxAge or MaxRecords disables that part of retention.
type Options struct {
	// QueueSize is how many events may wait for the writer; beyond it,
	// events are dropped and counted.
	QueueSize int
	// BatchSize and FlushInterval bound how many events and how long the
	// writer gathers before one store transaction.
	BatchSize     int
	FlushInterval time.Duration
	// RetentionInterval is how often the trail is pruned to MaxAge and
	// MaxRecords.
	RetentionInterval time.Duration
	MaxAge            time.Duration
	MaxRecords        int
	Logger            *slog.Logger
	// Short reports that the store's disk is down to what its metadata
	// needs (space.Guard.Short): batches are then not written but
	// counted as failed, so that a storm of refusals on a full disk does
	// not fill the rest. Nil: never short.
	Short func() bool
}

func (o *Options) defaults() {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.RetentionInterval == 0 {
		o.RetentionInterval = DefaultRetentionInterval
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxRecords == 0 {
		o.MaxRecords = DefaultMaxRecords
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Recorder is the shedfs.Recorder that keeps the audit trail. Record never
// blocks; a writer goroutine stores events in batches, and a retention
// goroutine prunes the trail. The counters are for the metrics: every
// Record call ends up in exactly one of Recorded or Dropped.
type Recorder struct {
	// appendAudit stores a batch: the store's AppendAudit, a stalled or
	// failing one in tests.
	appendAudit func([]metadata.AuditRecord) error
	store       *metadata.Store
	opts        Options
	log         *slog.Logger

	queue   chan shedfs.Event
	flushRq chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	pruned  chan struct{}

	closed   atomic.Bool
	inflight atomic.Int64

	recorded atomic.Uint64
	dropped  atomic.Uint64
	written  atomic.Uint64
	failed   atomic.Uint64
	pruneN   atomic.Uint64
	lastLog  atomic.Int64 // unix nanos of the last overflow log line

	// reported is how much of dropped the trail already tells about
	// (writer goroutine only).
	reported uint64

	closeOnce sync.Once
	closeErr  error
	errMu     sync.Mutex
	lastErr   error
}

var _ shedfs.Recorder = (*Recorder)(nil)

// New starts a Recorder writing to store. The caller closes the Recorder
// before the store.
func New(store *metadata.Store, opts Options) *Recorder {
	return newRecorder(store, opts, store.AppendAudit)
}

// newRecorder is New with the batch writer given, so tests can stall it.
func newRecorder(store *metadata.Store, opts Options, appendAudit func([]metadata.AuditRecord) error) *Recorder {
	opts.defaults()
	r := &Recorder{
		appendAudit: appendAudit,
		store:       store,
		opts:        opts,
		log:         opts.Logger,
		queue:       make(chan shedfs.Event, opts.QueueSize),
		flushRq:     make(chan chan struct{}),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		pruned:      make(chan struct{}),
	}
	go r.write()
	go r.retain()
	return r
}

// Record queues e for the trail. It never blocks: when the queue is full,
// or the Recorder is closed, the event is counted in Dropped and the
// overflow is logged (at most every few seconds) and later written to the
// trail as an audit_overflow record.
func (r *Recorder) Record(e shedfs.Event) {
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	if r.closed.Load() {
		r.drop("closed")
		return
	}
	select {
	case r.queue <- e:
		r.recorded.Add(1)
	default:
		r.drop("queue full")
	}
}

func (r *Recorder) drop(why string) {
	n := r.dropped.Add(1)
	r.logThrottled("audit events dropped", "why", why, "dropped_total", n, "queue_size", r.opts.QueueSize)
}

// logThrottled logs a warning at most every overflowLogEvery, so that a
// storm does not also become a log storm.
func (r *Recorder) logThrottled(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := r.lastLog.Load()
	if now-last >= int64(overflowLogEvery) && r.lastLog.CompareAndSwap(last, now) {
		r.log.Warn(msg, args...)
	}
}

// short reports whether the store's disk has no room for the trail.
func (r *Recorder) short() bool { return r.opts.Short != nil && r.opts.Short() }

// Recorded is how many events entered the queue.
func (r *Recorder) Recorded() uint64 { return r.recorded.Load() }

// Dropped is how many events were lost because the queue was full (or the
// Recorder closed).
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// Written is how many events are stored in the trail (overflow records
// not counted).
func (r *Recorder) Written() uint64 { return r.written.Load() }

// Failed is how many queued events were lost: refused by the store until
// Close, or beyond QueueSize while it refused them (refused records are
// kept and written again, so a lease that is lost and renewed loses
// none), or not written because its disk was full (Options.Short); each
// loss is logged.
func (r *Recorder) Failed() uint64 { return r.failed.Load() }

// Pruned is how many records retention has removed.
func (r *Recorder) Pruned() uint64 { return r.pruneN.Load() }

// QueueLen is how many events wait for the writer now.
func (r *Recorder) QueueLen() int { return len(r.queue) }

// QueueCap is the queue's capacity.
func (r *Recorder) QueueCap() int { return cap(r.queue) }

// Flush returns once every event queued before the call is stored. It is
// for tests and for readers that want to see their own operations; the
// callback path never calls it.
func (r *Recorder) Flush() error {
	if r.closed.Load() {
		return r.err()
	}
	done := make(chan struct{})
	select {
	case r.flushRq <- done:
		<-done
	case <-r.done:
	}
	return r.err()
}

// Close stops taking events, stores everything queued (and an overflow
// record if anything was dropped), stops retention and returns the last
// storage error, if any. The store stays open.
func (r *Recorder) Close() error {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		// A Record that passed the closed check may still be sending;
		// it never blocks, so this wait is short.
		for r.inflight.Load() > 0 {
			time.Sleep(10 * time.Microsecond)
		}
		close(r.stop)
		<-r.done
		<-r.pruned
		r.closeErr = r.err()
	})
	return r.closeErr
}

func (r *Recorder) setErr(err error) {
	r.errMu.Lock()
	r.lastErr = err
	r.errMu.Unlock()
}

func (r *Recorder) err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.lastErr
}

// write is the writer goroutine: it gathers events into batches and
// stores them, and tells the trail about drops once the queue has room
// again.
func (r *Recorder) write() {
	defer close(r.done)
	batch := make([]metadata.AuditRecord, 0, r.opts.BatchSize)
	// held are records the store refused (a shared store refuses every
	// write while this daemon's lease is gone, or without quorum): kept,
	// in order, and written again on every flush until it takes them.
	var held []metadata.AuditRecord
	tick := time.NewTicker(r.opts.FlushInterval)
	defer tick.Stop()
	flush := func() {
		if len(batch) > 0 && r.short() {
			r.failed.Add(uint64(len(batch)))
			r.logThrottled("audit records not written: the store's disk is full", "records", len(batch))
			batch = batch[:0]
		}
		if len(held) > 0 && !r.short() {
			held = r.writeHeld(held)
		}
		if len(batch) > 0 {
			if len(held) > 0 {
				// The store still refuses: keep the order.
				held = r.hold(held, batch)
			} else if err := r.appendAudit(batch); err != nil {
				r.setErr(err)
				r.logThrottled("audit trail: the store refused records; they are kept and written again", "records", len(batch), "err", err)
				held = r.hold(held, batch)
			} else {
				r.written.Add(uint64(len(batch)))
			}
			batch = batch[:0]
		}
		if len(r.queue) == 0 && len(held) == 0 {
			r.reportOverflow()
		}
	}
	// drain moves what is queued now into batches.
	drain := func() {
		for {
			select {
			case e := <-r.queue:
				batch = append(batch, recordOf(e))
				if len(batch) >= r.opts.BatchSize {
					flush()
				}
			default:
				return
			}
		}
	}
	for {
		select {
		case e := <-r.queue:
			batch = append(batch, recordOf(e))
			if len(batch) >= r.opts.BatchSize {
				flush()
			}
		case <-tick.C:
			flush()
		case done := <-r.flushRq:
			drain()
			flush()
			close(done)
		case <-r.stop:
			drain()
			flush()
			if len(held) > 0 {
				r.failed.Add(uint64(len(held)))
				r.log.Error("audit trail: records lost, the store refused them until the end", "records", len(held), "err", r.err())
				return
			}
			r.reportOverflow()
			return
		}
	}
}

// hold adds recs to the records the store refused, keeping at most
// QueueSize of them: beyond that the oldest are lost, counted in Failed
// and logged.
func (r *Recorder) hold(held, recs []metadata.AuditRecord) []metadata.AuditRecord {
	held = append(held, recs...)
	if over := len(held) - r.opts.QueueSize; over > 0 {
		r.failed.Add(uint64(over))
		r.log.Error("audit trail: records lost, too many kept while the store refused them", "records", over, "kept", r.opts.QueueSize, "err", r.err())
		held = append(held[:0:0], held[over:]...)
	}
	return held
}

// writeHeld writes the records the store refused, in batches, and returns
// those it still refuses. Once all are written the error they left is
// cleared: nothing was lost.
func (r *Recorder) writeHeld(held []metadata.AuditRecord) []metadata.AuditRecord {
	for len(held) > 0 {
		n := min(len(held), r.opts.BatchSize)
		if err := r.appendAudit(held[:n]); err != nil {
			r.setErr(err)
			return held
		}
		r.written.Add(uint64(n))
		held = held[n:]
	}
	r.log.Info("audit trail: the records kept while the store refused them are written")
	r.setErr(nil)
	return nil
}

// reportOverflow writes one audit_overflow record for the events dropped
// since the last one, so the trail says what it misses.
func (r *Recorder) reportOverflow() {
	total := r.dropped.Load()
	n := total - r.reported
	if n == 0 || r.short() {
		return
	}
	rec := metadata.AuditRecord{
		Time:    time.Now(),
		User:    shedfs.NoUser,
		Op:      metadata.OpAuditOverflow,
		Result:  "dropped",
		Rule:    fmt.Sprintf("audit queue full (%d slots): %d events not recorded", r.opts.QueueSize, n),
		Dropped: n,
	}
	if err := r.appendAudit([]metadata.AuditRecord{rec}); err != nil {
		r.setErr(err)
		r.log.Error("audit trail: cannot record overflow", "dropped", n, "err", err)
		return
	}
	r.reported = total
	r.log.Warn("audit overflow recorded in the trail", "dropped", n, "dropped_total", total)
}

// retain is the retention goroutine. It runs apart from the writer so
// that a long prune never holds back the queue.
func (r *Recorder) retain() {
	defer close(r.pruned)
	if r.opts.RetentionInterval < 0 || (r.opts.MaxAge < 0 && r.opts.MaxRecords < 0) {
		<-r.stop
		return
	}
	tick := time.NewTicker(r.opts.RetentionInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if _, err := r.Prune(); err != nil {
				r.log.Error("audit retention", "err", err)
			}
		case <-r.stop:
			return
		}
	}
}

// Prune applies the retention limits now and returns how many records it
// removed. The retention goroutine calls it on every tick.
func (r *Recorder) Prune() (int, error) {
	n, err := r.store.PruneAudit(max(r.opts.MaxAge, 0), max(r.opts.MaxRecords, 0))
	r.pruneN.Add(uint64(n))
	if n > 0 {
		r.log.Info("audit retention pruned the trail", "removed", n, "max_age", r.opts.MaxAge, "max_records", r.opts.MaxRecords)
	}
	if err != nil {
		return n, fmt.Errorf("audit retention: %w", err)
	}
	return n, nil
}

// recordOf turns a FUSE event into a trail record: the result is "ok" or
// the errno's name, the zone its unambiguous form.
func recordOf(e shedfs.Event) metadata.AuditRecord {
	return metadata.AuditRecord{
		Time:   e.Time,
		User:   e.User,
		View:   e.User,
		Zone:   e.Zone.String(),
		Path:   e.Path,
		Op:     e.Op,
		Result: Result(e.Errno),
		Rule:   e.Reason,
		Bytes:  e.Bytes,
		Link:   e.Link,
		Client: e.Client,
		SHA256: e.SHA256,
		Scan:   e.Scan,

		Session: e.Session,
		Door:    e.Door,

		Token:       e.Token,
		TokenReason: e.TokenReason,
	}
}

// Result names an errno as the trail shows it: "ok" for none, "EACCES"
// and the like otherwise.
func Result(errno unix.Errno) string {
	if errno == 0 {
		return metadata.ResultOK
	}
	if name := unix.ErrnoName(errno); name != "" {
		return name
	}
	return fmt.Sprintf("errno %d", int(errno))
}
