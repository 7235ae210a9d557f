package transport

import (
	"context"
	"fmt"
	"sync"
)

// ByteBudget is a counting semaphore of bytes: what a node lets hostile
// peers' requests hold (MaxRPCBytesPerConn, MaxRPCBytesInFlight), and what a
// client lets its prefetched batches hold (client.Options.PrefetchBytes).
type ByteBudget struct {
	name string // what the budget is, for errors: its config field
	mu   sync.Mutex
	size int64
	free int64
	wake chan struct{} // closed and replaced on every Release
}

// NewByteBudget returns a budget of size bytes, all free.
func NewByteBudget(name string, size int64) *ByteBudget {
	return &ByteBudget{name: name, size: size, free: size, wake: make(chan struct{})}
}

// BudgetError is an Acquire that did not get its bytes: more than the whole
// budget (Err nil), or not in time (Err is the context's error).
type BudgetError struct {
	Name    string
	Size, N int64
	Err     error
}

func (e *BudgetError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%d bytes are more than the whole %s budget of %d bytes", e.N, e.Name, e.Size)
	}
	return fmt.Sprintf("node busy: %d more bytes do not fit the %s budget of %d bytes in time (%v); retry later", e.N, e.Name, e.Size, e.Err)
}

// Unwrap returns the context's error of an Acquire that ran out of time.
func (e *BudgetError) Unwrap() error { return e.Err }

// Size is the budget's bound.
func (b *ByteBudget) Size() int64 { return b.size }

// Acquire takes n bytes, waiting for Releases until ctx ends. More than
// Size can never be taken: that fails at once.
func (b *ByteBudget) Acquire(ctx context.Context, n int64) error {
	if n > b.size {
		return &BudgetError{Name: b.name, Size: b.size, N: n}
	}
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return &BudgetError{Name: b.name, Size: b.size, N: n, Err: ctx.Err()}
		}
	}
}

// Release gives back n bytes taken by Acquire.
func (b *ByteBudget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// InUse returns the bytes taken.
func (b *ByteBudget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size - b.free
}
