package content

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/shedfs/shedfs"
)

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
		ino, closed, ok := s.next()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			}
		}
		if s.process(ctx, ino, closed) {
			continue
		}
		// clamd unreachable: ino went back to the front; wait a while.
		t := time.NewTimer(s.opts.Retry)
		select {
		case <-t.C:
		case <-s.stop:
			t.Stop()
			return
		}
	}
}

// next takes the first queued inode and its close callback.
func (s *Service) next() (uint64, func(shedfs.Content), bool) {
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
	if len(s.queue) == 0 {
		return 0, nil, false
	}
	ino := s.queue[0]
	s.queue = s.queue[1:]
	closed := s.queued[ino]
	delete(s.queued, ino)
	s.opts.Metrics.setQueue(len(s.queue))
	return ino, closed, true
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
func (s *Service) requeue(ino uint64, closed func(shedfs.Content)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.queued[ino]; ok {
		// A newer change came meanwhile and is queued already.
		if prev == nil {
			s.queued[ino] = closed
		} else if closed != nil {
			go closed(shedfs.Content{State: shedfs.ScanPending})
		}
		return
	}
	s.queued[ino] = closed
	s.queue = append([]uint64{ino}, s.queue...)
	s.opts.Metrics.setQueue(len(s.queue))
}

// process hashes and scans ino's content for its pending mark and stores
// the result; false when clamd could not be reached (ino is requeued).
func (s *Service) process(ctx context.Context, ino uint64, closed func(shedfs.Content)) bool {
	done := func(c shedfs.Content) {
		if closed != nil {
			closed(c)
		}
	}
	gen, err := s.store.PendingGen(ino)
	if err != nil || gen == 0 {
		c, _ := s.store.Content(ino)
		done(c)
		return true
	}
	rec, err := s.store.GetInode(ino)
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) {
			s.log.Error("content: read inode", "ino", ino, "err", err)
		}
		done(shedfs.Content{State: shedfs.ScanPending})
		return true
	}
	f, err := openBlob(s.blobs, ino)
	if err != nil {
		s.log.Error("content: open blob", "ino", ino, "err", err)
		done(shedfs.Content{State: shedfs.ScanPending})
		return true
	}
	defer f.Close()
	size := rec.Size
	if st, err := f.Stat(); err == nil {
		size = uint64(st.Size())
	}
	c, err := s.Examine(ctx, f, size, rec.Zone)
	s.opts.Metrics.hashed(size)
	if err != nil && !IsUnreachable(err) {
		s.log.Error("content: examine", "ino", ino, "err", err)
		done(shedfs.Content{State: shedfs.ScanPending})
		return true
	}
	if err != nil {
		if _, serr := s.store.SetDigest(ino, gen, c.SHA256); serr != nil {
			s.log.Error("content: store digest", "ino", ino, "err", serr)
		}
		if !s.opts.FailOpen {
			if ctx.Err() == nil {
				s.log.Warn("clamd unreachable, the file stays pending", "ino", ino, "err", err)
			}
			s.requeue(ino, closed)
			return false
		}
		c.State, c.Detail = shedfs.ScanError, "clamd unreachable"
	}
	stored, err := s.store.SetVerdict(ino, gen, c)
	if err != nil {
		s.log.Error("content: store verdict", "ino", ino, "err", err)
	}
	if !stored {
		c = shedfs.Content{State: shedfs.ScanPending, Writer: c.Writer}
	}
	if stored && c.State == shedfs.ScanInfected {
		s.log.Warn("infected file quarantined", "ino", ino, "signature", c.Detail)
		s.quarantineChanged()
	}
	s.announce()
	done(c)
	return true
}
