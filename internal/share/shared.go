package share

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Shared is the concurrent sharing of one (worker, dataset) production among
// jobs. Jobs read from any goroutine. A reader that has read everything
// retained (it is at the front) either becomes the producer, calling produce
// without the lock held, or, when a production is already in flight, waits
// for it and then reads its result: k jobs reading at the same speed cause
// one production per item. Shared starts no goroutines, so there is nothing
// to close; a production runs on the goroutine of the reader that started it.
//
// How the shared stream ends: when produce returns io.EOF, every reader gets
// the retained items it has not read and then io.EOF. When produce returns
// any other error (or an item the window cannot hold, ErrItemTooLarge), the
// stream fails: every reader at the front, now or later, gets that error
// wrapped, after the retained items. The exception is a production cut short
// by its reader's context: that reader gets its context's error and another
// reader at the front takes over production.
type Shared[T Item] struct {
	produce func(ctx context.Context) (T, error)
	cfgErr  error

	mu        sync.Mutex
	w         *Window[T]
	producing bool          // a reader is producing, without the lock held
	done      chan struct{} // made by the first waiter; closed when the production ends
	eof       bool          // produce returned io.EOF
	failed    error         // the error that ended the stream, if not io.EOF
	waiting   int           // readers waiting for a production (for tests)
}

// NewShared returns a Shared that produces items with produce, bounded by
// cfg. produce is called by at most one reader at a time, with that reader's
// context, and must return io.EOF (unwrapped or wrapped) at the end of the
// data. An invalid cfg is reported by every Join and Read.
func NewShared[T Item](cfg Config, produce func(ctx context.Context) (T, error)) *Shared[T] {
	s := &Shared[T]{produce: produce}
	w, err := NewWindowConfig[T](cfg)
	if err != nil {
		s.cfgErr = err
		w = NewWindow[T](1)
	}
	if produce == nil && err == nil {
		s.cfgErr = errors.New("share: NewShared needs a produce function")
	}
	s.w = w
	return s
}

// Join adds job at the window start: its first reads are the oldest retained
// items. Joining twice is an error (ErrJobExists).
func (s *Shared[T]) Join(job string) error {
	if s.cfgErr != nil {
		return s.cfgErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Join(job)
}

// Leave removes job; a Read of job in progress returns ErrUnknownJob. When
// the last job leaves, the window's items are released. The end of the
// stream (io.EOF or a production error) is remembered.
func (s *Shared[T]) Leave(job string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Leave(job)
}

// Read returns job's next item: a retained one if there is one, else a new
// one, produced by this call or by the production in flight. It returns
// io.EOF after the last item, the production error wrapped once the stream
// failed, ctx's error if ctx ends while it waits or produces (job's position
// is then unchanged), or an error wrapping ErrUnknownJob.
func (s *Shared[T]) Read(ctx context.Context, job string) (T, error) {
	var zero T
	if s.cfgErr != nil {
		return zero, s.cfgErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		c, ok := s.w.cursors[job]
		if !ok {
			return zero, fmt.Errorf("share: read %q: %w", job, ErrUnknownJob)
		}
		if s.w.available(c) {
			item, _, _ := s.w.read(c, false)
			return item, nil
		}
		switch {
		case s.eof:
			return zero, io.EOF
		case s.failed != nil:
			return zero, s.failed
		case s.producing:
			if err := s.wait(ctx); err != nil {
				return zero, err
			}
			continue // the production ended: read its item, or take over
		}
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		item, done, err := s.produceLocked(ctx, c)
		if done {
			return item, err
		}
	}
}

// wait releases the lock until the production in flight ends or ctx ends; it
// returns with the lock held. The channel is made only when someone waits,
// so a job reading alone allocates nothing per item.
func (s *Shared[T]) wait(ctx context.Context) error {
	if s.done == nil {
		s.done = make(chan struct{})
	}
	done := s.done
	s.waiting++
	s.mu.Unlock()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	s.waiting--
	return err
}

// produceLocked runs one production for c's job, unlocking around produce.
// done=false means the production was abandoned without ending the stream
// and the caller should look again (another job may have left, say).
func (s *Shared[T]) produceLocked(ctx context.Context, c *cursor) (item T, done bool, err error) {
	var zero T
	s.producing = true
	s.mu.Unlock()
	item, perr := s.call(ctx)
	s.mu.Lock()
	s.producing = false
	if s.done != nil {
		close(s.done)
		s.done = nil
	}

	switch {
	case errors.Is(perr, io.EOF):
		s.eof = true
		return zero, false, nil // readers drain what is retained, then see EOF
	case perr != nil && ctx.Err() != nil:
		// This reader gave up; the stream did not fail, so the waiters go on.
		return zero, true, ctx.Err()
	case perr != nil:
		s.failed = fmt.Errorf("share: produce item %d: %w", s.w.end(), perr)
		return zero, true, s.failed
	}
	if _, err := s.w.Push(item); err != nil {
		if errors.Is(err, ErrNoDemand) {
			// Every job at the front left during the production (c's too,
			// or the caller would be at the front): drop the item.
			return zero, false, nil
		}
		s.failed = fmt.Errorf("share: %w", err)
		return zero, true, s.failed
	}
	if s.w.cursors[c.job] != c {
		return zero, false, nil // c's job left: the loop reports it
	}
	item, _, _ = s.w.read(c, true)
	return item, true, nil
}

// call runs produce, turning a panic into an error so that a broken
// pipeline cannot leave the window marked as producing forever.
func (s *Shared[T]) call(ctx context.Context) (item T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("produce panicked: %v", r)
		}
	}()
	return s.produce(ctx)
}

// Stats returns the window's counters.
func (s *Shared[T]) Stats() WindowStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Stats()
}

// JobStats returns job's counters, or false for a job that has not joined.
func (s *Shared[T]) JobStats(job string) (JobStats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.JobStats(job)
}

// Jobs returns the joined jobs, sorted.
func (s *Shared[T]) Jobs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Jobs()
}
