package content

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
	"github.com/shedfs/shedfs/metadata"
)

// batchSize is how many files the worker examines before it stores
// their verdicts in one transaction.
const batchSize = 64

// item is one queued file and the callback of its close, if any.
type item struct {
	ino    uint64
	closed func(shedfs.Content)
}

// work is the one worker: it takes the queue in order, refilling it from
// the store's pending marks when it ran over or at start, until Close.
func (s *Service) work() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	for {
		batch := s.next(batchSize)
		if len(batch) == 0 {
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			}
		}
		if s.process(ctx, batch) {
			continue
		}
		// clamd unreachable: the files went back to the front; wait.
		t := time.NewTimer(s.opts.Retry)
		select {
		case <-t.C:
		case <-s.stop:
			t.Stop()
			return
		}
	}
}

// next takes up to n queued inodes with their close callbacks.
func (s *Service) next(n int) []item {
	s.mu.Lock()
	refill := len(s.queue) == 0 && s.overflow
	if refill {
		s.overflow = false
	}
	s.mu.Unlock()
	if refill {
		s.refill()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(n, len(s.queue))
	out := make([]item, n)
	for i, ino := range s.queue[:n] {
		out[i] = item{ino: ino, closed: s.queued[ino]}
		delete(s.queued, ino)
	}
	s.queue = s.queue[n:]
	s.opts.Metrics.setQueue(len(s.queue))
	return out
}

// refill reads pending marks from the store into the queue until it is
// full (and then notes that more may wait).
func (s *Service) refill() {
	var after uint64
	for {
		page, err := s.store.PendingContent(after, 1024)
		if err != nil {
			s.log.Error("read content queue", "err", err)
			return
		}
		s.mu.Lock()
		for _, p := range page {
			after = p.Ino
			if _, ok := s.queued[p.Ino]; ok {
				continue
			}
			if len(s.queue) >= s.opts.QueueSize {
				s.overflow = true
				s.mu.Unlock()
				return
			}
			s.queued[p.Ino] = nil
			s.queue = append(s.queue, p.Ino)
		}
		s.opts.Metrics.setQueue(len(s.queue))
		s.mu.Unlock()
		if len(page) < 1024 {
			return
		}
	}
}

// requeue puts ino back at the front after clamd could not be reached.
func (s *Service) requeue(it item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.queued[it.ino]; ok {
		// A newer change came meanwhile and is queued already.
		if prev == nil {
			s.queued[it.ino] = it.closed
		} else if it.closed != nil {
			go it.closed(shedfs.Content{State: shedfs.ScanPending})
		}
		return
	}
	s.queued[it.ino] = it.closed
	s.queue = append([]uint64{it.ino}, s.queue...)
	s.opts.Metrics.setQueue(len(s.queue))
}

// outcome is what examining one queued file came to.
type outcome int

const (
	outcomeDone        outcome = iota // nothing to store
	outcomeStore                      // a verdict to store
	outcomeUnreachable                // clamd gave no verdict: retry
)

// process hashes and scans a batch of files for their pending marks and
// stores the results in one transaction; false when clamd could not be
// reached (that file and the rest of the batch are requeued).
func (s *Service) process(ctx context.Context, batch []item) bool {
	var vs []metadata.Verdict
	var waiting []item
	for i, it := range batch {
		v, c, out := s.examineQueued(ctx, it.ino)
		switch out {
		case outcomeDone:
			if it.closed != nil {
				it.closed(c)
			}
		case outcomeStore:
			vs = append(vs, v)
			waiting = append(waiting, it)
		case outcomeUnreachable:
			for j := len(batch) - 1; j >= i; j-- {
				s.requeue(batch[j])
			}
			s.storeVerdicts(vs, waiting)
			return false
		}
	}
	s.storeVerdicts(vs, waiting)
	return true
}

// storeVerdicts stores the verdicts of one batch and tells the closes.
func (s *Service) storeVerdicts(vs []metadata.Verdict, waiting []item) {
	if len(vs) == 0 {
		return
	}
	stored, err := s.store.SetVerdicts(vs)
	if err != nil {
		s.log.Error("content: store verdicts", "files", len(vs), "err", err)
		stored = make([]bool, len(vs))
	}
	infected := false
	for i, v := range vs {
		c := v.Content
		if !stored[i] {
			c = shedfs.Content{State: shedfs.ScanPending}
		} else if c.State == shedfs.ScanInfected {
			infected = true
			s.log.Warn("infected file quarantined", "ino", v.Ino, "signature", c.Detail)
		}
		if waiting[i].closed != nil {
			waiting[i].closed(c)
		}
	}
	if infected {
		s.quarantineChanged()
	}
	s.announce()
}

// examineQueued hashes and scans ino's content for its pending mark.
func (s *Service) examineQueued(ctx context.Context, ino uint64) (metadata.Verdict, shedfs.Content, outcome) {
	gen, err := s.store.PendingGen(ino)
	if err != nil || gen == 0 {
		c, _ := s.store.Content(ino)
		return metadata.Verdict{}, c, outcomeDone
	}
	pending := shedfs.Content{State: shedfs.ScanPending}
	rec, err := s.store.GetInode(ino)
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) {
			s.log.Error("content: read inode", "ino", ino, "err", err)
		}
		return metadata.Verdict{}, pending, outcomeDone
	}
	f, blobSize, err := openBlob(s.blobs, ino)
	if err != nil {
		s.log.Error("content: open blob", "ino", ino, "err", err)
		return metadata.Verdict{}, pending, outcomeDone
	}
	defer f.Close()
	size := uint64(blobSize)
	c, err := s.Examine(ctx, f, size, rec.Zone)
	s.opts.Metrics.hashed(size)
	if err != nil && !IsUnreachable(err) {
		s.log.Error("content: examine", "ino", ino, "err", err)
		return metadata.Verdict{}, pending, outcomeDone
	}
	if err != nil {
		if _, serr := s.store.SetDigest(ino, gen, c.SHA256); serr != nil {
			s.log.Error("content: store digest", "ino", ino, "err", serr)
		}
		if !s.opts.FailOpen {
			if ctx.Err() == nil {
				s.log.Warn("clamd unreachable, the file stays pending", "ino", ino, "err", err)
			}
			return metadata.Verdict{}, pending, outcomeUnreachable
		}
		c.State, c.Detail = shedfs.ScanError, "clamd unreachable"
	}
	return metadata.Verdict{Ino: ino, Gen: gen, Content: c}, c, outcomeStore
}
