package client

import (
	"context"
	"time"
)

// The reorder gate of a deterministic job (ordered.go): it keeps the
// reorder buffer near half its bound by holding back, in the stream's
// own goroutine (put), a batch too far ahead of the next one the
// iterator must return.

// ahead is how many windows k is past the cursor's (0 for one at or
// before it).
func (r *orderedRun) ahead(k okey) uint64 {
	if !r.cur.less(k) || r.nw == 0 {
		return 0
	}
	return uint64(k.epoch-r.cur.epoch)*r.nw + k.w - r.cur.w
}

// gateOrdered holds a stream's batch x back while it is too far ahead of
// the cursor: orderedRun.soft windows, widened by one window for every
// Options.ReorderStall the cursor has not moved (a worker may hold the
// window awaited, leased again after its worker died, behind batches
// the gate holds back). A stream that waits backpressures its worker
// only; the others go on.
func (it *Iterator) gateOrdered(ctx context.Context, r *orderedRun, x item) error {
	k, err := r.keyOf(x)
	if err != nil {
		return nil // Next says so
	}
	counted := false
	for {
		it.mu.Lock()
		since := time.Since(r.lastMove)
		extra := uint64(since / r.stall)
		ahead := r.ahead(k)
		ok := r.done || ahead < r.soft+extra
		switch {
		case ok && ahead >= r.soft:
			r.escapes++
		case !ok && !counted:
			r.held, counted = r.held+1, true
		}
		moved := r.moved
		it.mu.Unlock()
		if ok {
			return nil
		}
		t := time.NewTimer(r.stall - since%r.stall)
		select {
		case <-moved:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}
