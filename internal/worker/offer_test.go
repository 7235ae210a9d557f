package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/transport/batch"
)

// offerTask is a task with no node behind it: its job poll never fires
// within a test, so offer only queues or sees the cancellation.
func offerTask(t *testing.T) *task {
	tk := &task{ended: make(chan struct{}), poll: time.NewTicker(time.Hour)}
	tk.ctx, tk.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { tk.poll.Stop(); tk.cancel() })
	return tk
}

func TestOffer(t *testing.T) {
	tk := offerTask(t)
	ch := make(chan int, 1)
	if err := offer(tk, ch, 1); err != nil {
		t.Fatalf("offer with room: %v", err)
	}
	// Full: offer waits until the task is cancelled (the job is gone, or
	// the node closes), and says so.
	errc := make(chan error, 1)
	go func() { errc <- offer(tk, ch, 2) }()
	select {
	case err := <-errc:
		t.Fatalf("offer to a full queue returned %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	tk.cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("offer after cancel: %v", err)
	}
	if got := <-ch; got != 1 {
		t.Fatalf("queued %d", got)
	}
}

func TestFrameQueueGather(t *testing.T) {
	tk := offerTask(t)
	q := frameQueue{t: tk, out: make(chan *batch.Frame, 4)}
	frames := []*batch.Frame{{}, {}, {}}
	for _, f := range frames {
		if err := q.offer(f); err != nil {
			t.Fatal(err)
		}
	}
	if q.queued() != 3 || tk.produced.Load() != 3 {
		t.Fatalf("queued %d, produced %d", q.queued(), tk.produced.Load())
	}
	var fs []*batch.Frame
	if open := q.gather(&fs, 2); !open || len(fs) != 2 || fs[0] != frames[0] || fs[1] != frames[1] {
		t.Fatalf("gather(2) = %v, %d frames", open, len(fs))
	}
	// Fewer waiting than wanted: take them without blocking.
	fs = fs[:0]
	if open := q.gather(&fs, 5); !open || len(fs) != 1 || fs[0] != frames[2] {
		t.Fatalf("gather(5) with one waiting = %v, %d frames", open, len(fs))
	}
	boom := errors.New("boom")
	q.end(boom)
	if open := q.gather(&fs, 5); open || q.err != boom {
		t.Fatalf("gather after end: open %v, err %v", open, q.err)
	}
}
