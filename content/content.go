// Package content keeps what the store knows of every file's content
// beyond its bytes: a SHA-256 digest and a malware scan verdict. It owns
// the bounded background queue that a close after a write feeds (so the
// write path never hashes or scans), the persisted pending marks that let
// a restart resume that queue, the synchronous scan of an import, and the
// wait of an open for a verdict. The rule of who may open what is
// acl.OpenContent; this package only gathers what it needs.
package content

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/blobs"
	"github.com/shedfs/shedfs/metadata"
	"github.com/shedfs/shedfs/scan"
)

// Scanner gives a verdict on a stream; scan.Client is the real one.
type Scanner interface {
	Scan(ctx context.Context, r io.Reader) (scan.Verdict, error)
}

// Options configure a Service.
type Options struct {
	// Scanner is nil when no clamd is configured: nothing is scanned and
	// every file is unscanned.
	Scanner Scanner
	// ScanZone reports whether files of a zone are scanned; nil: all.
	ScanZone func(shedfs.Zone) bool
	// Wait is how long an open from another view waits for a verdict
	// (--scan-wait).
	Wait time.Duration
	// FailOpen opens files whose scan failed (--scan-fail-open), and
	// gives up on a file when clamd is unreachable instead of retrying.
	FailOpen bool
	// MaxSize: larger files are not scanned (--scan-max-size).
	MaxSize uint64
	// QueueSize bounds the in-memory queue; what does not fit stays in
	// the store and is read back when the queue drains.
	QueueSize int
	// Retry is the pause before a scan that failed to reach clamd is
	// tried again.
	Retry   time.Duration
	Logger  *slog.Logger
	Metrics *Metrics
}

// DefaultWait, DefaultMaxSize and DefaultQueueSize are the flag defaults.
const (
	DefaultWait      = 10 * time.Second
	DefaultMaxSize   = 100 << 20
	DefaultQueueSize = 65536
)

// Service is the content keeper of one store in one daemon.
type Service struct {
	store *metadata.Store
	blobs *blobs.Dir
	opts  Options
	log   *slog.Logger

	mu sync.Mutex
	// queue holds inode numbers in arrival order; queued the same as a
	// set (coalescing) with the audit callback of the close, if any.
	queue  []uint64
	queued map[uint64]func(shedfs.Content)
	// overflow: marks are pending in the store that the queue does not
	// hold (it was full, or the daemon just started).
	overflow bool
	wake     chan struct{}
	// verdicts is closed and replaced whenever a verdict is stored.
	verdicts chan struct{}

	quarantined atomic.Int64
	stop        chan struct{}
	done        chan struct{}
	started     bool
	closeOnce   sync.Once
}

// New prepares a Service; Start runs its worker.
func New(store *metadata.Store, blobDir *blobs.Dir, opts Options) *Service {
	if opts.Wait == 0 {
		opts.Wait = DefaultWait
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Retry == 0 {
		opts.Retry = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		store: store, blobs: blobDir, opts: opts, log: log,
		queued:   make(map[uint64]func(shedfs.Content)),
		overflow: true, // the store may hold marks of an earlier run
		wake:     make(chan struct{}, 1),
		verdicts: make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Start counts the quarantine and runs the worker until Close; the
// pending marks of an earlier run are taken up first.
func (s *Service) Start() error {
	q, err := s.store.Quarantine()
	if err != nil {
		return fmt.Errorf("read quarantine: %w", err)
	}
	s.quarantined.Store(int64(len(q)))
	s.opts.Metrics.setQuarantined(len(q))
	s.started = true
	go s.work()
	s.poke()
	return nil
}

// Close stops the worker. Whatever is still queued stays marked in the
// store for the next start; closes still waiting for their digest are
// recorded without it.
func (s *Service) Close() {
	s.closeOnce.Do(s.close)
}

func (s *Service) close() {
	close(s.stop)
	if s.started {
		<-s.done
	}
	s.mu.Lock()
	left := s.queued
	s.queued = make(map[uint64]func(shedfs.Content))
	s.queue = nil
	s.mu.Unlock()
	for _, fn := range left {
		if fn != nil {
			fn(shedfs.Content{State: shedfs.ScanPending})
		}
	}
}

// Scanning reports whether a scanner is configured.
func (s *Service) Scanning() bool { return s.opts.Scanner != nil }

// Changed queues ino after a change of its content was persisted (its
// pending mark is in the store). closed, when not nil, is called once
// with the content as the worker found it (the audit record of the
// write-close); when a newer change arrives first or the queue is full
// it is called at once with the content pending. Changed never blocks.
func (s *Service) Changed(ino uint64, closed func(shedfs.Content)) {
	s.mu.Lock()
	prev, ok := s.queued[ino]
	switch {
	case ok:
		s.queued[ino] = closed
	case len(s.queue) >= s.opts.QueueSize:
		s.overflow = true
		prev, closed = closed, nil
	default:
		s.queued[ino] = closed
		s.queue = append(s.queue, ino)
	}
	n := len(s.queue)
	s.mu.Unlock()
	s.opts.Metrics.setQueue(n)
	if prev != nil {
		prev(shedfs.Content{State: shedfs.ScanPending})
	}
	s.poke()
}

// Changing marks ino (zone z) pending by writer's view before the first
// byte of a change reaches its blob, in a zone whose files are scanned:
// from then on no other reader and no link is admitted by the verdict of
// the content before the change, which the change is about to make stale.
// The writer itself still reads what it writes (acl.OpenContent). A file
// pending already is left as it is. The mark is the one the close
// persists again with the new size, so the worker examines the file once.
func (s *Service) Changing(ino uint64, z shedfs.Zone, writer string) error {
	if !s.scans(z) {
		return nil
	}
	c, err := s.store.Content(ino)
	if err != nil {
		return fmt.Errorf("content of %d: %w", ino, err)
	}
	if c.State == shedfs.ScanPending {
		return nil
	}
	if err := s.store.MarkPending(ino, writer); err != nil {
		return fmt.Errorf("mark %d pending: %w", ino, err)
	}
	return nil
}

func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Content is what the open rule and the xattrs see of ino in zone z. A
// file the daemon does not scan is never pending for them.
func (s *Service) Content(ino uint64, z shedfs.Zone) (shedfs.Content, error) {
	c, err := s.store.Content(ino)
	if err != nil {
		return c, err
	}
	if c.State == shedfs.ScanPending && !s.scans(z) {
		c.State = shedfs.ScanUnscanned
	}
	return c, nil
}

// scanned reports whether a file of zone z and this size is scanned.
func (s *Service) scanned(z shedfs.Zone, size uint64) bool {
	return s.scans(z) && size <= s.opts.MaxSize
}

// Known is the content of a file of zone z whose size bytes the writer
// hashed as they were written (sum, the SHA-256), when that is all there
// is to know: no scan applies. The daemon then records it with the size it
// persists, and the worker never reads the file back. false: the file
// must be queued (Changed).
func (s *Service) Known(z shedfs.Zone, size uint64, sum []byte) (shedfs.Content, bool) {
	if s.scanned(z, size) {
		return shedfs.Content{}, false
	}
	return shedfs.Content{SHA256: hex.EncodeToString(sum), State: shedfs.ScanUnscanned}, true
}

// scans reports whether files of zone z are scanned.
func (s *Service) scans(z shedfs.Zone) bool {
	return s.opts.Scanner != nil && (s.opts.ScanZone == nil || s.opts.ScanZone(z))
}

// Admit decides whether user may open ino (zone z) now, by
// acl.OpenContent: a file pending for user is waited for, up to the
// configured wait or ctx, and decided again. user "" is a reader with no
// view, such as a download link: it never reads a pending file. The
// content returned is what the decision saw (the signature of an
// infected file). With no scanner and nothing quarantined it reads
// nothing.
func (s *Service) Admit(ctx context.Context, user string, ino uint64, z shedfs.Zone) (shedfs.Content, acl.Decision) {
	if !s.Scanning() && s.quarantined.Load() == 0 {
		return shedfs.Content{}, acl.Decision{}
	}
	deadline := time.Now().Add(s.opts.Wait)
	for {
		ch := s.verdictChan()
		c, err := s.Content(ino, z)
		if err != nil {
			return c, acl.Decision{Errno: syscall.EIO}
		}
		d := acl.OpenContent(user, c, s.opts.FailOpen)
		if d.Reason != acl.ReasonScanPending {
			return c, d
		}
		left := time.Until(deadline)
		if left <= 0 {
			return c, d
		}
		s.prioritize(ino)
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return c, d
		}
	}
}

func (s *Service) verdictChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.verdicts
}

// prioritize moves ino to the front of the queue, if queued: someone
// waits for it.
func (s *Service) prioritize(ino uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.queue {
		if q == ino {
			copy(s.queue[1:i+1], s.queue[:i])
			s.queue[0] = ino
			return
		}
	}
}

// Digest returns ino's SHA-256 in hex, computing it from the blob when it
// is not known for the current content (and storing it for a pending
// mark, or queueing a file that predates checksums).
func (s *Service) Digest(ino uint64) (string, error) {
	c, err := s.store.Content(ino)
	if err != nil || c.SHA256 != "" {
		return c.SHA256, err
	}
	gen, err := s.store.PendingGen(ino)
	if err != nil {
		return "", err
	}
	sum, err := s.hashBlob(ino)
	if err != nil {
		return "", err
	}
	if gen != 0 {
		if _, err := s.store.SetDigest(ino, gen, sum); err != nil {
			return "", err
		}
		return sum, nil
	}
	if c.State == shedfs.ScanUnscanned {
		// Never examined (written before checksums): queue it.
		if err := s.store.MarkPending(ino, ""); err == nil {
			s.Changed(ino, nil)
		}
	}
	return sum, nil
}

func (s *Service) hashBlob(ino uint64) (string, error) {
	f, _, err := openBlob(s.blobs, ino)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read blob %d: %w", ino, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// openBlob opens ino's content, through the cache of a bucket's blobs;
// a file that never had a byte written may have no blob, and reads as
// empty.
func openBlob(d *blobs.Dir, ino uint64) (io.ReadCloser, int64, error) {
	r, err := d.OpenReader(ino)
	if errors.Is(err, fs.ErrNotExist) {
		return io.NopCloser(strings.NewReader("")), 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open blob %d: %w", ino, err)
	}
	return r, r.Size(), nil
}

// HashFile returns the SHA-256 of what r holds, in hex; fsck
// --verify-content compares it with the stored digest.
func HashFile(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// errUnreachable marks a scan that got no verdict because clamd could not
// be reached or did not answer: the file stays pending (fail closed).
var errUnreachable = errors.New("scanner unreachable")

// Examine hashes and (when z is scanned and f is small enough) scans
// the content of f, of size bytes. An error wrapping errUnreachable means
// clamd gave no verdict; the digest is still returned.
func (s *Service) Examine(ctx context.Context, f io.Reader, size uint64, z shedfs.Zone) (shedfs.Content, error) {
	h := sha256.New()
	if !s.scanned(z, size) {
		if _, err := io.Copy(h, f); err != nil {
			return shedfs.Content{}, fmt.Errorf("read content: %w", err)
		}
		return shedfs.Content{SHA256: hex.EncodeToString(h.Sum(nil)), State: shedfs.ScanUnscanned}, nil
	}
	start := time.Now()
	tee := io.TeeReader(f, h)
	v, err := s.opts.Scanner.Scan(ctx, tee)
	if _, cerr := io.Copy(h, f); cerr != nil && err == nil {
		err = fmt.Errorf("read content: %w", cerr)
	}
	c := shedfs.Content{SHA256: hex.EncodeToString(h.Sum(nil))}
	switch {
	case err == nil && v.Infected:
		c.State, c.Detail = shedfs.ScanInfected, v.Signature
	case err == nil:
		c.State = shedfs.ScanClean
	case errors.Is(err, scan.ErrRefused):
		c.State, c.Detail = shedfs.ScanError, err.Error()
	default:
		s.opts.Metrics.scanned("unreachable", time.Since(start))
		s.opts.Metrics.setUp(false)
		return c, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	s.opts.Metrics.setUp(true)
	s.opts.Metrics.scanned(c.State.String(), time.Since(start))
	return c, nil
}

// IsUnreachable reports whether err from Examine means clamd gave no
// verdict.
func IsUnreachable(err error) bool { return errors.Is(err, errUnreachable) }

// ExamineImport hashes and scans an import's blob before it is named, and
// stores the verdict on its still unnamed inode (so the name appears with
// it). It returns the content: the caller refuses an infected import.
// clamd unreachable refuses it too, unless the daemon fails open.
func (s *Service) ExamineImport(ctx context.Context, ino uint64, f *os.File, size uint64, z shedfs.Zone) (shedfs.Content, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return shedfs.Content{}, fmt.Errorf("rewind import: %w", err)
	}
	c, err := s.Examine(ctx, f, size, z)
	if err != nil {
		if !IsUnreachable(err) || !s.opts.FailOpen {
			return c, err
		}
		c.State, c.Detail = shedfs.ScanError, "clamd unreachable"
	}
	if c.State == shedfs.ScanInfected {
		return c, nil
	}
	if _, err := s.store.SetVerdict(ino, 0, c); err != nil {
		return c, fmt.Errorf("store digest of import: %w", err)
	}
	return c, nil
}

// Release ends the quarantine of ino (the admin's decision).
func (s *Service) Release(ino uint64) error {
	if err := s.store.Release(ino); err != nil {
		return err
	}
	s.quarantineChanged()
	s.announce()
	return nil
}

// Forget is told that an inode was deleted: it may have been
// quarantined.
func (s *Service) Forget() {
	if s.quarantined.Load() > 0 {
		s.quarantineChanged()
	}
}

func (s *Service) quarantineChanged() {
	q, err := s.store.Quarantine()
	if err != nil {
		s.log.Error("count quarantine", "err", err)
		return
	}
	s.quarantined.Store(int64(len(q)))
	s.opts.Metrics.setQuarantined(len(q))
}

// announce wakes every Admit waiting for a verdict.
func (s *Service) announce() {
	s.mu.Lock()
	close(s.verdicts)
	s.verdicts = make(chan struct{})
	s.mu.Unlock()
}

// ForLink is what a download link asks before it serves ino (zone z):
// the same decision as an open from a view that did not write the file
// (pending: wait, then scan_pending, which a link answers with 503 and
// Retry-After; infected: EACCES), and, when allowed, the digest for the
// ETag, computed now if not known.
func (s *Service) ForLink(ctx context.Context, ino uint64, z shedfs.Zone) (etag string, c shedfs.Content, d acl.Decision) {
	c, d = s.Admit(ctx, "", ino, z)
	if !d.Allowed() {
		return "", c, d
	}
	sum, err := s.Digest(ino)
	if err != nil {
		return "", c, acl.Decision{Errno: syscall.EIO}
	}
	return sum, c, d
}
