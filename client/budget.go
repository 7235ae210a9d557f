package client

import (
	"context"
	"sync"
)

// byteBudget bounds the bytes of buffered batches (Options.PrefetchBytes).
// A batch larger than the whole budget is let through alone, so it cannot
// deadlock.
type byteBudget struct {
	mu    sync.Mutex
	avail int64
	max   int64
	wake  chan struct{}
}

func newByteBudget(max int64) *byteBudget {
	return &byteBudget{avail: max, max: max, wake: make(chan struct{})}
}

func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.max)
	for {
		b.mu.Lock()
		if b.avail >= n {
			b.avail -= n
			b.mu.Unlock()
			return nil
		}
		ch := b.wake
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *byteBudget) release(n int64) {
	n = min(n, b.max)
	b.mu.Lock()
	b.avail += n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}
